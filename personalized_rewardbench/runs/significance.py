"""Paired significance between two runs scored on the same pairs: McNemar's exact test, ranks with ties.

Two runs on the same pairs are compared unit by unit (a unit is a pair; for a pairwise judge, a pair in
one answer order, since its accuracy is over both orders). Only the *discordant* units tell the runs
apart: ``a_only`` (right in A, wrong in B) and ``b_only``. Under the null hypothesis that both runs are
equally accurate each discordant unit is a fair coin, so the exact two-sided McNemar p-value is
``binomtest(a_only, a_only + b_only, 0.5)`` (scipy). A tie (equal scores) counts as wrong, as everywhere.

When a pairwise judge is compared with a scoring model, the scoring model's outcome on a pair counts
for both answer orders (its score does not depend on the order). Judge verdicts on the two orders of
a pair are not independent: the p-value treats them as if they were, which makes it slightly optimistic.

Ranks: a run's rank is 1 + the number of runs that are significantly more accurate (p < ``ALPHA``);
runs that no other run beats significantly share rank 1, and so on. Runs not on the same pairs fall
back to their 95 % intervals: they differ only when the intervals do not overlap.

>>> round(mcnemar_p(9, 2), 4)  # hand: 2 * P(X <= 2), X ~ Bin(11, 1/2) = 2 * 67 / 2048
0.0654
>>> a = {"p1": ("Art", True), "p2": ("Art", True), "p3": ("Art", False)}
>>> b = {"p1": ("Art", True), "p2": ("Art", False), "p3": ("Art", False)}
>>> test = paired_test(a, b)
>>> (test.units, test.a_only, test.b_only, test.p_value)
(3, 1, 0, 1.0)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

ALPHA = 0.05
ORDERS = ("first", "second")  # a pairwise judge's answer orders (record fields verdict_chosen_<order>)
#: unit id -> (subset, correct)
Outcomes = dict[str, tuple[str, bool]]


@dataclass(frozen=True)
class PairedTest:
    """McNemar's exact test of run A against run B on their shared units."""

    units: int
    both_right: int
    a_only: int
    b_only: int
    both_wrong: int
    p_value: float

    @property
    def difference(self) -> float:
        """Accuracy of A minus accuracy of B on the shared units."""
        return (self.a_only - self.b_only) / self.units if self.units else 0.0

    @property
    def ci95(self) -> tuple[float, float]:
        """95 % Wald interval of the paired difference (Agresti & Min's variance of a paired difference)."""
        n = self.units
        if not n:
            return (0.0, 0.0)
        d = self.difference
        spread = 1.96 * math.sqrt(max(0.0, (self.a_only + self.b_only) / n - d * d) / n)
        return (max(-1.0, d - spread), min(1.0, d + spread))

    @property
    def agreement(self) -> float:
        """Share of units where both runs are right or both are wrong."""
        return (self.both_right + self.both_wrong) / self.units if self.units else 0.0

    @property
    def significant(self) -> bool:
        return self.p_value < ALPHA


def mcnemar_p(a_only: int, b_only: int) -> float:
    """Exact two-sided McNemar p-value from the discordant counts (1.0 when there are none)."""
    from scipy.stats import binomtest

    if a_only + b_only == 0:
        return 1.0
    return float(binomtest(a_only, a_only + b_only, 0.5, alternative="two-sided").pvalue)


def record_outcomes(records: Sequence[dict[str, Any]]) -> Outcomes:
    """Per-unit correctness of a run's score records: a pair (margin > 0) or a judge's pair in one order."""
    outcomes: Outcomes = {}
    for record in records:
        if "verdict_chosen_first" in record:
            for order in ORDERS:
                outcomes[f"{record['id']}#{order}"] = (record["subset"], record.get(f"verdict_chosen_{order}") == 1)
        else:
            outcomes[record["id"]] = (record["subset"], record["chosen_score"] > record["rejected_score"])
    return outcomes


def _per_order(outcomes: Outcomes) -> Outcomes:
    if any("#" in unit for unit in outcomes):
        return outcomes
    return {f"{unit}#{order}": value for unit, value in outcomes.items() for order in ORDERS}


def align(a: Outcomes, b: Outcomes) -> tuple[Outcomes, Outcomes]:
    """Both runs over the same kind of unit: a scoring model's pair counts in both orders beside a judge."""
    judge_a, judge_b = (any("#" in unit for unit in o) for o in (a, b))
    if judge_a != judge_b:
        return _per_order(a), _per_order(b)
    return a, b


def paired_test(a: Outcomes, b: Outcomes, subset: str | None = None) -> PairedTest | None:
    """McNemar's exact test on the units both runs scored (optionally one subset's); None when none are shared."""
    a, b = align(a, b)
    shared = [unit for unit in a if unit in b and (subset is None or a[unit][0] == subset)]
    if not shared:
        return None
    counts = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    for unit in shared:
        counts[(a[unit][1], b[unit][1])] += 1
    a_only, b_only = counts[(True, False)], counts[(False, True)]
    return PairedTest(
        units=len(shared),
        both_right=counts[(True, True)],
        a_only=a_only,
        b_only=b_only,
        both_wrong=counts[(False, False)],
        p_value=mcnemar_p(a_only, b_only),
    )


def same_units(a: Outcomes, b: Outcomes) -> bool:
    """Whether two runs scored exactly the same pairs (after aligning judges and scoring models)."""
    a, b = align(a, b)
    return a.keys() == b.keys()


@lru_cache(maxsize=512)
def _read_outcomes(path: str, mtime: float) -> Outcomes | None:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        return record_outcomes([json.loads(line) for line in lines if line.strip()])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
        return None


def run_outcomes(results_path: str | Path) -> Outcomes | None:
    """The per-unit outcomes of the run whose results.json is `results_path` (its scores.jsonl); None if unreadable."""
    scores = Path(results_path).parent / "scores.jsonl"
    try:
        mtime = scores.stat().st_mtime
    except OSError:
        return None
    return _read_outcomes(str(scores), mtime)


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["ci95_low"] <= b["ci95_high"] and b["ci95_low"] <= a["ci95_high"]


def compare_rows(
    a: dict[str, Any], b: dict[str, Any], outcomes: Callable[[dict[str, Any]], Outcomes | None]
) -> PairedTest | None:
    """McNemar's test of two leaderboard rows when they scored the same pairs, else None."""
    first, second = outcomes(a), outcomes(b)
    if first is None or second is None or not same_units(first, second):
        return None
    return paired_test(first, second)


def differs(
    better: dict[str, Any], worse: dict[str, Any], outcomes: Callable[[dict[str, Any]], Outcomes | None]
) -> tuple[bool, PairedTest | None]:
    """Whether `better` is significantly more accurate than `worse` (paired test, or intervals as a fallback)."""
    test = compare_rows(better, worse, outcomes)
    if test is not None:
        return test.significant and test.difference > 0, test
    return better["accuracy"] > worse["accuracy"] and not _overlap(better, worse), None


def rank_with_ties(
    rows: Sequence[dict[str, Any]], outcomes: Callable[[dict[str, Any]], Outcomes | None] | None = None
) -> list[dict[str, Any]]:
    """For rows sorted by accuracy (best first): rank (ties where not significantly different), the p-value
    against the next row ("p_next", None when not paired) and whether the next row shares the rank.

    >>> rows = [{"accuracy": 0.7, "ci95_low": 0.6, "ci95_high": 0.8}]
    >>> rows.append({"accuracy": 0.65, "ci95_low": 0.55, "ci95_high": 0.75})
    >>> [r["rank"] for r in rank_with_ties(rows)]
    [1, 1]
    """
    outcomes = outcomes or (lambda row: run_outcomes(row["path"]) if row.get("path") else None)
    memo: dict[int, Outcomes | None] = {}

    def cached(row: dict[str, Any]) -> Outcomes | None:
        if id(row) not in memo:
            memo[id(row)] = outcomes(row)
        return memo[id(row)]

    ranked = []
    for index, row in enumerate(rows):
        beaten_by = sum(1 for other in rows[:index] if differs(other, row, cached)[0])
        following = rows[index + 1] if index + 1 < len(rows) else None
        p_next = None
        if following is not None:
            _, test = differs(row, following, cached)
            p_next = test.p_value if test is not None else None
        ranked.append({**row, "rank": 1 + beaten_by, "p_next": p_next})
    for index, row in enumerate(ranked):
        following = ranked[index + 1] if index + 1 < len(ranked) else None
        row["tied_with_next"] = following is not None and following["rank"] == row["rank"]
    return ranked


def profile_gain(
    row: dict[str, Any], candidates: Sequence[dict[str, Any]], outcomes: Callable[[dict[str, Any]], Outcomes | None]
) -> tuple[float, PairedTest | None] | None:
    """(accuracy at k > 0 minus at k = 0, McNemar's test) for a k > 0 row whose k = 0 twin (same model, revision,
    type, template, data and pairs) is among `candidates`; None when there is no twin."""
    if not row.get("profile_k"):
        return None
    for other in candidates:
        if other.get("profile_k") == 0 and other.get("twin_key") == row.get("twin_key"):
            test = compare_rows(row, other, outcomes)
            if test is not None:
                return test.difference, test
            if other["num_pairs"] == row["num_pairs"]:
                return row["accuracy"] - other["accuracy"], None
    return None
