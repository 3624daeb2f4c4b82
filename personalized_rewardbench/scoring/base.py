"""The interface every scorer implements (baselines, classifier reward models, LLM judges).

The engine calls exactly what `Scorer` declares and nothing else: `plan(items)` once, which returns an
immutable `ScoringPlan` (deterministic batches of item indices plus whatever the scorer prepared for them,
e.g. token ids), then `score(plan, batch)` per batch, and `notices(plan)`, `runtime_stats(plan)`,
`summarize(records)` for results.json. Deterministic batches make resumed and multi-process runs process
exactly the same batches as a single uninterrupted run, so their scores are identical. A scorer keeps no
state of a run (everything a run needs is in its plan), so one loaded scorer serves any number of runs.
Each scored item is a dict with at least `chosen_score`, `rejected_score` and `truncated`.

`score_answers(groups)` is the pointwise entry point (Best-of-N, RL rewards): any number of answers per prompt.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from personalized_rewardbench.data.eval_items import EvalItem

if TYPE_CHECKING:
    from personalized_rewardbench.scoring.prefix_cache import PrefixCache

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


@dataclass(frozen=True)
class ScoringPlan:
    """One run's work over `items`: the batches (indices into `items`) and, per item, what the scorer encoded
    for it (`encodings`, empty when a scorer prepares nothing). `notices` and `stats` describe the whole plan
    (identical on every process of a multi-process run). `counters` is the one part that changes: what
    scoring this plan's batches counted in this process (forward tokens, generated tokens ...); it never
    feeds back into a score."""

    items: tuple[EvalItem, ...]
    batches: tuple[tuple[int, ...], ...]
    encodings: tuple[Any, ...] = ()
    notices: tuple[str, ...] = ()
    stats: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    counters: Counter = field(default_factory=Counter, compare=False)

    @classmethod
    def of(
        cls,
        items: Sequence[EvalItem],
        batches: Sequence[Sequence[int]],
        encodings: Sequence[Any] = (),
        notices: Sequence[str] = (),
        stats: Mapping[str, Any] | None = None,
    ) -> ScoringPlan:
        """A plan from plain lists (copied into tuples and a read-only mapping)."""
        return cls(
            tuple(items),
            tuple(tuple(batch) for batch in batches),
            tuple(encodings),
            tuple(notices),
            MappingProxyType(dict(stats or {})),
        )


class Scorer(ABC):
    """What the engine, the Space, Best-of-N and RL rewards call; see the module docstring."""

    name: str  # model id, local path or baseline name
    model_type: str  # "baseline" | "classifier" | "judge-pairwise" | "judge-score"
    revision: str | None = None
    device: Any = "cpu"  # where the model runs (str or torch.device)

    @abstractmethod
    def protocol(self) -> dict[str, Any]:
        """Settings that define the run (recorded in results.json `protocol`)."""

    @abstractmethod
    def plan(self, items: Sequence[EvalItem]) -> ScoringPlan:
        """Deterministic batches of indices into `items`, with everything scoring them needs."""

    @abstractmethod
    def score(self, plan: ScoringPlan, batch: Sequence[int]) -> list[ScoreRecord]:
        """One record per index of `batch` (a batch of `plan`), in that order."""

    @abstractmethod
    def score_answers(self, groups: Sequence[AnswerGroup]) -> list[AnswerScores]:
        """Pointwise scores of every group's answers (Best-of-N, RL rewards); one result per group, in order.

        The same prompt builder, fitting (over all answers of the group) and score rule as `score`: the group
        (chosen, rejected) of an item scores exactly what `score` gives that pair. Scorers that only compare
        two answers (a pairwise judge) raise `UserError`."""

    def keep_prefixes(self, max_tokens: int) -> PrefixCache | None:
        """From now on keep recently run prompts' key/value states (up to `max_tokens` prompt tokens) for later
        calls, which then do not run them again (the reward server); the cache, or None where this scorer has no
        prompt pass to keep."""
        return None

    def notices(self, plan: ScoringPlan) -> list[str]:
        """Lines to show the user about this plan (e.g. pairs the shared prefix cannot serve)."""
        return list(plan.notices)

    def runtime_stats(self, plan: ScoringPlan) -> dict[str, Any]:
        """results.json `runtime` figures of this plan (and of what scoring it counted)."""
        return {**plan.stats, **plan.counters}

    def summarize(self, records: list[ScoreRecord]) -> dict[str, Any]:
        """results.json figures beyond the metric's defaults, from all records of a run."""
        return {}


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


def row_forwards(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """The forwards that score one batch's rows in full: all at once, in their order, when `rows x longest <=
    budget`; else the rows packed within the budget (`token_budget_batches`; a row over it alone). A group of
    many long answers (a GRPO group, Best-of-N) so keeps its memory and, on CPU, its speed.

    >>> row_forwards([3, 2, 3], budget=9), row_forwards([3, 2, 3], budget=6)
    ([[0, 1, 2]], [[0, 2], [1]])
    """
    if not lengths:
        return []
    if len(lengths) * max(lengths) <= budget:
        return [list(range(len(lengths)))]
    return token_budget_batches(list(lengths), budget)


def padded_positions(lengths: Sequence[int], budget: int) -> int:
    """Token positions the `row_forwards` of these rows compute, padding included.

    >>> padded_positions([3, 2, 3], budget=6)
    8
    """
    return sum(len(rows) * max(lengths[i] for i in rows) for rows in row_forwards(lengths, budget))
