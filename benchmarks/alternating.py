"""Alternating repeats for benchmarks on a shared machine: every path runs `repeats` times, in forward order and
then reversed, so that slow drift in the machine's speed falls on all paths alike; a path's best (fastest) repeat
is its measurement least disturbed by other work."""

from __future__ import annotations

from collections.abc import Callable, Sequence


def alternate(
    paths: Sequence[str], repeats: int, measure: Callable[[str], dict], show: Callable[[str, dict], None] | None = None
) -> dict[str, list[dict]]:
    """{path: [measure(path) per repeat]}; repeat n runs the paths forwards when n is even, else backwards.

    >>> order = []
    >>> runs = alternate(["a", "b"], 3, lambda path: order.append(path) or {"seconds": len(order)})
    >>> order, fastest(runs)
    (['a', 'b', 'b', 'a', 'a', 'b'], {'a': {'seconds': 1}, 'b': {'seconds': 2}})
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    runs: dict[str, list[dict]] = {path: [] for path in paths}
    for repeat in range(repeats):
        for path in paths if repeat % 2 == 0 else list(reversed(paths)):
            runs[path].append(measure(path))
            if show is not None:
                show(path, runs[path][-1])
    return runs


def fastest(runs: dict[str, list[dict]], key: str = "seconds") -> dict[str, dict]:
    """Each path's repeat with the smallest `key`."""
    return {path: min(results, key=lambda result: result[key]) for path, results in runs.items()}
