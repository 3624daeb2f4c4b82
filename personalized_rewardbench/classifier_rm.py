"""Score answers with a sequence-classification reward model (any AutoModelForSequenceClassification).

Input: the two-turn chat [user: question (+ top-k posts), assistant: answer] through the tokenizer's own
chat template, tokenized directly (no render-then-retokenize, so no double BOS). Tokenizers without a
chat template get the (user text, answer) pair encoding. Over-long inputs lose their lowest-ranked
profile posts first; the answer is never cut.
"""

from __future__ import annotations

from typing import Any

import torch

from personalized_rewardbench.devices import dtype_name
from personalized_rewardbench.eval_items import EvalItem
from personalized_rewardbench.model_loading import (
    attention_implementation,
    ensure_distinct_pad,
    load_classifier,
    load_tokenizer,
    model_revision,
)
from personalized_rewardbench.prompts import reward_chat, user_message
from personalized_rewardbench.registry import ModelSpec
from personalized_rewardbench.scoring import ScoreRecord, token_budget_batches


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
        batch_tokens: int = 16384,
    ):
        self.name = model
        self.spec = spec
        self.template = template
        self.batch_tokens = batch_tokens
        self.tokenizer = load_tokenizer(model, spec, revision)
        self.model, self.device, self.dtype = load_classifier(model, spec, revision, device, dtype)
        self.added_pad = ensure_distinct_pad(self.tokenizer, self.model)
        self.revision = model_revision(model, self.model.config, revision)
        num_labels = self.model.config.num_labels
        self.score_rule = spec.score_rule if spec.score_rule != "auto" else ("logit" if num_labels == 1 else "last_class_prob")
        limit = getattr(self.model.config, "max_position_embeddings", None) or spec.max_length
        self.max_length = min(spec.max_length, limit)
        self._encoded: dict[int, tuple[list[int], list[int], bool]] = {}
        self.padding_tokens = 0
        self.total_tokens = 0

    def protocol(self) -> dict[str, Any]:
        return {
            "template": self.template if self.tokenizer.chat_template else f"{self.template}+text-pair",
            "max_length": self.max_length,
            "dtype": dtype_name(self.dtype),
            "score_rule": self.score_rule,
            "attn_implementation": attention_implementation(self.model),
            "added_pad_token": self.added_pad,
        }

    def runtime_stats(self) -> dict[str, Any]:
        fraction = self.padding_tokens / self.total_tokens if self.total_tokens else 0.0
        return {"padding_fraction": round(fraction, 4), "batch_tokens": self.batch_tokens}

    # -- encoding ---------------------------------------------------------------------------------
    def encode_answer(self, item: EvalItem, answer: str) -> list[int]:
        """Token ids of the full input for one answer (no truncation)."""
        if self.tokenizer.chat_template:
            encoded = self.tokenizer.apply_chat_template(reward_chat(item, answer, self.template), tokenize=True, return_dict=True)
            return list(encoded["input_ids"])
        return list(self.tokenizer(user_message(item, self.template), answer, truncation=False)["input_ids"])

    def encode_pair(self, item: EvalItem) -> tuple[list[int], list[int], bool]:
        """(chosen ids, rejected ids, truncated): drops lowest-ranked posts until both fit `max_length`."""
        for keep in range(len(item.posts), -1, -1):
            trimmed = item.with_posts(keep)
            chosen, rejected = self.encode_answer(trimmed, item.chosen), self.encode_answer(trimmed, item.rejected)
            if max(len(chosen), len(rejected)) <= self.max_length or keep == 0:
                return chosen, rejected, keep < len(item.posts) or max(len(chosen), len(rejected)) > self.max_length
        raise AssertionError("unreachable")

    def plan(self, items: list[EvalItem]) -> list[list[int]]:
        self._encoded = {i: self.encode_pair(item) for i, item in enumerate(items)}
        lengths = [2 * max(len(c), len(r)) for c, r, _ in (self._encoded[i] for i in range(len(items)))]
        return token_budget_batches(lengths, self.batch_tokens)

    # -- scoring ----------------------------------------------------------------------------------
    def _scores(self, logits: torch.Tensor) -> torch.Tensor:
        logits = logits.float()
        if self.score_rule == "logit":
            return logits[:, 0]
        return torch.softmax(logits, dim=-1)[:, -1]

    @torch.inference_mode()
    def score_sequences(self, sequences: list[list[int]]) -> list[float]:
        """Scores for token-id sequences, right-padded into one batch."""
        longest = max(map(len, sequences))
        pad = self.tokenizer.pad_token_id
        input_ids = torch.full((len(sequences), longest), pad, dtype=torch.long)
        attention = torch.zeros((len(sequences), longest), dtype=torch.long)
        for row, ids in enumerate(sequences):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention[row, : len(ids)] = 1
        self.padding_tokens += int(attention.numel() - attention.sum())
        self.total_tokens += int(attention.numel())
        logits = self.model(input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device)).logits
        return self._scores(logits).tolist()

    def score(self, items: list[EvalItem], batch: list[int]) -> list[ScoreRecord]:
        encoded = [self._encoded[i] if i in self._encoded else self.encode_pair(items[i]) for i in batch]
        sequences = [ids for chosen, rejected, _ in encoded for ids in (chosen, rejected)]
        scores = self.score_sequences(sequences)
        return [
            {"chosen_score": scores[2 * n], "rejected_score": scores[2 * n + 1], "truncated": truncated}
            for n, (_, _, truncated) in enumerate(encoded)
        ]
