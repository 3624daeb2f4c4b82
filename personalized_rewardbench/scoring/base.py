"""The interface every scorer implements (baselines, classifier reward models, LLM judges).

The engine calls `plan(items)` once to get deterministic batches of item indices, then
`score(items, batch)` per batch. Deterministic batches make resumed and multi-process runs
process exactly the same batches as a single uninterrupted run, so their scores are identical.
Each scored item is a dict with at least `chosen_score`, `rejected_score` and `truncated`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from personalized_rewardbench.data.eval_items import EvalItem

ScoreRecord = dict[str, Any]


@dataclass(frozen=True)
class AnswerGroup:
    """One prompt -- the question and ranked posts of `item` -- and the answers to score against it.

    `item.chosen` / `item.rejected` are not read. The answers of a group share their prompt, so a scorer
    runs the prompt once and every answer on top of it (Best-of-N candidates, an RL group of completions).
    """

    item: EvalItem
    answers: tuple[str, ...]


@dataclass(frozen=True)
class AnswerScores:
    """Pointwise scores of one group's answers, in order, and how the prompt was fitted to the max length."""

    scores: tuple[float, ...]
    truncated: bool = False  # profile posts were dropped to fit
    question_shortened: bool = False  # no posts left and still too long: the question's end was cut


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

    def score_answers(self, groups: Sequence[AnswerGroup]) -> list[AnswerScores]:
        """Pointwise scores of every group's answers (Best-of-N, RL rewards); one result per group, in order.

        The same prompt builder, fitting (over all answers of the group) and score rule as `score`: the group
        (chosen, rejected) of an item scores exactly what `score` gives that pair. Scorers that only compare
        two answers (a pairwise judge) raise `UserError`."""


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
