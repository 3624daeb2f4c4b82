# Copyright 2026 The personalized-rewardbench authors. Licensed under the Apache License 2.0.
"""Personalized RewardBench accuracy: how often a reward model prefers the answer that fits the user.

This file is both an `evaluate` module and the single home of the benchmark's accuracy arithmetic.
Besides the `PersonalizedAccuracy` metric it exposes plain functions that need no `evaluate` machinery:

    pointwise_accuracy(chosen_scores, rejected_scores, subsets=None) -> dict
    pairwise_accuracy(predictions, subsets=None) -> dict
    wilson_interval(successes, n) -> (low, high)

It depends on numpy, datasets and evaluate only, so it runs from the Hub on its own.
"""

import math
import numbers
from collections.abc import Sequence
from typing import Any

import datasets
import evaluate
import numpy as np

_CITATION = """\
@misc{ma2026personalizedrewardbench,
  title         = {Personalized RewardBench},
  author        = {Qiyao Ma and others},
  year          = {2026},
  eprint        = {2604.07343},
  archivePrefix = {arXiv}
}
"""

_DESCRIPTION = """\
Personalized accuracy is the score of Personalized RewardBench (Ma et al., 2026): for every item a
user asked a question and two answers of similar quality exist, `chosen` (it follows what this user
wants) and `rejected` (it violates the user's stated preferences). A reward model is right on an item
when it prefers `chosen`.

Two configurations:
- default ("pointwise"): the model gives each answer a score; a pair is correct when
  chosen score > rejected score. A tie (chosen == rejected, exactly) counts as wrong.
- "pairwise": a judge sees both answers and returns a verdict per pair: 1 = it preferred chosen,
  0 = it preferred rejected, -1 = no verdict (its answer could not be parsed). A missing verdict
  counts as wrong.

`accuracy` follows the upstream and RewardBench convention (ties / no-verdicts are wrong);
`accuracy_ties_half` gives them half a point instead. The 95 % confidence interval of `accuracy` is
the Wilson score interval of a binomial proportion (z = 1.959963984540054), a closed form, so it is
deterministic. With one subset name per pair the result also holds a per-subset breakdown and the
macro accuracy (unweighted mean over subsets) next to the micro `accuracy` over all pairs.
"""

_KWARGS_DESCRIPTION = """
Args (default config, pointwise scores):
    chosen_scores (`list` of `float`): the reward model's score for the chosen answer, one per pair.
    rejected_scores (`list` of `float`): its score for the rejected answer, same order and length.
    subsets (`list` of `str`, *optional*): the subset name of each pair, e.g. "Art_and_Entertainment".
        Give it with every `add_batch`/`add` call (or with the one `compute` call) for a per-subset
        breakdown. If the pairs were added without names, the full list (one name per pair added so
        far) may instead be passed to `compute(subsets=...)`. Either every pair has a name or none does.
Args ("pairwise" config, judge verdicts):
    predictions (`list` of `int`): per pair, 1 = the judge preferred chosen, 0 = it preferred
        rejected, -1 = no verdict (unparsable answer).
    subsets (`list` of `str`, *optional*): as above.
`add(...)` takes one pair: `chosen_score=`, `rejected_score=`, `subset=` (or `prediction=`, `subset=`).

Returns (a dict of plain Python numbers):
    accuracy (`float`): share of pairs answered correctly; ties / no-verdicts count as wrong.
    accuracy_ties_half (`float`): the same, with ties / no-verdicts counted as 1/2.
    ci95_low, ci95_high (`float`): Wilson score 95 % interval of `accuracy`.
    num_pairs (`int`): number of pairs.
    num_correct (`int`): pairs where chosen won.
    num_ties (`int`, default config): pairs with chosen score == rejected score.
    num_no_verdict (`int`, "pairwise" config): pairs with prediction -1.
    mean_margin (`float`, default config): mean of chosen score - rejected score.
    per_subset (`dict`, only with `subsets`): subset name (sorted) -> a dict with the keys above.
    macro_accuracy (`float`, only with `subsets`): unweighted mean of the per-subset accuracies.

Bad input (different lengths, no pairs, NaN or infinite scores, verdicts other than 1/0/-1, subset
names missing, empty or of the wrong number) raises `ValueError` naming the input and the position,
e.g. "chosen_scores[3] is nan: scores must be finite numbers". If `compute` raises, the pairs added
so far are kept, so `compute` can be called again with corrected arguments.

Examples:
    Scores from a reward model (run from the repository root, or use the module's Hub id):

    >>> import evaluate
    >>> metric = evaluate.load("metric/personalized_accuracy")
    >>> results = metric.compute(
    ...     chosen_scores=[2.5, 0.25, 1.0, -0.5, 3.0],
    ...     rejected_scores=[1.0, 0.75, 1.0, -2.0, 0.5],
    ... )
    >>> print(results["accuracy"], results["accuracy_ties_half"], results["num_ties"], results["mean_margin"])
    0.6 0.7 1 1.0
    >>> print(round(results["ci95_low"], 4), round(results["ci95_high"], 4))
    0.2307 0.8824

    With a subset name per pair, added in batches:

    >>> metric.add_batch(chosen_scores=[2.5, 0.25], rejected_scores=[1.0, 0.75], subsets=["Art", "Society"])
    >>> metric.add_batch(
    ...     chosen_scores=[1.0, -0.5, 3.0], rejected_scores=[1.0, -2.0, 0.5], subsets=["Society", "Art", "Society"]
    ... )
    >>> results = metric.compute()
    >>> print(results["accuracy"], round(results["macro_accuracy"], 4))
    0.6 0.6667
    >>> for name, sub in results["per_subset"].items():
    ...     print(name, sub["num_pairs"], round(sub["accuracy"], 4), sub["num_ties"])
    Art 2 1.0 0
    Society 3 0.3333 1

    Verdicts from a pairwise judge:

    >>> judge_metric = evaluate.load("metric/personalized_accuracy", "pairwise")
    >>> results = judge_metric.compute(predictions=[1, 0, 1, -1, 1])
    >>> print(results["accuracy"], results["accuracy_ties_half"], results["num_no_verdict"])
    0.6 0.7 1

    Bad input names the position:

    >>> metric.compute(chosen_scores=[0.5, float("nan")], rejected_scores=[0.1, 0.2])
    Traceback (most recent call last):
        ...
    ValueError: chosen_scores[1] is nan: scores must be finite numbers
"""

Z_95 = 1.959963984540054
"""Two-sided 95 % standard-normal quantile used by `wilson_interval`."""

CONFIGS = ("default", "pairwise")
_NO_SUBSET = ""  # stored for pairs added without a subset name (user-given names are never empty)
_PREDICTION_MEANING = "predictions must be 1 (judge preferred chosen), 0 (preferred rejected) or -1 (no verdict)"


# --------------------------------------------------------------------------------------------------
# Input checks. `offset` is the number of pairs added before this batch (0 for a whole list).
# --------------------------------------------------------------------------------------------------


def _where(name: str, i: int, offset: int = 0) -> str:
    if offset:
        return f"{name}[{i}] (pair {offset + i} of all pairs added so far)"
    return f"{name}[{i}]"


def _show(value: Any) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (float, int, str)) or value is None:
        return repr(value)
    return f"{value!r} ({type(value).__name__})"


def _as_flat(values: Any, name: str) -> tuple[Sequence, np.ndarray]:
    """Return (values as a sequence, values as a 1-d numpy array) or raise a ValueError."""
    if values is None:
        raise ValueError(f"{name} is missing: give one value per pair")
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__"):
        raise ValueError(f"{name} must be a list with one value per pair, got {type(values).__name__}")
    try:
        array = np.asarray(values)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{name} must be a flat list with one number per pair ({err})") from None
    if array.ndim != 1:
        raise ValueError(f"{name} must be a flat list with one value per pair, got an array of shape {array.shape}")
    return values, array


def _first_non_number(values: Sequence, array: np.ndarray) -> int | None:
    """Position of the first element that is not a real number (bools excluded), else None."""
    if array.dtype.kind in "iuf":
        return None
    for i, value in enumerate(values):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            return i
    return None


def _check_scores(values: Any, name: str, offset: int = 0) -> np.ndarray:
    """Validate a list of scores; return them as float64."""
    values, array = _as_flat(values, name)
    bad = _first_non_number(values, array)
    if bad is not None:
        raise ValueError(f"{_where(name, bad, offset)} is {_show(values[bad])}: scores must be finite numbers")
    array = array.astype(np.float64)
    not_finite = np.flatnonzero(~np.isfinite(array))
    if not_finite.size:
        i = int(not_finite[0])
        raise ValueError(f"{_where(name, i, offset)} is {_show(array[i])}: scores must be finite numbers")
    return array


def _check_predictions(values: Any, name: str = "predictions", offset: int = 0) -> np.ndarray:
    """Validate judge verdicts; return them as int64 in {1, 0, -1}."""
    values, array = _as_flat(values, name)
    bad = _first_non_number(values, array)
    if bad is not None:
        raise ValueError(f"{_where(name, bad, offset)} is {_show(values[bad])}: {_PREDICTION_MEANING}")
    as_float = array.astype(np.float64)
    outside = np.flatnonzero(~np.isin(as_float, (1.0, 0.0, -1.0)))
    if outside.size:
        i = int(outside[0])
        raise ValueError(f"{_where(name, i, offset)} is {_show(array[i])}: {_PREDICTION_MEANING}")
    return as_float.astype(np.int64)


def _check_lengths(first: tuple[str, int], second: tuple[str, int], offset: int = 0) -> None:
    (name_a, len_a), (name_b, len_b) = first, second
    if len_a == len_b:
        return
    short = name_b if len_b < len_a else name_a
    pos = min(len_a, len_b)
    where = f"pair {pos}" if not offset else f"pair {pos} of this batch, {offset + pos} of all pairs added so far"
    raise ValueError(
        f"{name_a} has {_count(len_a, 'value')} but {name_b} has {len_b} ({short} has nothing for {where}): "
        "give exactly one value of each per pair"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _span(start: int, n: int) -> str:
    return f"pair {start}" if n == 1 else f"pairs {start} to {start + n - 1}"


def _check_subsets(subsets: Any, num_pairs: int, offset: int = 0) -> list[str]:
    """Validate one non-empty subset name per pair; return them as a list of str."""
    if isinstance(subsets, (str, bytes, dict)) or not hasattr(subsets, "__len__"):
        raise ValueError(f"subsets must be a list with one subset name per pair, got {type(subsets).__name__}")
    names = list(subsets)
    if len(names) != num_pairs:
        pos = min(len(names), num_pairs)
        what = f"no name for pair {pos}" if len(names) < num_pairs else f"an extra name at position {pos}"
        in_batch = " in this batch" if offset else ""
        raise ValueError(
            f"subsets has {_count(len(names), 'name')} but there are {_count(num_pairs, 'pair')}{in_batch} ({what}): "
            "give one subset name per pair"
        )
    for i, name in enumerate(names):
        if isinstance(name, np.str_):
            name = names[i] = str(name)
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{_where('subsets', i, offset)} is {_show(name)}: subset names must be non-empty strings")
    return names


# --------------------------------------------------------------------------------------------------
# The arithmetic.
# --------------------------------------------------------------------------------------------------


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion `successes / n` (95 % with the default z).

    center = (p + z^2 / 2n) / (1 + z^2 / n),  half = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2)

    >>> [round(x, 4) for x in wilson_interval(8, 10)]
    [0.4902, 0.9433]
    """
    if isinstance(successes, bool) or isinstance(n, bool) or not isinstance(successes, numbers.Integral):
        raise ValueError(f"successes must be an integer, got {_show(successes)}")
    if not isinstance(n, numbers.Integral) or n <= 0:
        raise ValueError(f"n must be a positive integer, got {_show(n)}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie between 0 and n={int(n)}, got {int(successes)}")
    n = int(n)
    p = int(successes) / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n))
    # At k = 0 (k = n) the lower (upper) bound is exactly 0 (1); rounding must not move it.
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == n else min(1.0, center + half)
    return low, high


def _summary(
    correct: np.ndarray, undecided: np.ndarray, undecided_key: str, margins: np.ndarray | None
) -> dict[str, Any]:
    n = int(correct.size)
    num_correct = int(np.count_nonzero(correct))
    num_undecided = int(np.count_nonzero(undecided))
    low, high = wilson_interval(num_correct, n)
    out: dict[str, Any] = {
        "accuracy": num_correct / n,
        "accuracy_ties_half": (num_correct + 0.5 * num_undecided) / n,
        "ci95_low": float(low),
        "ci95_high": float(high),
        "num_pairs": n,
        "num_correct": num_correct,
        undecided_key: num_undecided,
    }
    if margins is not None:
        out["mean_margin"] = math.fsum(margins.tolist()) / n
    return out


def _with_subsets(
    result: dict[str, Any],
    subsets: list[str] | None,
    correct: np.ndarray,
    undecided: np.ndarray,
    undecided_key: str,
    margins: np.ndarray | None,
) -> dict[str, Any]:
    if subsets is None:
        return result
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(subsets):
        groups.setdefault(name, []).append(i)
    per_subset = {}
    for name in sorted(groups):
        idx = np.asarray(groups[name], dtype=np.int64)
        per_subset[name] = _summary(
            correct[idx], undecided[idx], undecided_key, None if margins is None else margins[idx]
        )
    result["macro_accuracy"] = math.fsum(sub["accuracy"] for sub in per_subset.values()) / len(per_subset)
    result["per_subset"] = per_subset
    return result


def pointwise_accuracy(
    chosen_scores: Sequence[float], rejected_scores: Sequence[float], subsets: Sequence[str] | None = None
) -> dict[str, Any]:
    """Accuracy of a scoring reward model: a pair is correct when chosen > rejected (a tie is wrong).

    >>> r = pointwise_accuracy([1.0, 0.0, 2.0], [0.0, 1.0, 2.0])
    >>> r["accuracy"], r["num_ties"], r["accuracy_ties_half"]
    (0.3333333333333333, 1, 0.5)
    """
    chosen = _check_scores(chosen_scores, "chosen_scores")
    rejected = _check_scores(rejected_scores, "rejected_scores")
    _check_lengths(("chosen_scores", chosen.size), ("rejected_scores", rejected.size))
    if chosen.size == 0:
        raise ValueError("no pairs to score: chosen_scores and rejected_scores are empty")
    names = None if subsets is None else _check_subsets(subsets, chosen.size)
    with np.errstate(over="ignore"):
        margins = chosen - rejected
    overflow = np.flatnonzero(~np.isfinite(margins))
    if overflow.size:
        i = int(overflow[0])
        raise ValueError(
            f"chosen_scores[{i}] - rejected_scores[{i}] overflows ({chosen[i]!r} - {rejected[i]!r}): rescale the scores"
        )
    correct, ties = chosen > rejected, chosen == rejected
    result = _summary(correct, ties, "num_ties", margins)
    return _with_subsets(result, names, correct, ties, "num_ties", margins)


def pairwise_accuracy(predictions: Sequence[int], subsets: Sequence[str] | None = None) -> dict[str, Any]:
    """Accuracy of a pairwise judge from verdicts 1 (chose chosen), 0 (chose rejected), -1 (no verdict).

    >>> r = pairwise_accuracy([1, 1, 0, -1])
    >>> r["accuracy"], r["num_no_verdict"], r["accuracy_ties_half"]
    (0.5, 1, 0.625)
    """
    verdicts = _check_predictions(predictions)
    if verdicts.size == 0:
        raise ValueError("no pairs to score: predictions is empty")
    names = None if subsets is None else _check_subsets(subsets, verdicts.size)
    correct, no_verdict = verdicts == 1, verdicts == -1
    result = _summary(correct, no_verdict, "num_no_verdict", None)
    return _with_subsets(result, names, correct, no_verdict, "num_no_verdict", None)


# --------------------------------------------------------------------------------------------------
# The evaluate module.
# --------------------------------------------------------------------------------------------------


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class PersonalizedAccuracy(evaluate.Metric):
    """Personalized RewardBench accuracy (configs: "default" for scores, "pairwise" for judge verdicts)."""

    # Pairs added since the last compute with / without subset names (reset when a new writer starts).
    _named_pairs = 0
    _unnamed_pairs = 0

    def _info(self):
        if self.config_name not in CONFIGS:
            raise ValueError(f"unknown config {self.config_name!r}: use one of {', '.join(CONFIGS)}")
        if self.config_name == "pairwise":
            columns = {"predictions": datasets.Value("int64")}
        else:
            columns = {"chosen_scores": datasets.Value("float64"), "rejected_scores": datasets.Value("float64")}
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({**columns, "subsets": datasets.Value("string")}),
            homepage="https://arxiv.org/abs/2604.07343",
            license="apache-2.0",
            reference_urls=[
                "https://arxiv.org/abs/2604.07343",
                "https://huggingface.co/datasets/QiyaoMa/Personalized-RewardBench",
            ],
        )

    @property
    def _columns(self) -> tuple[str, ...]:
        return ("predictions",) if self.config_name == "pairwise" else ("chosen_scores", "rejected_scores")

    def _reject_unknown(self, kwargs: dict[str, Any], allowed: Sequence[str]) -> None:
        unknown = sorted(k for k in kwargs if k not in allowed)
        if unknown:
            raise ValueError(
                f"unknown argument(s) {', '.join(unknown)} for the {self.config_name!r} config: it takes "
                f"{', '.join(allowed)}"
                + ("" if self.config_name == "pairwise" else "; judge verdicts go to the 'pairwise' config")
            )

    def _validated_batch(self, batch: dict[str, Any], offset: int) -> dict[str, list]:
        """Check one batch (positions reported relative to `offset`) and return plain lists."""
        if self.config_name == "pairwise":
            out: dict[str, list] = {
                "predictions": _check_predictions(batch["predictions"], "predictions", offset).tolist()
            }
        else:
            chosen = _check_scores(batch["chosen_scores"], "chosen_scores", offset)
            rejected = _check_scores(batch["rejected_scores"], "rejected_scores", offset)
            _check_lengths(("chosen_scores", chosen.size), ("rejected_scores", rejected.size), offset)
            out = {"chosen_scores": chosen.tolist(), "rejected_scores": rejected.tolist()}
        n = len(next(iter(out.values())))
        subsets = batch.get("subsets")
        out["subsets"] = [_NO_SUBSET] * n if subsets is None else _check_subsets(subsets, n, offset)
        return out

    def add_batch(self, **kwargs):
        """Add a batch of pairs (and optionally their subset names); positions in errors count from 0 per batch."""
        self._reject_unknown(kwargs, self._columns + ("subsets",))
        missing = [c for c in self._columns if kwargs.get(c) is None]
        if missing:
            verb = "is" if len(missing) == 1 else "are"
            raise ValueError(
                f"{' and '.join(missing)} {verb} missing: give {' and '.join(self._columns)}, one value per pair"
            )
        if self.writer is None:
            self._named_pairs = self._unnamed_pairs = 0
        offset = len(self)
        batch = self._validated_batch(kwargs, offset)
        n = len(batch["subsets"])
        if n == 0:
            return
        if kwargs.get("subsets") is None:
            if self._named_pairs:
                raise ValueError(
                    f"subsets missing for {_span(offset, n)}: the {offset} pairs added before "
                    "have subset names; give subsets with every batch or with none"
                )
            self._unnamed_pairs += n
        else:
            if self._unnamed_pairs:
                raise ValueError(
                    f"subsets given for {_span(offset, n)} but not for the {offset} pairs added "
                    "before: give subsets with every batch, or with none and pass the full list to compute(subsets=...)"
                )
            self._named_pairs += n
        super().add_batch(**batch)

    def add(self, **kwargs):
        """Add one pair: chosen_score=, rejected_score= (or prediction=), optional subset=."""
        singular = {
            "chosen_score": "chosen_scores",
            "rejected_score": "rejected_scores",
            "prediction": "predictions",
            "subset": "subsets",
        }
        allowed = tuple(k for k, v in singular.items() if v in self._columns + ("subsets",))
        self._reject_unknown({singular.get(k, k): v for k, v in kwargs.items()}, self._columns + ("subsets",))
        batch = {}
        for key, value in kwargs.items():
            plural = singular.get(key, key)
            if isinstance(value, (list, tuple, np.ndarray)):
                raise ValueError(
                    f"add() takes one pair ({', '.join(allowed)}), but {key} is a list: use add_batch for lists"
                )
            batch[plural] = None if value is None else [value]
        self.add_batch(**batch)

    def compute(self, **kwargs):
        """Compute the result over the given pairs plus all pairs added with add/add_batch."""
        self._reject_unknown(kwargs, self._columns + ("subsets",))
        if any(kwargs.get(c) is not None for c in self._columns):
            self.add_batch(**kwargs)
            late_subsets = None
        else:
            late_subsets = kwargs.get("subsets")
        if self.writer is None or (self.num_process == 1 and len(self) == 0):
            raise ValueError(
                f"no pairs to score: pass {' and '.join(c + '=' for c in self._columns)} or call add_batch first"
            )
        if late_subsets is not None:
            if self._named_pairs:
                raise ValueError(
                    "subsets were given twice: with add_batch (from pair 0) and to compute(); give them in one place"
                )
            if self.num_process == 1:
                _check_subsets(late_subsets, len(self))
        return super().compute(subsets_at_compute=late_subsets)

    def _compute(
        self, chosen_scores=None, rejected_scores=None, predictions=None, subsets=None, subsets_at_compute=None
    ):
        subsets = _stored_subsets(subsets)
        if subsets_at_compute is not None:
            if subsets is not None:
                raise ValueError("subsets were given twice: with add_batch and to compute(); give them in one place")
            subsets = subsets_at_compute
        if self.config_name == "pairwise":
            return pairwise_accuracy(predictions, subsets)
        return pointwise_accuracy(chosen_scores, rejected_scores, subsets)


def _stored_subsets(column: Sequence[str | None] | None) -> list[str] | None:
    """The stored subsets column: None when no pair has a name; an error when only some have one."""
    if column is None:
        return None
    missing = [i for i, name in enumerate(column) if name is None or name == _NO_SUBSET]
    if len(missing) == len(column):
        return None
    if missing:
        raise ValueError(
            f"subsets are missing for pair {missing[0]} ({len(column) - len(missing)} of {len(column)} pairs "
            "have a subset name): give subsets with every batch or with none"
        )
    return list(column)
