"""The interface every scorer implements (baselines, classifier reward models, LLM judges).

The engine calls `plan(items)` once to get deterministic batches of item indices, then
`score(items, batch)` per batch. Deterministic batches make resumed and multi-process runs
process exactly the same batches as a single uninterrupted run, so their scores are identical.
Each scored item is a dict with at least `chosen_score`, `rejected_score` and `truncated`.
"""

from __future__ import annotations

from typing import Any, Protocol

from personalized_rewardbench.data.eval_items import EvalItem

ScoreRecord = dict[str, Any]


class Scorer(Protocol):
    name: str  # model id, local path or baseline name
    model_type: str  # "baseline" | "classifier" | "judge-pairwise" | "judge-score"
    revision: str | None

    def protocol(self) -> dict[str, Any]:
        """Settings that define the run (recorded in results.json `protocol`)."""

    def plan(self, items: list[EvalItem]) -> list[list[int]]:
        """Deterministic batches of indices into `items`."""

    def score(self, items: list[EvalItem], batch: list[int]) -> list[ScoreRecord]:
        """One record per index of `batch`, in that order."""


def fixed_batches(count: int, size: int) -> list[list[int]]:
    """Consecutive batches of `size` indices."""
    return [list(range(start, min(start + size, count))) for start in range(0, count, size)]


def token_budget_batches(lengths: list[int], budget: int, max_batch: int = 256) -> list[list[int]]:
    """Group indices sorted by length (longest first) so that `batch size x longest length <= budget`.

    A single sequence longer than the budget gets a batch of its own.

    >>> token_budget_batches([5, 1, 4, 2], budget=8)
    [[0], [2, 3], [1]]
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        longest = lengths[current[0]] if current else lengths[index]
        if current and (len(current) + 1) * longest > budget or len(current) >= max_batch:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches
