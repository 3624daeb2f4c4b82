"""Score answers with a sequence-classification reward model (any AutoModelForSequenceClassification).

Input: the two-turn chat [user: question (+ top-k posts), assistant: answer] through the tokenizer's own
chat template, tokenized directly (no render-then-retokenize, so no double BOS). Tokenizers without a
chat template get the (user text, answer) pair encoding.

Over-long inputs (`fit`): the lowest-ranked profile posts go first (`truncated` in the score record,
`truncated_pairs` in results.json); when the input is still too long with no posts, the question keeps
its start and loses its end, marked with `…` (`question_shortened`, `shortened_questions`). The
answer is never cut: an answer that does not fit on its own is a `UserError` naming the item.

Batches hold pairs sorted by length under a token budget (`batch_tokens`). For decoder-only models
the pair's shared prefix (the chat up to the answer) runs once and both answers are scored from its
KV cache (`prefix_scoring`); pairs or models where that is not exact are scored in full, and
`runtime_stats()` says how many.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.base import ScoreRecord, token_budget_batches
from personalized_rewardbench.scoring.devices import auto_batch_tokens, dtype_name
from personalized_rewardbench.scoring.model_loading import (
    attention_implementation,
    ensure_distinct_pad,
    load_classifier,
    load_tokenizer,
    model_revision,
)
from personalized_rewardbench.scoring.prompts import reward_chat, user_message
from personalized_rewardbench.scoring.protocols import UpstreamInputs, use_eos_as_pad
from personalized_rewardbench.scoring.registry import ModelSpec
from personalized_rewardbench.scoring.shared_prefix import (
    PairLayout,
    pair_layout,
    shared_prefix_batches,
    shared_prefix_cost,
    shared_prefix_logits,
    shared_prefix_support,
)

#: Shared-prefix scores may differ from full scores by float rounding only; the check before scoring allows this much.
_CHECK_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-8}
_CHECK_TOLERANCE_HALF = 5e-2
#: Marks a question shortened to fit the max length (its start is kept).
ELLIPSIS = "…"


@dataclass(frozen=True)
class FittedPair:
    """A pair as it is scored: `item` with the posts and question that fit, and both inputs' token ids."""

    item: EvalItem
    chosen: list[int]
    rejected: list[int]
    truncated: bool  # profile posts were dropped
    question_shortened: bool = False  # no posts left and still too long: the question's end was cut


@dataclass(frozen=True)
class EncodedPair:
    chosen: list[int]
    rejected: list[int]
    truncated: bool
    layout: PairLayout  # layout.prefix > 0: scored from a shared prefix of that many tokens
    question_shortened: bool = False


class ClassifierScorer:
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
        if shared_prefix:
            self.shared_prefix, self.shared_prefix_note, self._max_shared_length = shared_prefix_support(self.model)
        else:
            self.shared_prefix, self.shared_prefix_note, self._max_shared_length = (
                False,
                "disabled by --no-shared-prefix",
                None,
            )
        self._encoded: dict[int, EncodedPair] = {}
        self._checked = False  # the shared-prefix check before the first batch has run (see `_self_check`)
        self._stats: dict[str, Any] = {}
        self.notices: list[str] = []

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

    def runtime_stats(self) -> dict[str, Any]:
        """Figures of the whole batch plan (identical on every process of a multi-process run)."""
        return {"batch_tokens": self.batch_tokens, **self._stats}

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

    def fit(self, item: EvalItem) -> FittedPair:
        """Both inputs within `max_length`: drop the lowest-ranked posts, then shorten the question; never cut the answer.

        `--protocol upstream` keeps every post and cuts at `max_length` as the reference does (`truncated`: cut)."""
        if self.upstream:
            return FittedPair(item, *self.upstream.encode_pair(item))
        encode = lambda candidate: (
            self.encode_answer(candidate, item.chosen),
            self.encode_answer(candidate, item.rejected),
        )  # noqa: E731
        for keep in range(len(item.posts), -1, -1):
            trimmed = item.with_posts(keep)
            chosen, rejected = encode(trimmed)
            if max(len(chosen), len(rejected)) <= self.max_length:
                return FittedPair(trimmed, chosen, rejected, truncated=keep < len(item.posts))
        return self._shorten_question(trimmed, encode, truncated=bool(item.posts))

    def _shorten_question(self, item: EvalItem, encode, truncated: bool) -> FittedPair:
        """The longest start of the question (cut at a token end, marked `…`) with which both inputs fit."""
        question = item.question

        def shortened(cut: int) -> EvalItem:
            start = question[:cut].rstrip()
            return replace(item, question=f"{start} {ELLIPSIS}" if start else ELLIPSIS)

        fits = lambda ids: max(map(len, ids)) <= self.max_length  # noqa: E731
        best = encode(shortened(0))
        if not fits(best):
            self._answer_too_long(item, best)
        cuts = self._cut_points(question)
        low, high = -1, len(cuts)  # cuts[low] fits (-1: the ellipsis alone), the whole question does not
        while high - low > 1:
            middle = (low + high) // 2
            ids = encode(shortened(cuts[middle]))
            if fits(ids):
                low, best = middle, ids
            else:
                high = middle
        final = shortened(cuts[low] if low >= 0 else 0)
        return FittedPair(final, best[0], best[1], truncated=truncated, question_shortened=True)

    def _cut_points(self, question: str) -> list[int]:
        """Character offsets where a token of the question ends (every character for slow tokenizers)."""
        try:
            offsets = self.tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
            return sorted({end for _start, end in offsets if 0 < end < len(question)})
        except (NotImplementedError, TypeError, ValueError, KeyError):
            return list(range(1, len(question)))

    def _answer_too_long(self, item: EvalItem, ids: tuple[list[int], list[int]]) -> None:
        which = "chosen" if len(ids[0]) > self.max_length else "rejected"
        length = len(ids[0] if which == "chosen" else ids[1])
        if self.model_limit is not None and self.max_length < self.model_limit and length <= self.model_limit:
            advice = f"pass a larger --max-length (this model takes up to {self.model_limit} tokens)"
        else:
            limit = f"{self.model_limit} positions" if self.model_limit else f"max length {self.max_length}"
            advice = f"use a model with a longer context (this one takes {limit})"
        raise UserError(
            f"item {item.id}: the {which} answer alone takes {length} tokens with the chat scaffolding "
            f"(no posts, the question cut to '{ELLIPSIS}'), over the max length of {self.max_length} tokens; "
            f"answers are never cut: {advice}"
        )

    def encode_pair(self, item: EvalItem) -> tuple[list[int], list[int], bool]:
        """(chosen ids, rejected ids, posts dropped) within `max_length` (see `fit`)."""
        fitted = self.fit(item)
        return fitted.chosen, fitted.rejected, fitted.truncated

    def _encode(self, item: EvalItem) -> EncodedPair:
        fitted = self.fit(item)
        chosen, rejected = fitted.chosen, fitted.rejected
        layout = PairLayout(0, self.shared_prefix_note)
        if self.shared_prefix:
            try:
                prompt = self.encode_prompt(fitted.item)  # the scored item: posts dropped, question shortened
            except Exception:  # noqa: BLE001 - a template that cannot render the prompt alone: score in full
                prompt = []
            layout = pair_layout(prompt, chosen, rejected, self.tokenizer.pad_token_id)
            if (
                layout.prefix
                and self._max_shared_length is not None
                and max(len(chosen), len(rejected)) > self._max_shared_length
            ):
                layout = PairLayout(0, "input longer than the model's sliding attention window")
        return EncodedPair(chosen, rejected, fitted.truncated, layout, fitted.question_shortened)

    # -- planning ---------------------------------------------------------------------------------
    def plan(self, items: list[EvalItem]) -> list[list[int]]:
        """Shared-prefix batches, then full-scoring batches; each within `batch_tokens` (a lone over-long pair excepted)."""
        self._encoded = {i: self._encode(item) for i, item in enumerate(items)}
        shared = [i for i in range(len(items)) if self._encoded[i].layout.prefix]
        if shared and not self._checked and not self._self_check(self._encoded[shared[0]]):
            self._encoded = {
                i: replace(p, layout=PairLayout(0, self.shared_prefix_note)) for i, p in self._encoded.items()
            }
            shared = []
        full = [i for i in range(len(items)) if not self._encoded[i].layout.prefix]
        shapes = [self._shape(self._encoded[i]) for i in shared]
        batches = [
            [shared[j] for j in batch]
            for batch in shared_prefix_batches(shapes, self.batch_tokens, max_length=self._max_shared_length)
        ]
        lengths = [2 * max(len(self._encoded[i].chosen), len(self._encoded[i].rejected)) for i in full]
        batches += [[full[j] for j in batch] for batch in token_budget_batches(lengths, self.batch_tokens)]
        self._record_plan(items, batches, len(shared))
        return batches

    @staticmethod
    def _shape(pair: EncodedPair) -> tuple[int, int]:
        prefix = pair.layout.prefix
        return prefix, max(len(pair.chosen), len(pair.rejected)) - prefix

    def _record_plan(self, items: list[EvalItem], batches: list[list[int]], shared: int) -> None:
        computed = real = 0
        for batch in batches:
            pairs = [self._encoded[i] for i in batch]
            real += sum(len(p.chosen) + len(p.rejected) - p.layout.prefix for p in pairs)
            if pairs[0].layout.prefix:
                computed += shared_prefix_cost([self._shape(p) for p in pairs])
            else:
                computed += 2 * len(pairs) * max(max(len(p.chosen), len(p.rejected)) for p in pairs)
        fallbacks = len(items) - shared
        reasons = sorted(
            {self._encoded[i].layout.reason for i in range(len(items)) if not self._encoded[i].layout.prefix}
        )
        mode: bool | str = True if shared and not fallbacks else ("partial" if shared else False)
        self._stats = {
            "padding_fraction": round(1 - real / computed, 4) if computed else 0.0,
            "batches": len(batches),
            "tokens_computed": computed,
            "shared_prefix": mode,
            "shared_prefix_pairs": shared,
            "shared_prefix_fallbacks": fallbacks,
        }
        if reasons:
            self._stats["shared_prefix_note"] = "; ".join(reasons)
        self.notices = []
        if mode == "partial" or (
            mode is False and items and self.shared_prefix_note != "disabled by --no-shared-prefix"
        ):
            self.notices.append(
                f"shared prefix: {mode if mode else 'off'} -- {fallbacks} of {len(items)} pairs scored in full ({'; '.join(reasons)})"
            )

    def _self_check(self, pair: EncodedPair) -> bool:
        """Once per model: a short slice of a real pair scored both ways must agree, else share nothing."""
        self._checked = True
        prefix = pair.layout.prefix
        chosen, rejected = pair.chosen[prefix:][-24:], pair.rejected[prefix:][-24:]
        sizes = sorted({min(prefix, 48), max(1, min(prefix, 48) // 2)})
        triples = [(pair.chosen[:size], chosen, rejected) for size in sizes]
        shared = self._scores(shared_prefix_logits(self.model, triples, self.tokenizer.pad_token_id, self.device))
        full = self._scores(self._full_logits([p + s for p, c, r in triples for s in (c, r)]))
        tolerance = _CHECK_TOLERANCE.get(self.dtype, _CHECK_TOLERANCE_HALF)
        worst = float((shared - full).abs().max())
        if worst <= tolerance * max(1.0, float(full.abs().max())):
            return True
        self.shared_prefix = False
        self.shared_prefix_note = (
            f"shared-prefix scores differed from full scores by {worst:.2g} in the check before scoring"
        )
        return False

    # -- scoring ----------------------------------------------------------------------------------
    def _scores(self, logits: torch.Tensor) -> torch.Tensor:
        logits = logits.float()
        if self.score_rule == "logit":
            return logits[:, 0]
        return torch.softmax(logits, dim=-1)[:, -1]

    @torch.inference_mode()
    def _full_logits(self, sequences: list[list[int]]) -> torch.Tensor:
        longest = max(map(len, sequences))
        pad = self.tokenizer.pad_token_id
        input_ids = torch.full((len(sequences), longest), pad, dtype=torch.long)
        attention = torch.zeros((len(sequences), longest), dtype=torch.long)
        for row, ids in enumerate(sequences):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention[row, : len(ids)] = 1
        return self.model(
            input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device), use_cache=False
        ).logits

    def score_sequences(self, sequences: list[list[int]]) -> list[float]:
        """Scores for token-id sequences, right-padded into one batch (full scoring)."""
        return self._scores(self._full_logits(sequences)).tolist()

    def score(self, items: list[EvalItem], batch: list[int]) -> list[ScoreRecord]:
        encoded = [self._encoded[i] if i in self._encoded else self._encode(items[i]) for i in batch]
        if all(pair.layout.prefix for pair in encoded):
            triples = [
                (p.chosen[: p.layout.prefix], p.chosen[p.layout.prefix :], p.rejected[p.layout.prefix :])
                for p in encoded
            ]
            scores = self._scores(
                shared_prefix_logits(self.model, triples, self.tokenizer.pad_token_id, self.device)
            ).tolist()
        else:
            scores = self.score_sequences([ids for pair in encoded for ids in (pair.chosen, pair.rejected)])
        return [
            {
                "chosen_score": scores[2 * n],
                "rejected_score": scores[2 * n + 1],
                "truncated": pair.truncated,
                "question_shortened": pair.question_shortened,
            }
            for n, pair in enumerate(encoded)
        ]

    @staticmethod
    def summarize(records: list[ScoreRecord]) -> dict[str, Any]:
        """results.json figures beyond accuracy: pairs whose question was shortened (posts dropped: `truncated_pairs`)."""
        return {"shortened_questions": sum(1 for record in records if record.get("question_shortened"))}
