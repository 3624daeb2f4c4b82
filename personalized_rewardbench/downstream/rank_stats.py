"""Agreement between two rankings of the same reward models: the paper's five statistics.

`x` is one score per model from a benchmark (higher = ranked better), `y` the same models'
downstream quality. Spearman rho, Kendall tau (tau-b) and weighted tau come from scipy.stats
(`weightedtau` with its default hyperbolic weigher: disagreements near the top of either ranking
weigh most). NDCG comes from scikit-learn's `ndcg_score`: the models ranked by `x`, each with the
graded relevance of its downstream rank (best model n, worst 1; ties get the mean rank).

RBO is our own short implementation because no maintained package offers it (the PyPI `rbo`
package has had no release since 2023): the extrapolated rank-biased overlap of Webber, Moffat &
Zobel, "A Similarity Measure for Indefinite Rankings", ACM TOIS 28(4), 2010, eq. 32, for two
complete rankings of the same k items (best first):

    RBO_ext = (X_k / k) p^k + ((1 - p) / p) sum_{d=1..k} (X_d / d) p^d

where X_d is the number of items the two top-d prefixes share; identical rankings give 1. Ties in
a score are broken by model name (RBO is defined on strict rankings).

>>> round(rbo(["a", "b", "c"], ["a", "c", "b"], p=0.5), 4)  # X = 1, 1, 3: 0.125 + (0.5 + 0.125 + 0.125)
0.875
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats
from sklearn.metrics import ndcg_score

STATISTICS = ("spearman", "kendall", "weighted_tau", "ndcg", "rbo")
RBO_P = 0.9


def rbo(first: Sequence[str], second: Sequence[str], p: float = RBO_P) -> float:
    """Extrapolated rank-biased overlap of two complete rankings (best first) of the same items."""
    if sorted(first) != sorted(second):
        raise ValueError("rbo needs two rankings of the same items")
    k = len(first)
    total, seen_first, seen_second, overlap = 0.0, set(), set(), 0
    for depth in range(1, k + 1):
        a, b = first[depth - 1], second[depth - 1]
        overlap += (a in seen_second) + (b in seen_first) + (a == b)
        seen_first.add(a)
        seen_second.add(b)
        total += overlap / depth * p**depth
    return overlap / k * p**k + (1 - p) / p * total


def ranking(names: Sequence[str], values: Sequence[float]) -> list[str]:
    """Names best first (highest value), ties by name."""
    return [name for _, name in sorted(zip((-float(v) for v in values), names))]


def ndcg(x: Sequence[float], y: Sequence[float]) -> float:
    """NDCG of ranking the models by `x` when model relevance is its downstream rank grade (from `y`)."""
    relevance = stats.rankdata(y)  # worst 1 ... best n, ties averaged
    return float(ndcg_score([relevance], [np.asarray(x, dtype=float)]))


def agreement(names: Sequence[str], x: Sequence[float], y: Sequence[float]) -> dict[str, float]:
    """All five statistics between the `x` ranking and the `y` ranking of `names` (all nan when one is constant)."""
    # rounded to 12 decimals: figures equal up to float summation order (best-of-1 is the same mean for
    # every model) must tie, not be ranked by rounding noise
    x, y = np.round(np.asarray(x, dtype=float), 12), np.round(np.asarray(y, dtype=float), 12)
    if np.ptp(x) == 0 or np.ptp(y) == 0:  # one side ranks every model equal: no ranking to compare
        return dict.fromkeys(STATISTICS, float("nan"))
    return {
        "spearman": float(stats.spearmanr(x, y).statistic),
        "kendall": float(stats.kendalltau(x, y).statistic),
        "weighted_tau": float(stats.weightedtau(x, y).statistic),
        "ndcg": ndcg(x, y),
        "rbo": rbo(ranking(names, x), ranking(names, y)),
    }
