"""Score answers with a sequence-classification reward model (any AutoModelForSequenceClassification).

Input: the two-turn chat [user: question (+ top-k posts), assistant: answer] through the tokenizer's own
chat template, tokenized directly (no render-then-retokenize, so no double BOS). Tokenizers without a
chat template get the (user text, answer) pair encoding.

Over-long inputs (`fit`): the lowest-ranked profile posts go first (`truncated` in the score record,
`truncated_pairs` in results.json); when the input is still too long with no posts, the question keeps
its start and loses its end, marked with `…` (`question_shortened`, `shortened_questions`). The
answer is never cut: an answer that does not fit on its own is a `UserError` naming the item.

Batches hold pairs sorted by length under a token budget (`batch_tokens`; `classifier_batches`). For decoder-only models
the pair's shared prefix (the chat up to the answer) runs once and both answers are scored from its
KV cache (`shared_prefix`, the mechanism judges use too); pairs or models where that is not exact are scored
in full, and the plan's runtime figures say how many. A lone group over the budget (many long answers: GRPO,
Best-of-N) is split by rows (`row_forwards`) into forwards within it: scored in full, its answers; shared, its
answers on top of their shared prefix (the chat up to the answer), which runs once. Only a single input, or a
single shared prefix, over the budget runs alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NoReturn

import torch

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.base import (
    AnswerGroup,
    AnswerScores,
    Scorer,
    ScoreRecord,
    ScoringPlan,
    row_forwards,
)
from personalized_rewardbench.scoring.classifier_batches import EncodedGroup, batch_positions, classifier_batches
from personalized_rewardbench.scoring.devices import auto_batch_tokens, dtype_name
from personalized_rewardbench.scoring.fitting import ELLIPSIS, fit_item, token_ends
from personalized_rewardbench.scoring.model_loading import (
    attention_implementation,
    ensure_distinct_pad,
    load_classifier,
    load_tokenizer,
    model_revision,
)
from personalized_rewardbench.scoring.padding import needed_mask, pad_rows
from personalized_rewardbench.scoring.prefix_attention import split_supported
from personalized_rewardbench.scoring.prefix_cache import PrefixCache
from personalized_rewardbench.scoring.prompts import reward_chat, user_message
from personalized_rewardbench.scoring.protocols import UpstreamInputs, use_eos_as_pad
from personalized_rewardbench.scoring.registry import ModelSpec
from personalized_rewardbench.scoring.shared_prefix import (
    DISABLED,
    PairLayout,
    agree,
    check_failed_note,
    group_layout,
    pooled_logits,
    right_padding_is_free,
    shared_prefix_support,
)


@dataclass(frozen=True)
class FittedGroup:
    """A prompt's answers as they are scored: `item` with the posts and question that fit, and each answer's
    full input token ids (a pair: chosen, rejected)."""

    item: EvalItem
    inputs: tuple[list[int], ...]
    truncated: bool  # profile posts were dropped
    question_shortened: bool = False  # no posts left and still too long: the question's end was cut


class ClassifierScorer(Scorer):
    """Pointwise reward-model scorer; batches are token-budget groups of pairs sorted by length."""

    model_type = "classifier"

    def __init__(
        self,
        model: str,
        spec: ModelSpec,
        *,
        revision: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        template: str = "default",
        batch_tokens: int | None = None,
        shared_prefix: bool = True,
        protocol: str = "prbench",
    ):
        self.name = model
        self.protocol_name = protocol  # scoring/protocols.py: "upstream" builds the reference code's inputs
        self.spec = spec
        self.template = template
        self.tokenizer = load_tokenizer(model, spec, revision)
        self.model, self.device, self.dtype = load_classifier(model, spec, revision, device, dtype)
        self.batch_tokens = batch_tokens if batch_tokens is not None else auto_batch_tokens(self.device)
        upstream = protocol == "upstream"
        self.added_pad = False if upstream else ensure_distinct_pad(self.tokenizer, self.model)
        self.eos_pad = use_eos_as_pad(self.tokenizer, self.model) if upstream else False
        self.revision = model_revision(model, self.model.config, revision)
        num_labels = self.model.config.num_labels
        self.score_rule = (
            spec.score_rule if spec.score_rule != "auto" else ("logit" if num_labels == 1 else "last_class_prob")
        )
        self.model_limit: int | None = getattr(self.model.config, "max_position_embeddings", None)
        self.max_length = min(spec.max_length, self.model_limit or spec.max_length)
        self.upstream = UpstreamInputs.for_model(model, self.tokenizer, self.max_length) if upstream else None
        support = shared_prefix_support(self.model)
        self.shared_prefix = shared_prefix and support.supported
        self.shared_prefix_note = support.reason if shared_prefix else DISABLED
        self._checked = False  # the model's shared-prefix check has run (see `_self_check`); model state, not run state
        # the suffix pass attends to each prefix once per group (`prefix_attention`) until the check says otherwise
        self._split = self.shared_prefix and split_supported(self.model, self.device)
        self.split_note = ""  # why the check before scoring turned the split attention off
        self._padding_free: bool | None = None  # right padding needs no mask (`right_padding_is_free`); checked once
        self.prefix_cache: PrefixCache | None = None  # prompts kept across calls (`keep_prefixes`): off by default

    def protocol(self) -> dict[str, Any]:
        if self.upstream:
            return {
                "template": "question+profile",
                "inputs": "render-then-tokenize",
                "truncation": self.tokenizer.truncation_side,
                "max_length": self.max_length,
                "dtype": dtype_name(self.dtype),
                "score_rule": self.score_rule,
                "attn_implementation": attention_implementation(self.model),
                "eos_pad": self.eos_pad,
            }
        return {
            "template": self.template if self.tokenizer.chat_template else f"{self.template}+text-pair",
            "max_length": self.max_length,
            "dtype": dtype_name(self.dtype),
            "score_rule": self.score_rule,
            "attn_implementation": attention_implementation(self.model),
            "added_pad_token": self.added_pad,
        }

    def keep_prefixes(self, max_tokens: int) -> PrefixCache | None:
        if not self.shared_prefix:
            return None
        if self.prefix_cache is None or self.prefix_cache.max_tokens != max_tokens:
            self.prefix_cache = PrefixCache(max_tokens)
        return self.prefix_cache

    # -- encoding ---------------------------------------------------------------------------------
    def encode_answer(self, item: EvalItem, answer: str) -> list[int]:
        """Token ids of the full input for one answer (no truncation; `--protocol upstream`: its own)."""
        if self.upstream:
            return self.upstream.encode_answer(item, answer)
        if self.tokenizer.chat_template:
            encoded = self.tokenizer.apply_chat_template(
                reward_chat(item, answer, self.template), tokenize=True, return_dict=True
            )
            return list(encoded["input_ids"])
        return list(self.tokenizer(user_message(item, self.template), answer, truncation=False)["input_ids"])

    def encode_prompt(self, item: EvalItem) -> list[int]:
        """Token ids of the input up to the start of the answer (the chat's generation prompt)."""
        if self.upstream:
            return self.upstream.encode_prompt(item)
        if self.tokenizer.chat_template:
            chat = reward_chat(item, "", self.template)[:1]
            encoded = self.tokenizer.apply_chat_template(
                chat, tokenize=True, return_dict=True, add_generation_prompt=True
            )
            return list(encoded["input_ids"])
        return list(self.tokenizer(user_message(item, self.template), truncation=False)["input_ids"])

    def fit(self, item: EvalItem, answers: Sequence[str] | None = None) -> FittedGroup:
        """Every answer's input within `max_length` (default answers: chosen, rejected): drop the lowest-ranked
        posts, then shorten the question; never cut an answer (`fitting.fit_item`).

        `--protocol upstream` keeps every post and cuts at `max_length` as the reference does (`truncated`: cut)."""
        answers = (item.chosen, item.rejected) if answers is None else tuple(answers)
        if self.upstream:
            return FittedGroup(item, *self.upstream.encode_answers(item, answers))
        fitted = fit_item(
            item,
            lambda candidate: tuple(self.encode_answer(candidate, answer) for answer in answers),
            lambda inputs: max(map(len, inputs)) <= self.max_length,
            lambda question: token_ends(self.tokenizer, question),
            self._answer_too_long,
        )
        return FittedGroup(fitted.item, fitted.encoded, fitted.truncated, fitted.question_shortened)

    def _answer_too_long(self, item: EvalItem, ids: tuple[list[int], ...]) -> NoReturn:
        index = next(n for n, answer in enumerate(ids) if len(answer) > self.max_length)
        which = f"the {('chosen', 'rejected')[index]} answer" if len(ids) == 2 else f"answer {index + 1} of {len(ids)}"
        length = len(ids[index])
        if self.model_limit is not None and self.max_length < self.model_limit and length <= self.model_limit:
            advice = f"pass a larger --max-length (this model takes up to {self.model_limit} tokens)"
        else:
            limit = f"{self.model_limit} positions" if self.model_limit else f"max length {self.max_length}"
            advice = f"use a model with a longer context (this one takes {limit})"
        raise UserError(
            f"item {item.id}: {which} alone takes {length} tokens with the chat scaffolding "
            f"(no posts, the question cut to '{ELLIPSIS}'), over the max length of {self.max_length} tokens; "
            f"answers are never cut: {advice}"
        )

    def _encode(self, item: EvalItem, answers: Sequence[str] | None = None) -> EncodedGroup:
        fitted = self.fit(item, answers)
        layout = PairLayout(0, self.shared_prefix_note)
        if self.shared_prefix:
            try:
                prompt = self.encode_prompt(fitted.item)  # the scored item: posts dropped, question shortened
            except Exception:  # noqa: BLE001 - a template that cannot render the prompt alone: score in full
                prompt = []
            kept = self.prefix_cache is not None
            layout = group_layout(prompt, fitted.inputs, self.tokenizer.pad_token_id, prompt_only=kept)
        return EncodedGroup(fitted.inputs, fitted.truncated, layout, fitted.question_shortened)

    def _verified(self, encoded: Sequence[EncodedGroup]) -> list[EncodedGroup]:
        """`encoded` as it may be scored, after the model's once-only checks (planning, not scoring, runs them):
        whether right padding needs its mask, and whether shared-prefix scores agree with full ones (every
        layout full, with the reason, when they do not)."""
        if encoded:
            self._right_padding_free(ids for group in encoded for ids in group.inputs)
        shared = [group for group in encoded if group.layout.prefix]
        if shared and not self._checked and not self._self_check(shared[0]):
            return [replace(group, layout=PairLayout(0, self.shared_prefix_note)) for group in encoded]
        return list(encoded)

    # -- planning ---------------------------------------------------------------------------------
    def plan(self, items: Sequence[EvalItem]) -> ScoringPlan:
        """Shared-prefix batches, then full-scoring batches (`classifier_batches`), whose forwards keep within
        `batch_tokens` but for a single input or shared prefix over it; the plan carries every pair's encoding and
        the plan's figures (identical on every process)."""
        encoded = self._verified([self._encode(item) for item in items])
        batches = classifier_batches(encoded, self.batch_tokens)
        stats, notices = self._plan_figures(encoded, batches)
        return ScoringPlan.of(items, batches, encoded, notices, stats)

    def _plan_figures(
        self, encoded: Sequence[EncodedGroup], batches: Sequence[Sequence[int]]
    ) -> tuple[dict[str, Any], list[str]]:
        """results.json runtime figures (padding, sharing) and the notices of a plan."""
        computed, real = batch_positions(encoded, batches, self.batch_tokens)
        shared = sum(1 for group in encoded if group.layout.prefix)
        fallbacks = len(encoded) - shared
        reasons = sorted({group.layout.reason for group in encoded if not group.layout.prefix})
        mode: bool | str = True if shared and not fallbacks else ("partial" if shared else False)
        stats: dict[str, Any] = {
            "batch_tokens": self.batch_tokens,
            "padding_fraction": round(1 - real / computed, 4) if computed else 0.0,
            "batches": len(batches),
            "tokens_computed": computed,
            "shared_prefix": mode,
            "shared_prefix_pairs": shared,
            "shared_prefix_fallbacks": fallbacks,
        }
        if shared:  # how the suffixes attend to their prompt: once per group (split) or a copy per suffix (plain)
            stats["shared_prefix_attention"] = "split" if self._split else "plain"
            if self.split_note:
                stats["shared_prefix_attention_note"] = self.split_note
        if reasons:
            stats["shared_prefix_note"] = "; ".join(reasons)
        notices = []
        if mode == "partial" or (mode is False and encoded and self.shared_prefix_note != DISABLED):
            notices.append(
                f"shared prefix: {mode if mode else 'off'} -- {fallbacks} of {len(encoded)} pairs scored in full "
                f"({'; '.join(reasons)})"
            )
        return stats, notices

    def _self_check(self, group: EncodedGroup) -> bool:
        """Once per model: a short slice of a real group scored both ways must agree, else share nothing. The split
        suffix pass is checked first; when it disagrees (or cannot run), the plain pass is checked instead."""
        self._checked = True
        prefix = group.layout.prefix
        suffixes = [ids[prefix:][-24:] for ids in group.inputs[:2]]
        sizes = sorted({min(prefix, 48), max(1, min(prefix, 48) // 2)})
        triples = [(group.inputs[0][:size], suffixes) for size in sizes]
        full = self._scores(self._full_logits([p + s for p, ends in triples for s in ends], keep_mask=True))
        free = self._right_padding_free(group.inputs)
        pad = self.tokenizer.pad_token_id
        ok = False
        if self._split:
            try:
                shared = self._scores(pooled_logits(self.model, triples, pad, self.device, free, split=True))
                ok, worst = agree(shared, full, self.dtype)
                if not ok:
                    self.split_note = f"split attention differed from full scores by {worst:.2g}: plain pass"
            except Exception as error:  # noqa: BLE001 - a model the split pass cannot run keeps the plain pass
                self.split_note = f"split attention cannot run this model ({type(error).__name__}: {error}): plain pass"
            self._split = ok
        if not ok:
            shared = self._scores(pooled_logits(self.model, triples, pad, self.device, free))
            ok, worst = agree(shared, full, self.dtype)
        if not ok:
            self.shared_prefix, self.shared_prefix_note = False, check_failed_note(worst)
        return ok

    # -- scoring ----------------------------------------------------------------------------------
    def _scores(self, logits: torch.Tensor) -> torch.Tensor:
        logits = logits.float()
        if self.score_rule == "logit":
            return logits[:, 0]
        return torch.softmax(logits, dim=-1)[:, -1]

    def _right_padding_free(self, inputs: Iterable[Sequence[int]]) -> bool:
        """Whether right-padded batches may go without their attention mask: checked once per model, on the
        longest of `inputs` (until one is long enough to tell, the mask stays)."""
        if self._padding_free is None:
            pad = self.tokenizer.pad_token_id
            sample = max(inputs, key=len)
            self._padding_free = right_padding_is_free(self.model, sample, pad, self.device, self.dtype)
        return bool(self._padding_free)

    @torch.inference_mode()
    def _full_logits(self, sequences: list[list[int]], keep_mask: bool = False) -> torch.Tensor:
        """Logits of right-padded `sequences` in one forward; the mask goes where it is not needed, unless
        `keep_mask` (the shared-prefix check's reference)."""
        input_ids, attention = pad_rows(sequences, self.tokenizer.pad_token_id, "right")
        free = not keep_mask and not attention.all() and self._right_padding_free(sequences)
        mask = attention if keep_mask else needed_mask(attention, free)
        return self.model(
            input_ids=input_ids.to(self.device),
            attention_mask=None if mask is None else mask.to(self.device),
            use_cache=False,
        ).logits

    def score_sequences(self, sequences: list[list[int]]) -> list[float]:
        """Scores for token-id sequences (full scoring), right-padded into forwards within `batch_tokens`
        (`row_forwards`)."""
        scores = [0.0] * len(sequences)
        for rows in row_forwards([len(ids) for ids in sequences], self.batch_tokens):
            for row, score in zip(rows, self._scores(self._full_logits([sequences[i] for i in rows])).tolist()):
                scores[row] = score
        return scores

    def _score_groups(self, groups: Sequence[EncodedGroup]) -> list[list[float]]:
        """Scores of each group's inputs: one shared-prefix pass when every group shares, else full scoring."""
        if all(group.layout.prefix for group in groups):
            parts = [(g.inputs[0][: g.layout.prefix], [ids[g.layout.prefix :] for ids in g.inputs]) for g in groups]
            free = self._right_padding_free(ids for group in groups for ids in group.inputs)
            pad, cache = self.tokenizer.pad_token_id, self.prefix_cache
            logits = pooled_logits(self.model, parts, pad, self.device, free, self._split, cache, self.batch_tokens)
            flat = self._scores(logits).tolist()
        else:
            flat = self.score_sequences([ids for group in groups for ids in group.inputs])
        out, start = [], 0
        for group in groups:
            out.append(flat[start : start + len(group.inputs)])
            start += len(group.inputs)
        return out

    def score(self, plan: ScoringPlan, batch: Sequence[int]) -> list[ScoreRecord]:
        encoded = [plan.encodings[i] for i in batch]
        return [
            {
                "chosen_score": scores[0],
                "rejected_score": scores[1],
                "truncated": group.truncated,
                "question_shortened": group.question_shortened,
            }
            for scores, group in zip(self._score_groups(encoded), encoded)
        ]

    def score_answers(self, groups: Sequence[AnswerGroup]) -> list[AnswerScores]:
        """Each group's answers on its prompt, fitted over all of them (`fit`); the answers of a group share the
        prompt's forward pass (shared prefix) where the model and the tokens allow it, else they run in full."""
        results: list[AnswerScores] = [AnswerScores(()) for _ in groups]
        todo = [i for i, group in enumerate(groups) if group.answers]
        encoded = self._verified([self._encode(groups[i].item, groups[i].answers) for i in todo])
        for batch in classifier_batches(encoded, self.batch_tokens):
            for n, scores in zip(batch, self._score_groups([encoded[n] for n in batch])):
                results[todo[n]] = AnswerScores(tuple(scores), encoded[n].truncated, encoded[n].question_shortened)
        return results

    def summarize(self, records: list[ScoreRecord]) -> dict[str, Any]:
        """results.json figures beyond accuracy: pairs whose question was shortened (posts dropped: truncated_pairs)."""
        return {"shortened_questions": sum(1 for record in records if record.get("question_shortened"))}
