"""LLM judges as scorers: a pairwise judge (which answer fits this user?) and a 0-10 rating judge.

``--model-type judge-pairwise``: every pair is judged in both orders, chosen shown as answer A and
then as answer B (prompts in `judge_prompts.py`). Per order:

- ``--judge-mode logits`` (default): one forward pass on the chat ending in the *forced prefix*, the
  start of ``Result: A`` / ``Result: B`` common to both as this tokenizer writes them
  (`verdicts.read_choices`); margin = log P(chosen's letter) - log P(rejected's letter), each letter
  read along its own tokens after the prefix. Verdict 1 (chosen preferred) when margin > 0, 0 when
  < 0, -1 (no verdict) on an exact tie.
- ``--judge-mode generate``: greedy generation of at most ``--max-new-tokens``; the last
  ``Result: X`` after removing ``<think>`` blocks is the verdict (`verdicts.parse_verdict`); none
  found -> -1, never "A". The texts are kept in scores.jsonl (the last 2,000 characters).

Record fields: ``verdict_chosen_first`` / ``verdict_chosen_second`` (1 / 0 / -1),
``margin_chosen_first`` / ``margin_chosen_second`` (the margin in favour of chosen; null in generate
mode), and ``chosen_score`` = mean over the two orders of the preference for chosen in [-1, 1]
(logits: P(chosen) - P(rejected) renormalised over the two letters, i.e. tanh(margin / 2);
generate: +1 / -1 / 0 for chosen / rejected / no verdict), ``rejected_score`` = -chosen_score.

`judge_figures` makes results.json's figures. ``accuracy``, ``accuracy_ties_half``, ``macro_accuracy``
and ``per_subset[*].accuracy`` are over all 2N verdicts (metric module, "pairwise" config).
``ci95`` (overall and per subset) takes the *pair* as the unit, because a pair's two verdicts are
not independent: the Wilson interval of that accuracy with n = N pairs (`pair_interval`; exact when
the two orders always agree, conservative otherwise; ``ci95_unit`` "pairs", ``ci95_method`` "wilson").
``num_pairs`` is N, ``num_verdicts`` 2N; ``no_verdict`` counts verdicts without a decision, and ``ties`` is
the same count (a no-verdict is the judge's tie: wrong, half right in ``accuracy_ties_half``).
Also ``consistent_accuracy`` (right in both orders, over N pairs)
and ``position_bias`` (accuracy with chosen as A minus with chosen as B).

``--model-type judge-score``: the judge rates each answer alone from 0 to 10. In logits mode the
score is the expected rating under the judge's probabilities of the answers ``Rating: 0`` …
``Rating: 10`` after their forced prefix (a rating written in two tokens, "1" "0", is read over two
positions of the same pass), renormalised over the ratings. In generate mode the score is the last
``Rating: N`` stated. An answer without a rating is a no-verdict: its pair gets the sentinel score
-1.0 for both answers, a tie, which the metric counts as wrong (the parsed rating is still kept in
``rating_*``).

Over-long prompts follow the classifiers' policy (`fitting.py`): the lowest-ranked posts go first
(``truncated``), then the question's end (marked ``…``; the record gets ``question_shortened: true`` and
results.json counts ``shortened_questions``); an answer is never cut -- a prompt that does not fit with its
answers alone is a one-line error. In generate mode ``--max-new-tokens`` of the max length are kept free.

`score_answers` (Best-of-N, RL rewards) rates any number of answers per prompt with the rating judge; the
pairwise judge gives no score per answer and refuses.

Model quirks come from the registry: ``ModelSpec.logits_template_kwargs`` (e.g. Qwen3's
``enable_thinking=False``) are passed to the chat template in logits mode.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple, NoReturn

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.base import (
    AnswerGroup,
    AnswerScores,
    Scorer,
    ScoreRecord,
    ScoringPlan,
    token_budget_batches,
)
from personalized_rewardbench.scoring.devices import auto_batch_tokens
from personalized_rewardbench.scoring.fitting import ELLIPSIS, fit_item, token_ends
from personalized_rewardbench.scoring.judge_backends import JudgeSettings, make_backend, shared_prefix_length
from personalized_rewardbench.scoring.judge_figures import judge_figures, pair_interval  # noqa: F401 - re-exported
from personalized_rewardbench.scoring.judge_prompts import (
    LETTERS,
    PAIRWISE_PROMPT,
    VERDICT_FORMAT,
    pairwise_chat,
)
from personalized_rewardbench.scoring.registry import ModelSpec
from personalized_rewardbench.scoring.verdicts import ChoiceReader, parse_verdict, read_choices

JUDGE_MODES = ("logits", "generate")
TEXT_LIMIT = 2000
NO_RATING_SCORE = -1.0  # both answers of a pair with an unparsable rating: a tie, counted wrong
MIN_CONTENT_TOKENS = 64  # room a prompt needs beyond the judge's instructions (question, answers)
_PROBE = EvalItem("probe", "probe", "Which one?", (), "The first answer.", "The second answer.")


class JudgePrompts(NamedTuple):
    """An item's prompts as they are scored, and how they were fitted to the max length (`fitting`)."""

    prompts: list[list[int]]
    truncated: bool  # profile posts were dropped
    question_shortened: bool = False  # no posts left and still too long: the question's end was cut

    def flags(self) -> dict[str, bool]:
        """The record fields: `truncated`, and `question_shortened` only when it happened (records of runs that
        never shorten stay as they were)."""
        return {"truncated": self.truncated, **({"question_shortened": True} if self.question_shortened else {})}


def shortened_questions(records: list[dict[str, Any]]) -> int:
    """results.json `shortened_questions`: pairs whose question was shortened to fit."""
    return sum(1 for record in records if record.get("question_shortened"))


def _clip(text: str) -> str:
    """The last TEXT_LIMIT characters (the verdict is at the end), marked when cut."""
    return text if len(text) <= TEXT_LIMIT else "…" + text[-TEXT_LIMIT:]


class _Judge(Scorer):
    """What both judges share: two prompts per item, encoding with truncation, batching, backend calls."""

    model_type = ""
    prompt_version = ""
    answer_format = ""
    choices: tuple[str, ...] = ()

    def __init__(self, settings: JudgeSettings, spec: ModelSpec, backend):
        self.name = settings.model
        self.mode = settings.judge_mode
        self.max_new_tokens = settings.max_new_tokens
        self.backend = backend
        self.tokenizer = backend.tokenizer
        self.revision = backend.revision
        self.device = backend.device
        self.batch_tokens = (
            settings.batch_tokens if settings.batch_tokens is not None else auto_batch_tokens(self.device)
        )
        self.template_kwargs = dict(spec.logits_template_kwargs) if self.mode == "logits" else {}
        self.merge_system = not self._accepts_system_role()
        self._reader_notice = ""
        self.reader: ChoiceReader | None = None
        if self.mode == "logits":
            self.reader = read_choices(
                self.tokenizer, self.answer_format, list(self.choices), self.chats(_PROBE)[0], self.template_kwargs
            )
            if self.reader.context == "text":
                self._reader_notice = (
                    f"judge {self.name}: its chat template cannot end on an assistant message, so "
                    f"{self.answer_format.format('X')!r} was tokenized on its own to find the forced prefix"
                )
        self._check_room()

    def chats(self, item: EvalItem, answers: Sequence[str] | None = None) -> list[list[dict[str, str]]]:
        """The item's prompts (for a rating judge: one per answer of `answers`, default chosen and rejected)."""
        raise NotImplementedError

    def protocol(self) -> dict[str, Any]:
        protocol = {
            "judge_mode": self.mode,
            "judge_prompt": self.prompt_version + ("+system-in-user" if self.merge_system else ""),
            "backend": self.backend.name,
            "max_length": self.backend.max_length,
            **self.backend.describe(),
        }
        if self.template_kwargs:
            protocol["chat_template_kwargs"] = dict(sorted(self.template_kwargs.items()))
        if self.reader is not None:
            protocol["forced_prefix"] = self.tokenizer.decode(list(self.reader.prefix))
            protocol["forced_prefix_context"] = self.reader.context
            protocol["multi_token_choices"] = sorted(c for c, path in self.reader.paths.items() if len(path) > 1)
        if self.mode == "generate":
            protocol["max_new_tokens"] = self.max_new_tokens
        return protocol

    def runtime_stats(self, plan: ScoringPlan) -> dict[str, Any]:
        """The plan's figures and what the backend counted while scoring it."""
        stats = {"batch_tokens": self.batch_tokens, **self.backend.runtime_stats(plan.counters), **plan.stats}
        if self.mode == "generate":  # generation runs every prompt in full
            stats.update(shared_prefix=False, shared_prefix_note="not used in generate mode")
        return stats

    # -- encoding ---------------------------------------------------------------------------------
    def _accepts_system_role(self) -> bool:
        chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
        try:
            self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False, **self.template_kwargs)
        except Exception:  # templates that reject a system turn raise jinja's TemplateException
            return False
        return True

    def _check_room(self) -> None:
        """One-line errors when the max length leaves no room for a prompt (in generate mode, next to
        --max-new-tokens): a prompt needs the judge's instructions plus MIN_CONTENT_TOKENS."""
        limit = self.backend.max_length
        need = max(len(self.encode(chat)) for chat in self.chats(_PROBE)) + MIN_CONTENT_TOKENS
        if limit <= need:
            raise UserError(
                f"{self.name!r} takes at most {limit} tokens, too few for the judge prompt ({need}); raise --max-length"
            )
        if self.mode == "generate" and self.max_new_tokens > limit - need:
            raise UserError(
                f"--max-new-tokens {self.max_new_tokens} leaves no room for the prompt: "
                f"{self.name!r} takes at most {limit} tokens "
                f"and the judge prompt needs at least {need}; use --max-new-tokens {limit - need} or less"
            )

    def encode(self, chat: list[dict[str, str]]) -> list[int]:
        """Prompt token ids: the chat with the generation prompt, tokenized by the template (no
        re-tokenization; the registry's `logits_template_kwargs` in logits mode), then in logits mode
        the forced prefix."""
        encoded = self.tokenizer.apply_chat_template(
            chat, add_generation_prompt=True, tokenize=True, return_dict=True, **self.template_kwargs
        )
        ids = list(encoded["input_ids"])
        return ids + list(self.reader.prefix) if self.reader is not None else ids

    def _room(self) -> int:
        """Prompt tokens that fit: the max length less what is read or generated after the prompt."""
        return self.backend.max_length - (self.max_new_tokens if self.mode == "generate" else self._reader_depth() - 1)

    def encode_item(self, item: EvalItem, answers: Sequence[str] | None = None) -> JudgePrompts:
        """The item's prompts, every one within the room the max length leaves, by the classifiers' over-long
        policy (`fitting.fit_item`): drop the lowest-ranked posts, then shorten the question, never cut an answer."""
        room = self._room()
        fitted = fit_item(
            item,
            lambda candidate: [self.encode(chat) for chat in self.chats(candidate, answers)],
            lambda prompts: max(map(len, prompts)) <= room,
            lambda question: token_ends(self.tokenizer, question),
            self._answers_too_long,
        )
        return JudgePrompts(fitted.encoded, fitted.truncated, fitted.question_shortened)

    def _answers_too_long(self, item: EvalItem, prompts: list[list[int]]) -> NoReturn:
        longest, room = max(map(len, prompts)), self._room()
        reserved = f", less {self.backend.max_length - room} for the answer" if room < self.backend.max_length else ""
        raise UserError(
            f"item {item.id}: the {self.model_type} prompt takes {longest} tokens with its answers alone (no posts, "
            f"the question cut to '{ELLIPSIS}'), over the {room} tokens the max length of {self.backend.max_length} "
            f"leaves{reserved}; answers are never cut",
            "pass a larger --max-length, or use a model with a longer context",
        )

    def _reader_depth(self) -> int:
        return self.reader.depth if self.reader is not None else 1

    def _batches(self, prompts: Sequence[list[list[int]]]) -> list[list[int]]:
        """Token-budget batches of prompt groups (each prompt with its reserved tokens and reader chains)."""
        reserve = self.max_new_tokens if self.mode == "generate" else self._reader_depth() - 1
        copies = len(self.reader.chains) if self.reader is not None else 1
        lengths = [copies * len(group) * (max(map(len, group)) + reserve) for group in prompts]
        return token_budget_batches(lengths, self.batch_tokens)

    def plan(self, items: Sequence[EvalItem]) -> ScoringPlan:
        encoded = [self.encode_item(item) for item in items]
        prompts = [fitted.prompts for fitted in encoded]
        stats, notices = self._sharing(prompts)
        return ScoringPlan.of(items, self._batches(prompts), encoded, notices, stats)

    def score_answers(self, groups: Sequence[AnswerGroup]) -> list[AnswerScores]:
        raise UserError(
            f"{self.name!r} as a {self.model_type} judge compares two answers and gives no score per answer",
            "use it as a judge-score judge (a 0-10 rating per answer) or use a classifier reward model",
        )

    def _sharing(self, prompts: Sequence[list[list[int]]]) -> tuple[dict[str, Any], list[str]]:
        """(runtime figures, notices) of a plan: say when logits mode cannot share the prompts' common start."""
        notices = [self._reader_notice] if self._reader_notice else []
        if self.mode != "logits" or not prompts or not hasattr(self.backend, "shared_prefix"):  # vLLM: its own cache
            return {}, notices
        self._verify(prompts)
        note = self.backend.shared_prefix_note
        if note:
            if note != "disabled by --no-shared-prefix":
                notices.append(f"shared prefix: off -- {note}: every judge prompt of {self.name} runs in full")
            return {}, notices
        unshared = sum(1 for group in prompts if shared_prefix_length(group, self._reader_depth()) == 0)
        if unshared:
            notices.append(
                f"shared prefix: partial -- {unshared} of {len(prompts)} items' prompts share no start; "
                "their batches run in full"
            )
        return {"shared_prefix_fallbacks": unshared}, notices

    def _verify(self, prompts: Sequence[list[list[int]]]) -> None:
        """The shared-prefix check before the model's first shared batch (logits mode, transformers backend)."""
        if self.reader is not None and prompts and hasattr(self.backend, "verify"):
            first = [prompt + list(self.reader.chains[0]) for prompt in prompts[0]]
            self.backend.verify(first, self.reader.tokens, self.reader.depth)

    def _choice_logprobs(self, groups: list[list[list[int]]], counters=None) -> list[list[dict[str, float]]]:
        """Per group, per prompt: log P(choice) of each choice the reader has, read after the prompt
        (each prompt extended by the reader's chains: one forward pass for multi-token choices)."""
        reader = self.reader
        chains = reader.chains
        extended = [[prompt + list(chain) for prompt in group for chain in chains] for group in groups]
        rows = self.backend.next_token_logprobs(extended, reader.tokens, last=reader.depth, counters=counters)
        size = len(chains)
        return [
            [reader.logprobs(group_rows[n * size : (n + 1) * size]) for n in range(len(group))]
            for group, group_rows in zip(groups, rows)
        ]


class PairwiseJudge(_Judge):
    """Judges each pair in both orders; see the module docstring for the record fields."""

    model_type = "judge-pairwise"
    prompt_version = PAIRWISE_PROMPT
    answer_format = VERDICT_FORMAT
    choices = LETTERS

    def __init__(self, settings: JudgeSettings, spec: ModelSpec, backend):
        super().__init__(settings, spec, backend)
        missing = [letter for letter in LETTERS if self.reader is not None and letter not in self.reader.paths]
        if missing:
            raise UserError(
                f"{self.name!r}: its tokenizer cannot spell the verdict {VERDICT_FORMAT.format(missing[0])!r} "
                "distinctly; use --judge-mode generate"
            )

    def chats(self, item: EvalItem, answers: Sequence[str] | None = None) -> list[list[dict[str, str]]]:
        """[chosen shown as A, chosen shown as B]."""
        return [
            pairwise_chat(item, chosen_first=True, merge_system=self.merge_system),
            pairwise_chat(item, chosen_first=False, merge_system=self.merge_system),
        ]

    def score(self, plan: ScoringPlan, batch: Sequence[int]) -> list[ScoreRecord]:
        encoded = [plan.encodings[i] for i in batch]
        groups = [prompts.prompts for prompts in encoded]
        if self.mode == "logits":
            orders = [self._from_logprobs(group) for group in self._choice_logprobs(groups, plan.counters)]
        else:
            flat = [p for group in groups for p in group]
            texts = self.backend.generate(flat, self.max_new_tokens, counters=plan.counters)
            orders = [self._from_texts(texts[2 * n], texts[2 * n + 1]) for n in range(len(groups))]
        return [{**record, **prompts.flags()} for record, prompts in zip(orders, encoded)]

    @staticmethod
    def _from_logprobs(group: list[dict[str, float]]) -> ScoreRecord:
        first, second = group  # chosen is A in the first prompt, B in the second
        margins = [first["A"] - first["B"], second["B"] - second["A"]]
        verdicts = [1 if m > 0 else 0 if m < 0 else -1 for m in margins]
        preference = [0.0 if math.isnan(m) else math.tanh(m / 2) for m in margins]
        chosen = sum(preference) / 2
        return {
            "chosen_score": chosen,
            "rejected_score": 0.0 - chosen,
            "verdict_chosen_first": verdicts[0],
            "margin_chosen_first": margins[0] if math.isfinite(margins[0]) else None,
            "verdict_chosen_second": verdicts[1],
            "margin_chosen_second": margins[1] if math.isfinite(margins[1]) else None,
        }

    @staticmethod
    def _from_texts(first: str, second: str) -> ScoreRecord:
        chosen_letters = ("A", "B")
        verdicts = []
        for text, chosen_letter in zip((first, second), chosen_letters):
            letter = parse_verdict(text)
            verdicts.append(-1 if letter is None else int(letter == chosen_letter))
        chosen = sum({1: 1.0, 0: -1.0, -1: 0.0}[v] for v in verdicts) / 2
        return {
            "chosen_score": chosen,
            "rejected_score": 0.0 - chosen,
            "verdict_chosen_first": verdicts[0],
            "margin_chosen_first": None,
            "verdict_chosen_second": verdicts[1],
            "margin_chosen_second": None,
            "text_chosen_first": _clip(first),
            "text_chosen_second": _clip(second),
        }

    def summarize(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        """Figures over both orders (2N verdicts), all through the metric module; they replace the
        pointwise defaults in results.json."""
        return {**judge_figures(records), "shortened_questions": shortened_questions(records)}


def make_judge(settings: JudgeSettings, spec: ModelSpec, model_type: str) -> _Judge:
    """The judge scorer for `model_type` ("judge-pairwise" | "judge-score")."""
    if settings.judge_mode not in JUDGE_MODES:
        raise UserError(f"unknown --judge-mode {settings.judge_mode!r}: choose one of {', '.join(JUDGE_MODES)}")
    if settings.max_new_tokens < 1:
        raise UserError(f"--max-new-tokens must be positive, got {settings.max_new_tokens}")
    from personalized_rewardbench.scoring.rating_judge import ScoreJudge  # it builds on _Judge, defined here

    judge = {"judge-pairwise": PairwiseJudge, "judge-score": ScoreJudge}.get(model_type)
    if judge is None:
        raise UserError(f"unknown judge type {model_type!r}: choose judge-pairwise or judge-score")
    return judge(settings, spec, make_backend(settings, spec))
