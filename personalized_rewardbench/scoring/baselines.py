"""Baseline scorers that need no download: they show the benchmark's artifact floor.

- ``baseline:length``: score = the answer's length in characters (the longer answer wins);
- ``baseline:random``: score = `random.Random(f"{seed}:{item id}:{chosen|rejected}").random()`;
- ``baseline:embedding``: cosine between the MiniLM embedding of the answer and the normalised mean of
  the embeddings of the question and the item's top-k profile posts.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.base import ScoreRecord, fixed_batches

BASELINES = ("baseline:length", "baseline:random", "baseline:embedding")


class _Baseline:
    model_type = "baseline"
    revision: str | None = None
    batch_size = 32

    def __init__(self, name: str):
        self.name = name

    def protocol(self) -> dict[str, Any]:
        return {"score_rule": self.name.removeprefix("baseline:")}

    def plan(self, items: list[EvalItem]) -> list[list[int]]:
        return fixed_batches(len(items), self.batch_size)

    def _record(self, chosen: float, rejected: float) -> ScoreRecord:
        return {"chosen_score": float(chosen), "rejected_score": float(rejected), "truncated": False}


class LengthBaseline(_Baseline):
    def score(self, items: list[EvalItem], batch: list[int]) -> list[ScoreRecord]:
        return [self._record(len(items[i].chosen), len(items[i].rejected)) for i in batch]


class RandomBaseline(_Baseline):
    def __init__(self, name: str, seed: int = 42):
        super().__init__(name)
        self.seed = seed

    def protocol(self) -> dict[str, Any]:
        return {**super().protocol(), "seed": self.seed}

    def score(self, items: list[EvalItem], batch: list[int]) -> list[ScoreRecord]:
        return [
            self._record(
                random.Random(f"{self.seed}:{items[i].id}:chosen").random(),
                random.Random(f"{self.seed}:{items[i].id}:rejected").random(),
            )
            for i in batch
        ]


class EmbeddingBaseline(_Baseline):
    def __init__(self, name: str):
        from personalized_rewardbench.data.text_encoder import minilm_encoder, minilm_path

        super().__init__(name)
        self.encoder = minilm_encoder()
        self.revision = f"all-MiniLM-L6-v2@{minilm_path().parent.name}"

    def score(self, items: list[EvalItem], batch: list[int]) -> list[ScoreRecord]:
        records = []
        for i in batch:
            item = items[i]
            context = [item.question, *(post.text for post in item.posts)]
            vectors = self.encoder.encode([item.chosen, item.rejected, *context])
            target = torch.nn.functional.normalize(vectors[2:].mean(0), dim=-1)
            records.append(self._record(vectors[0] @ target, vectors[1] @ target))
        return records


def make_baseline(name: str, seed: int = 42) -> _Baseline:
    if name == "baseline:length":
        return LengthBaseline(name)
    if name == "baseline:random":
        return RandomBaseline(name, seed)
    if name == "baseline:embedding":
        return EmbeddingBaseline(name)
    raise UserError(f"unknown baseline {name!r}: choose one of {', '.join(BASELINES)}")
