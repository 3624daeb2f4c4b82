"""The accuracy arithmetic, always through the `personalized_accuracy` evaluate module.

The module in `metric/personalized_accuracy/` is the single source of the numbers: the engine, the
leaderboard, the judges and the Space all reach it through `evaluate.load`, exactly as a user would;
this is the one place that loads it (`metric_module()` hands out its plain functions, e.g. the
Wilson interval).

>>> pointwise_accuracy([2.0, 1.0], [1.0, 1.0])["accuracy"]  # a tie counts as wrong
0.5
>>> [round(x, 4) for x in metric_module().wilson_interval(8, 10)]
[0.4902, 0.9433]
"""

from __future__ import annotations

import sys
from functools import lru_cache
from types import ModuleType
from typing import Any

from personalized_rewardbench.resources import metric_dir


@lru_cache(maxsize=2)
def _metric(config_name: str):
    import evaluate

    return evaluate.load(str(metric_dir()), config_name, keep_in_memory=True)


def metric_module() -> ModuleType:
    """The metric module as `evaluate.load` imported it: its plain functions (`wilson_interval`, `Z_95`, ...)."""
    return sys.modules[type(_metric("default")).__module__]


def pointwise_accuracy(chosen: list[float], rejected: list[float], subsets: list[str] | None = None) -> dict[str, Any]:
    """Accuracy (ties wrong), CI, margins and per-subset figures for scored pairs."""
    kwargs: dict[str, Any] = {"chosen_scores": chosen, "rejected_scores": rejected}
    if subsets is not None:
        kwargs["subsets"] = subsets
    return _metric("default").compute(**kwargs)


def pairwise_accuracy(predictions: list[int], subsets: list[str] | None = None) -> dict[str, Any]:
    """Accuracy of judge verdicts (1 chosen preferred, 0 rejected preferred, -1 no verdict)."""
    kwargs: dict[str, Any] = {"predictions": predictions}
    if subsets is not None:
        kwargs["subsets"] = subsets
    return _metric("pairwise").compute(**kwargs)
