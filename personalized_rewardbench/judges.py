"""LLM judges as scorers: a pairwise judge (which answer fits this user?) and a 0-10 rating judge.

``--model-type judge-pairwise``: every pair is judged in both orders, chosen shown as answer A and
then as answer B (prompts in `judge_prompts.py`). Per order:

- ``--judge-mode logits`` (default): one forward pass on the chat ending in the assistant text
  ``Result:``; margin = log P(chosen's letter) - log P(rejected's letter) over the next token, each
  letter's probability summed over its single-token spellings ("A", " A"; `verdicts.choice_token_ids`).
  Verdict 1 (chosen preferred) when margin > 0, 0 when < 0, -1 (no verdict) on an exact tie.
- ``--judge-mode generate``: greedy generation of at most ``--max-new-tokens``; the last
  ``Result: X`` after removing ``<think>`` blocks is the verdict (`verdicts.parse_verdict`); none
  found -> -1, never "A". The texts are kept in scores.jsonl (the last 2,000 characters).

Record fields: ``verdict_chosen_first`` / ``verdict_chosen_second`` (1 / 0 / -1),
``margin_chosen_first`` / ``margin_chosen_second`` (the margin in favour of chosen; null in generate
mode), and ``chosen_score`` = mean over the two orders of the preference for chosen in [-1, 1]
(logits: P(chosen) - P(rejected) renormalised over the two letters, i.e. tanh(margin / 2);
generate: +1 / -1 / 0 for chosen / rejected / no verdict), ``rejected_score`` = -chosen_score.
`summarize` makes results.json's ``accuracy``, ``ci95``, ``per_subset`` the figures over all 2N
verdicts (metric module, "pairwise" config; the interval treats the 2N verdicts as independent),
``ties`` the number of no-verdicts among them, plus ``consistent_accuracy`` (right in both orders),
``position_bias`` (accuracy with chosen as A minus with chosen as B) and ``no_verdict``.

``--model-type judge-score``: the judge rates each answer alone from 0 to 10. In logits mode the
score is the expected rating under the next-token distribution after ``Rating:``, restricted to the
tokens "0".."9" and "10" when "10" is a single token (when it is not, a 10 starts with the token "1"
and counts as 1: a known limit). In generate mode the score is the last ``Rating: N`` stated. An
answer without a rating is a no-verdict: its pair gets the sentinel score -1.0 for both answers, a
tie, which the metric counts as wrong (the parsed rating is still kept in ``rating_*``).
"""

from __future__ import annotations

import math
from typing import Any

from personalized_rewardbench.accuracy import pairwise_accuracy
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.eval_items import EvalItem
from personalized_rewardbench.judge_backends import make_backend
from personalized_rewardbench.judge_prompts import (
    LETTERS,
    PAIRWISE_PROMPT,
    RATING_PREFIX,
    SCORE_PROMPT,
    VERDICT_PREFIX,
    pairwise_chat,
    score_chat,
)
from personalized_rewardbench.registry import ModelSpec
from personalized_rewardbench.run_config import RunConfig
from personalized_rewardbench.scoring import ScoreRecord, token_budget_batches
from personalized_rewardbench.verdicts import choice_token_ids, parse_rating, parse_verdict

JUDGE_MODES = ("logits", "generate")
TEXT_LIMIT = 2000
NO_RATING_SCORE = -1.0  # both answers of a pair with an unparsable rating: a tie, counted wrong
RATINGS = [str(n) for n in range(11)]


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    return top if top == -math.inf else top + math.log(sum(math.exp(v - top) for v in values))


def _clip(text: str) -> str:
    """The last TEXT_LIMIT characters (the verdict is at the end), marked when cut."""
    return text if len(text) <= TEXT_LIMIT else "…" + text[-TEXT_LIMIT:]


class _Judge:
    """What both judges share: two prompts per item, encoding with truncation, batching, backend calls."""

    model_type = ""
    prompt_version = ""
    prefix_text = ""

    def __init__(self, config: RunConfig, spec: ModelSpec, backend):
        self.name = config.model
        self.mode = config.judge_mode
        self.max_new_tokens = config.max_new_tokens
        self.batch_tokens = config.batch_tokens
        self.backend = backend
        self.tokenizer = backend.tokenizer
        self.revision = backend.revision
        self.device = backend.device
        self.merge_system = not self._accepts_system_role()
        self._prefix_ids = list(self.tokenizer(self.prefix_text, add_special_tokens=False)["input_ids"])
        self._encoded: dict[int, tuple[list[list[int]], bool]] = {}

    def chats(self, item: EvalItem) -> list[list[dict[str, str]]]:
        raise NotImplementedError

    def protocol(self) -> dict[str, Any]:
        protocol = {
            "judge_mode": self.mode,
            "judge_prompt": self.prompt_version + ("+system-in-user" if self.merge_system else ""),
            "backend": self.backend.name,
            "max_length": self.backend.max_length,
            **self.backend.describe(),
        }
        if self.mode == "generate":
            protocol["max_new_tokens"] = self.max_new_tokens
        return protocol

    def runtime_stats(self) -> dict[str, Any]:
        return {"batch_tokens": self.batch_tokens, **self.backend.runtime_stats()}

    # -- encoding ---------------------------------------------------------------------------------
    def _accepts_system_role(self) -> bool:
        chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
        try:
            self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        except Exception:  # templates that reject a system turn raise jinja's TemplateException
            return False
        return True

    def encode(self, chat: list[dict[str, str]]) -> list[int]:
        """Prompt token ids: the chat with the generation prompt, tokenized by the template (no
        re-tokenization); in logits mode followed by the verdict prefix, tokenized without special tokens.
        `enable_thinking=False` asks reasoning templates (Qwen3) for their no-thinking layout in logits mode."""
        extra = {"enable_thinking": False} if self.mode == "logits" else {}
        encoded = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=True, **extra)
        ids = list(encoded["input_ids"])
        return ids + self._prefix_ids if self.mode == "logits" else ids

    def encode_item(self, item: EvalItem) -> tuple[list[list[int]], bool]:
        """(the item's prompts, truncated): drops the lowest-ranked posts until every prompt fits."""
        room = self.backend.max_length - (self.max_new_tokens if self.mode == "generate" else 0)
        for keep in range(len(item.posts), -1, -1):
            prompts = [self.encode(chat) for chat in self.chats(item.with_posts(keep))]
            longest = max(map(len, prompts))
            if longest <= room or keep == 0:
                return prompts, keep < len(item.posts) or longest > room
        raise AssertionError("unreachable")

    def plan(self, items: list[EvalItem]) -> list[list[int]]:
        self._encoded = {i: self.encode_item(item) for i, item in enumerate(items)}
        reserve = self.max_new_tokens if self.mode == "generate" else 0
        lengths = [len(p) * (max(map(len, p)) + reserve) for p, _ in (self._encoded[i] for i in range(len(items)))]
        return token_budget_batches(lengths, self.batch_tokens)

    def _prompts(self, items: list[EvalItem], batch: list[int]) -> list[tuple[list[list[int]], bool]]:
        return [self._encoded[i] if i in self._encoded else self.encode_item(items[i]) for i in batch]

    def _choice_logprobs(self, groups: list[list[list[int]]], choices: dict[str, list[int]]) -> list[list[dict[str, float]]]:
        """Per group, per prompt: log P(choice) as the next token, summed over each choice's tokens."""
        flat = [token for ids in choices.values() for token in ids]
        rows = self.backend.next_token_logprobs(groups, flat)
        out = []
        for group in rows:
            per_prompt = []
            for values in group:
                found, start = {}, 0
                for choice, ids in choices.items():
                    found[choice] = _logsumexp(values[start : start + len(ids)])
                    start += len(ids)
                per_prompt.append(found)
            out.append(per_prompt)
        return out


class PairwiseJudge(_Judge):
    """Judges each pair in both orders; see the module docstring for the record fields."""

    model_type = "judge-pairwise"
    prompt_version = PAIRWISE_PROMPT
    prefix_text = VERDICT_PREFIX

    def __init__(self, config: RunConfig, spec: ModelSpec, backend):
        super().__init__(config, spec, backend)
        self.letter_ids = choice_token_ids(self.tokenizer, list(LETTERS))
        missing = [letter for letter, ids in self.letter_ids.items() if not ids]
        if missing and self.mode == "logits":
            raise UserError(f"{self.name!r}: no single token spells the verdict letter {missing[0]}; use --judge-mode generate")

    def chats(self, item: EvalItem) -> list[list[dict[str, str]]]:
        """[chosen shown as A, chosen shown as B]."""
        return [pairwise_chat(item, chosen_first=True, merge_system=self.merge_system),
                pairwise_chat(item, chosen_first=False, merge_system=self.merge_system)]

    def score(self, items: list[EvalItem], batch: list[int]) -> list[ScoreRecord]:
        encoded = self._prompts(items, batch)
        groups = [prompts for prompts, _ in encoded]
        if self.mode == "logits":
            orders = [self._from_logprobs(group) for group in self._choice_logprobs(groups, self.letter_ids)]
        else:
            texts = self.backend.generate([p for group in groups for p in group], self.max_new_tokens)
            orders = [self._from_texts(texts[2 * n], texts[2 * n + 1]) for n in range(len(groups))]
        return [{**record, "truncated": truncated} for record, (_, truncated) in zip(orders, encoded)]

    @staticmethod
    def _from_logprobs(group: list[dict[str, float]]) -> ScoreRecord:
        first, second = group  # chosen is A in the first prompt, B in the second
        margins = [first["A"] - first["B"], second["B"] - second["A"]]
        verdicts = [1 if m > 0 else 0 if m < 0 else -1 for m in margins]
        preference = [0.0 if math.isnan(m) else math.tanh(m / 2) for m in margins]
        chosen = sum(preference) / 2
        return {
            "chosen_score": chosen, "rejected_score": 0.0 - chosen,
            "verdict_chosen_first": verdicts[0], "margin_chosen_first": margins[0] if math.isfinite(margins[0]) else None,
            "verdict_chosen_second": verdicts[1], "margin_chosen_second": margins[1] if math.isfinite(margins[1]) else None,
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
            "chosen_score": chosen, "rejected_score": 0.0 - chosen,
            "verdict_chosen_first": verdicts[0], "margin_chosen_first": None,
            "verdict_chosen_second": verdicts[1], "margin_chosen_second": None,
            "text_chosen_first": _clip(first), "text_chosen_second": _clip(second),
        }

    def summarize(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        """Figures over both orders (2N verdicts), all through the metric module; they replace the
        pointwise defaults in results.json."""
        return judge_figures(records)


def judge_figures(records: list[dict[str, Any]]) -> dict[str, Any]:
    """accuracy / ci95 / per_subset over both orders, consistent_accuracy, position_bias, no_verdict,
    each computed by the metric module's "pairwise" config."""
    metric = pairwise_accuracy
    first = [r["verdict_chosen_first"] for r in records]
    second = [r["verdict_chosen_second"] for r in records]
    subsets = [r["subset"] for r in records]
    both = metric(first + second, subsets + subsets)
    consistent = metric([1 if a == b == 1 else -1 if -1 in (a, b) else 0 for a, b in zip(first, second)])
    accuracy_first, accuracy_second = metric(first)["accuracy"], metric(second)["accuracy"]
    return {
        "accuracy": both["accuracy"],
        "accuracy_ties_half": both["accuracy_ties_half"],
        "macro_accuracy": both["macro_accuracy"],
        "ci95": [both["ci95_low"], both["ci95_high"]],
        "num_verdicts": both["num_pairs"],
        "ties": both["num_no_verdict"],
        "per_subset": {
            name: {
                "accuracy": figures["accuracy"],
                "num_pairs": figures["num_pairs"] // 2,
                "num_verdicts": figures["num_pairs"],
                "ties": figures["num_no_verdict"],
                "ci95": [figures["ci95_low"], figures["ci95_high"]],
            }
            for name, figures in both["per_subset"].items()
        },
        "consistent_accuracy": consistent["accuracy"],
        "accuracy_chosen_first": accuracy_first,
        "accuracy_chosen_second": accuracy_second,
        "position_bias": accuracy_first - accuracy_second,
        "no_verdict": both["num_no_verdict"],
    }


class ScoreJudge(_Judge):
    """Rates each answer 0-10 for this user; accuracy is the usual chosen-vs-rejected comparison."""

    model_type = "judge-score"
    prompt_version = SCORE_PROMPT
    prefix_text = RATING_PREFIX

    def __init__(self, config: RunConfig, spec: ModelSpec, backend):
        super().__init__(config, spec, backend)
        self.rating_ids = {value: ids for value, ids in choice_token_ids(self.tokenizer, RATINGS).items() if ids}
        if self.mode == "logits" and len(self.rating_ids) < 2:
            raise UserError(f"{self.name!r}: its tokenizer has no single-token digits to read a rating from; use --judge-mode generate")

    def protocol(self) -> dict[str, Any]:
        protocol = super().protocol()
        if self.mode == "logits":
            protocol["rating_tokens"] = "0-10" if "10" in self.rating_ids else "0-9"
        return protocol

    def chats(self, item: EvalItem) -> list[list[dict[str, str]]]:
        """[rate chosen, rate rejected]."""
        return [score_chat(item, item.chosen, self.merge_system), score_chat(item, item.rejected, self.merge_system)]

    @staticmethod
    def _expected(logprobs: dict[str, float]) -> float:
        """The mean rating under the rating tokens' probabilities, renormalised over those tokens."""
        top = max(logprobs.values())
        weights = {value: math.exp(lp - top) for value, lp in logprobs.items()}
        return sum(int(value) * w for value, w in weights.items()) / sum(weights.values())

    def score(self, items: list[EvalItem], batch: list[int]) -> list[ScoreRecord]:
        encoded = self._prompts(items, batch)
        groups = [prompts for prompts, _ in encoded]
        records = []
        if self.mode == "logits":
            for (chosen, rejected), (_, truncated) in zip(self._choice_logprobs(groups, self.rating_ids), encoded):
                c, r = self._expected(chosen), self._expected(rejected)
                records.append({"chosen_score": c, "rejected_score": r, "truncated": truncated,
                                "rating_chosen": c, "rating_rejected": r, "no_verdict": 0})
            return records
        texts = self.backend.generate([p for group in groups for p in group], self.max_new_tokens)
        for n, (_, truncated) in enumerate(encoded):
            c, r = parse_rating(texts[2 * n]), parse_rating(texts[2 * n + 1])
            missing = (c is None) + (r is None)
            records.append({
                "chosen_score": NO_RATING_SCORE if missing else c, "rejected_score": NO_RATING_SCORE if missing else r,
                "truncated": truncated, "rating_chosen": c, "rating_rejected": r, "no_verdict": missing,
                "text_chosen": _clip(texts[2 * n]), "text_rejected": _clip(texts[2 * n + 1]),
            })
        return records

    def summarize(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        return {"no_verdict": sum(r["no_verdict"] for r in records), "no_verdict_pairs": sum(1 for r in records if r["no_verdict"])}


def make_judge(config: RunConfig, spec: ModelSpec, model_type: str) -> _Judge:
    """The judge scorer for `model_type` ("judge-pairwise" | "judge-score")."""
    if config.judge_mode not in JUDGE_MODES:
        raise UserError(f"unknown --judge-mode {config.judge_mode!r}: choose one of {', '.join(JUDGE_MODES)}")
    if config.max_new_tokens < 1:
        raise UserError(f"--max-new-tokens must be positive, got {config.max_new_tokens}")
    judge = {"judge-pairwise": PairwiseJudge, "judge-score": ScoreJudge}.get(model_type)
    if judge is None:
        raise UserError(f"unknown judge type {model_type!r}: choose judge-pairwise or judge-score")
    return judge(config, spec, make_backend(config, spec))
