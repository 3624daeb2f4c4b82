"""Baseline scorers that need no download: they show the benchmark's artifact floor.

- ``baseline:length``: score = the answer's length in characters (the longer answer wins);
- ``baseline:random``: score = `random.Random(f"{seed}:{item id}:{chosen|rejected}").random()`;
- ``baseline:embedding``: cosine between the MiniLM embedding of the answer and the normalised mean of
  the embeddings of the question and the item's top-k profile posts.

`score_answers` scores any number of answers with the same rules (the random baseline seeds by position:
the first two answers draw what chosen and rejected draw).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.base import (
    AnswerGroup,
    AnswerScores,
    Scorer,
    ScoreRecord,
    ScoringPlan,
    fixed_batches,
)

BASELINES = ("baseline:length", "baseline:random", "baseline:embedding")


class _Baseline(Scorer):
    model_type = "baseline"
    revision: str | None = None
    device = "cpu"
    batch_size = 32

    def __init__(self, name: str):
        self.name = name

    def protocol(self) -> dict[str, Any]:
        return {"score_rule": self.name.removeprefix("baseline:")}

    def plan(self, items: Sequence[EvalItem]) -> ScoringPlan:
        return ScoringPlan.of(items, fixed_batches(len(items), self.batch_size))

    def answer_scores(self, item: EvalItem, answers: Sequence[str]) -> list[float]:
        """One score per answer of `item`'s prompt (a pair: chosen, rejected)."""
        raise NotImplementedError

    def score(self, plan: ScoringPlan, batch: Sequence[int]) -> list[ScoreRecord]:
        records = []
        for i in batch:
            item = plan.items[i]
            chosen, rejected = self.answer_scores(item, (item.chosen, item.rejected))
            records.append({"chosen_score": chosen, "rejected_score": rejected, "truncated": False})
        return records

    def score_answers(self, groups: Sequence[AnswerGroup]) -> list[AnswerScores]:
        return [AnswerScores(tuple(self.answer_scores(group.item, group.answers))) for group in groups]


class LengthBaseline(_Baseline):
    def answer_scores(self, item: EvalItem, answers: Sequence[str]) -> list[float]:
        return [float(len(answer)) for answer in answers]


def _position_label(position: int) -> str:
    """The random baseline's seed label of an answer: "chosen" / "rejected" for the first two (so the group
    (chosen, rejected) draws exactly what the pair does), then "answer-<position>"."""
    return ("chosen", "rejected")[position] if position < 2 else f"answer-{position}"


class RandomBaseline(_Baseline):
    def __init__(self, name: str, seed: int = 42):
        super().__init__(name)
        self.seed = seed

    def protocol(self) -> dict[str, Any]:
        return {**super().protocol(), "seed": self.seed}

    def answer_scores(self, item: EvalItem, answers: Sequence[str]) -> list[float]:
        """Seeded by the item id and the answer's position, not its text."""
        return [random.Random(f"{self.seed}:{item.id}:{_position_label(n)}").random() for n in range(len(answers))]


class EmbeddingBaseline(_Baseline):
    def __init__(self, name: str):
        from personalized_rewardbench.data.text_encoder import minilm_encoder, minilm_path

        super().__init__(name)
        self.encoder = minilm_encoder()
        self.revision = f"all-MiniLM-L6-v2@{minilm_path().parent.name}"

    def answer_scores(self, item: EvalItem, answers: Sequence[str]) -> list[float]:
        if not answers:
            return []
        context = [item.question, *(post.text for post in item.posts)]
        vectors = self.encoder.encode([*answers, *context])
        target = torch.nn.functional.normalize(vectors[len(answers) :].mean(0), dim=-1)
        return [float(vector @ target) for vector in vectors[: len(answers)]]


def make_baseline(name: str, seed: int = 42) -> _Baseline:
    if name == "baseline:length":
        return LengthBaseline(name)
    if name == "baseline:random":
        return RandomBaseline(name, seed)
    if name == "baseline:embedding":
        return EmbeddingBaseline(name)
    raise UserError(f"unknown baseline {name!r}: choose one of {', '.join(BASELINES)}")
