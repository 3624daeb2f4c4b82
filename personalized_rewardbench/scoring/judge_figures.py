"""results.json figures of the pairwise judge: accuracies over both orders through the metric module, intervals
with the pair as the unit (see `judges.py` for what the figures mean)."""

from __future__ import annotations

import math
from typing import Any

from personalized_rewardbench.accuracy import metric_module, pairwise_accuracy


def pair_interval(correct_verdicts: int, num_pairs: int) -> list[float]:
    """95 % interval of a verdict accuracy over both orders, with the pair as the unit.

    The Wilson interval at p = correct_verdicts / 2N with n = N pairs: the two verdicts of a pair count
    as one observation, exact when the orders always agree and conservative otherwise (treating the 2N
    verdicts as independent would be too narrow). Wilson depends on z and n through z^2 / n only, so it
    is the metric module's `wilson_interval(correct_verdicts, 2N)` at z * sqrt(2).

    >>> [round(x, 4) for x in pair_interval(16, 10)]  # p = 0.8 over 10 pairs, like 8 of 10
    [0.4902, 0.9433]
    """
    functions = metric_module()
    low, high = functions.wilson_interval(correct_verdicts, 2 * num_pairs, z=functions.Z_95 * math.sqrt(2))
    return [float(low), float(high)]


def judge_figures(records: list[dict[str, Any]]) -> dict[str, Any]:
    """results.json's pairwise-judge figures (see the module docstring): accuracies through the metric
    module's "pairwise" config, intervals per pair (`pair_interval`)."""
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
        "ci95": pair_interval(both["num_correct"], len(records)),
        "ci95_unit": "pairs",  # the interval's unit (n = N pairs); accuracy itself is over 2N verdicts
        "ci95_method": "wilson",
        "num_verdicts": both["num_pairs"],
        "no_verdict": both["num_no_verdict"],
        "ties": both["num_no_verdict"],
        "per_subset": {
            name: {
                "accuracy": figures["accuracy"],
                "num_pairs": figures["num_pairs"] // 2,
                "num_verdicts": figures["num_pairs"],
                "no_verdict": figures["num_no_verdict"],
                "ties": figures["num_no_verdict"],
                "ci95": pair_interval(figures["num_correct"], figures["num_pairs"] // 2),
            }
            for name, figures in both["per_subset"].items()
        },
        "consistent_accuracy": consistent["accuracy"],
        "accuracy_chosen_first": accuracy_first,
        "accuracy_chosen_second": accuracy_second,
        "position_bias": accuracy_first - accuracy_second,
    }
