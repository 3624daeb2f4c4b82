"""The accuracy arithmetic, always through the `personalized_accuracy` evaluate module.

The module in `metric/personalized_accuracy/` is the single source of the numbers: the engine, the
leaderboard and the Space all call it through `evaluate.load`, exactly as a user would.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from personalized_rewardbench.resources import metric_dir


@lru_cache(maxsize=2)
def _metric(config_name: str):
    import evaluate

    return evaluate.load(str(metric_dir()), config_name, keep_in_memory=True)


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
