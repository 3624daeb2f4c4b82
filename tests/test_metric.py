"""The `personalized_accuracy` evaluate module: loading, arithmetic, batching, bad input, docs and demo."""

from __future__ import annotations

import doctest
import importlib.util
import json
import math
import random
import sys
from pathlib import Path

import evaluate
import numpy as np
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
METRIC_DIR = REPO / "metric" / "personalized_accuracy"


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


pa_module = _import(METRIC_DIR / "personalized_accuracy.py", "personalized_accuracy_under_test")

CHOSEN = [2.5, 0.25, 1.0, -0.5, 3.0]
REJECTED = [1.0, 0.75, 1.0, -2.0, 0.5]
SUBSETS = ["Art", "Society", "Society", "Art", "Society"]


def load(config_name: str | None = None):
    return evaluate.load(str(METRIC_DIR), config_name)


@pytest.fixture
def metric():
    return load()


@pytest.fixture
def judge():
    return load("pairwise")


def _random_pairs(n: int, seed: int):
    rng = random.Random(seed)
    chosen = [round(rng.gauss(0, 1), 1) for _ in range(n)]  # one decimal: plenty of exact ties
    rejected = [round(rng.gauss(0, 1), 1) for _ in range(n)]
    subsets = [
        rng.choice(["Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture"])
        for _ in range(n)
    ]
    return chosen, rejected, subsets


# ------------------------------------------------------------------------------------------ loading


def test_loads_offline_with_both_configs(metric, judge):
    assert metric.name == "personalized_accuracy"
    assert set(metric.features) == {"chosen_scores", "rejected_scores", "subsets"}
    assert set(judge.features) == {"predictions", "subsets"}
    assert "Personalized RewardBench" in metric.citation and "2604.07343" in metric.citation
    with pytest.raises(ValueError, match="unknown config 'listwise'"):
        load("listwise")


# ------------------------------------------------------------------------------------------ docs


def test_kwargs_description_examples_run_and_match(monkeypatch):
    monkeypatch.chdir(REPO)  # the examples load "metric/personalized_accuracy" relative to the repo root
    parser = doctest.DocTestParser()
    test = parser.get_doctest(pa_module._KWARGS_DESCRIPTION, {}, "_KWARGS_DESCRIPTION", None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert len(test.examples) >= 10
    assert runner.summarize(verbose=False) == doctest.TestResults(0, len(test.examples))


def test_function_docstring_examples_run_and_match():
    results = doctest.testmod(pa_module, optionflags=doctest.ELLIPSIS)
    assert results.attempted >= 5  # wilson_interval, pointwise_accuracy, pairwise_accuracy (+ the kwargs examples)
    assert results.failed == 0


def test_card_front_matter_and_stated_interval():
    text = (METRIC_DIR / "README.md").read_text(encoding="utf-8")
    front = yaml.safe_load(text.split("---")[1])
    assert front["sdk"] == "gradio" and front["app_file"] == "app.py"
    assert str(front["sdk_version"]) == "6.31.0" and front["python_version"] == "3.12"
    assert set(front["tags"]) >= {"evaluate", "metric"} and front["title"] and front["description"]
    # The limitation the card states: 2,149 of 2,830 correct (75.94 %) -> Wilson [74.33 %, 77.48 %].
    low, high = pa_module.wilson_interval(2149, 2830)
    assert f"[{100 * low:.2f} %, {100 * high:.2f} %]" == "[74.33 %, 77.48 %]"
    assert "[74.33 %, 77.48 %]" in text
    assert round(100 * 2149 / 2830, 2) == 75.94 and 1.5 < 100 * (high - low) / 2 < 1.6
    low, high = pa_module.wilson_interval(583, 767)
    assert f"[{100 * low:.2f} %, {100 * high:.2f} %]" in text
    requirements = (METRIC_DIR / "requirements.txt").read_text().split()
    assert {r.split(">")[0].split("=")[0] for r in requirements} == {"evaluate", "datasets", "numpy"}


# ------------------------------------------------------------------------------------------ arithmetic


def test_pointwise_hand_computed_with_tie(metric):
    r = metric.compute(chosen_scores=CHOSEN, rejected_scores=REJECTED)
    # correct: 2.5>1.0, -0.5>-2.0, 3.0>0.5; wrong: 0.25<0.75; tie: 1.0==1.0
    assert r["accuracy"] == 3 / 5
    assert r["accuracy_ties_half"] == 3.5 / 5
    assert (r["num_pairs"], r["num_correct"], r["num_ties"]) == (5, 3, 1)
    assert r["mean_margin"] == pytest.approx((1.5 - 0.5 + 0.0 + 1.5 + 2.5) / 5)
    assert "per_subset" not in r and "macro_accuracy" not in r and "num_no_verdict" not in r
    assert (r["ci95_low"], r["ci95_high"]) == pa_module.wilson_interval(3, 5)


def test_all_ties_score_zero_and_a_half(metric):
    r = metric.compute(chosen_scores=[0.5] * 4, rejected_scores=[0.5] * 4)
    assert (r["accuracy"], r["accuracy_ties_half"], r["num_ties"], r["mean_margin"]) == (0.0, 0.5, 4, 0.0)
    assert r["ci95_low"] == 0.0 and r["ci95_high"] > 0.0


def test_tiny_difference_is_not_a_tie(metric):
    r = metric.compute(chosen_scores=[1.0 + 2**-40, np.float32(0.1)], rejected_scores=[1.0, np.float32(0.1)])
    assert (r["num_correct"], r["num_ties"]) == (1, 1)  # float32 scores keep their exact tie


def test_pairwise_hand_computed(judge):
    r = judge.compute(predictions=[1, 0, 1, -1, 1, -1, 0, 1])
    assert r["accuracy"] == 4 / 8
    assert r["accuracy_ties_half"] == (4 + 0.5 * 2) / 8
    assert (r["num_pairs"], r["num_correct"], r["num_no_verdict"]) == (8, 4, 2)
    assert "mean_margin" not in r and "num_ties" not in r


def test_per_subset_and_macro_hand_computed(metric):
    r = metric.compute(chosen_scores=CHOSEN, rejected_scores=REJECTED, subsets=SUBSETS)
    assert list(r["per_subset"]) == ["Art", "Society"]
    art, society = r["per_subset"]["Art"], r["per_subset"]["Society"]
    assert (art["accuracy"], art["num_pairs"], art["num_ties"], art["mean_margin"]) == (1.0, 2, 0, 1.5)
    assert society["accuracy"] == 1 / 3 and society["accuracy_ties_half"] == 1.5 / 3
    assert (society["num_pairs"], society["num_ties"]) == (3, 1)
    assert society["mean_margin"] == pytest.approx((-0.5 + 0.0 + 2.5) / 3)
    assert (society["ci95_low"], society["ci95_high"]) == pa_module.wilson_interval(1, 3)
    assert r["accuracy"] == 0.6  # micro: 3 of 5 pairs
    assert r["macro_accuracy"] == pytest.approx((1.0 + 1 / 3) / 2)  # macro: mean over 2 subsets


def test_pairwise_per_subset(judge):
    r = judge.compute(predictions=[1, -1, 0, 1, 1], subsets=["b", "b", "a", "a", "a"])
    assert list(r["per_subset"]) == ["a", "b"]  # sorted by name, not by first appearance
    assert r["per_subset"]["a"]["accuracy"] == 2 / 3 and r["per_subset"]["a"]["num_no_verdict"] == 0
    assert r["per_subset"]["b"]["accuracy"] == 0.5 and r["per_subset"]["b"]["num_no_verdict"] == 1
    assert r["macro_accuracy"] == pytest.approx((2 / 3 + 0.5) / 2)
    assert r["accuracy"] == 3 / 5


def test_result_is_plain_json(metric):
    r = metric.compute(
        chosen_scores=np.array(CHOSEN, dtype=np.float32), rejected_scores=np.array(REJECTED), subsets=SUBSETS
    )

    def walk(value):
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        else:
            assert type(value) in (int, float), (value, type(value))

    walk(r)
    assert json.loads(json.dumps(r)) == r


def test_pure_functions_equal_metric_on_6000_pairs(metric):
    chosen, rejected, subsets = _random_pairs(6000, seed=7)
    via_metric = metric.compute(chosen_scores=chosen, rejected_scores=rejected, subsets=subsets)
    assert via_metric == pa_module.pointwise_accuracy(chosen, rejected, subsets)
    expected_correct = sum(c > r for c, r in zip(chosen, rejected))
    expected_ties = sum(c == r for c, r in zip(chosen, rejected))
    assert (via_metric["num_correct"], via_metric["num_ties"]) == (expected_correct, expected_ties)
    assert expected_ties > 50  # the data really has ties
    by_name = {}
    for c, r, s in zip(chosen, rejected, subsets):
        by_name.setdefault(s, []).append(c > r)
    for name, wins in by_name.items():
        assert via_metric["per_subset"][name]["accuracy"] == sum(wins) / len(wins)


# ------------------------------------------------------------------------------------------ interval


def test_wilson_matches_hand_computation():
    # Independent route: the Wilson bounds are the roots of (1 + z^2/n) p^2 - (2 p_hat + z^2/n) p + p_hat^2 = 0.
    z, k, n = 1.959963984540054, 8, 10
    p_hat = k / n
    a, b, c = 1 + z * z / n, -(2 * p_hat + z * z / n), p_hat * p_hat
    root = math.sqrt(b * b - 4 * a * c)
    low, high = pa_module.wilson_interval(k, n)
    assert low == pytest.approx((-b - root) / (2 * a), abs=1e-12)
    assert high == pytest.approx((-b + root) / (2 * a), abs=1e-12)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)  # published value for 8/10
    assert pa_module.wilson_interval(0, 10)[0] == 0.0 and pa_module.wilson_interval(10, 10)[1] == 1.0


def test_interval_contains_accuracy_and_shrinks_with_more_pairs(metric):
    widths = []
    for n in (10, 100, 1000):
        k = int(0.7 * n)
        r = metric.compute(chosen_scores=[1.0] * k + [0.0] * (n - k), rejected_scores=[0.5] * n)
        assert r["accuracy"] == pytest.approx(0.7)
        assert r["ci95_low"] < r["accuracy"] < r["ci95_high"]
        widths.append(r["ci95_high"] - r["ci95_low"])
    assert widths[0] > widths[1] > widths[2]
    assert widths[2] == pytest.approx(2 * 1.959963984540054 * math.sqrt(0.7 * 0.3 / 1000), rel=0.01)


@pytest.mark.parametrize("args", [(-1, 5), (6, 5), (1, 0), (1.5, 4)])
def test_wilson_rejects_impossible_counts(args):
    with pytest.raises(ValueError):
        pa_module.wilson_interval(*args)


# ------------------------------------------------------------------------------------------ batching


def test_add_batch_equals_compute_with_subsets(metric):
    chosen, rejected, subsets = _random_pairs(300, seed=3)
    once = metric.compute(chosen_scores=chosen, rejected_scores=rejected, subsets=subsets)
    for start, stop in ((0, 7), (7, 150), (150, 151), (151, 300)):
        metric.add_batch(
            chosen_scores=chosen[start:stop], rejected_scores=rejected[start:stop], subsets=subsets[start:stop]
        )
    assert metric.compute() == once
    # Without names in the batches, the full list may be given to compute instead.
    for start in range(0, 300, 40):
        metric.add_batch(chosen_scores=chosen[start : start + 40], rejected_scores=rejected[start : start + 40])
    assert metric.compute(subsets=subsets) == once
    # The last batch may also come with compute itself.
    metric.add_batch(chosen_scores=chosen[:100], rejected_scores=rejected[:100], subsets=subsets[:100])
    assert metric.compute(chosen_scores=chosen[100:], rejected_scores=rejected[100:], subsets=subsets[100:]) == once


def test_add_one_pair_at_a_time_equals_compute(metric, judge):
    for c, r, s in zip(CHOSEN, REJECTED, SUBSETS):
        metric.add(chosen_score=c, rejected_score=r, subset=s)
    assert metric.compute() == metric.compute(chosen_scores=CHOSEN, rejected_scores=REJECTED, subsets=SUBSETS)
    verdicts = [1, 0, -1, 1]
    for v in verdicts:
        judge.add(prediction=v)
    assert judge.compute() == judge.compute(predictions=verdicts)
    judge.add_batch(predictions=verdicts[:2], subsets=["x", "y"])
    judge.add_batch(predictions=verdicts[2:], subsets=["x", "y"])
    assert judge.compute() == pa_module.pairwise_accuracy(verdicts, ["x", "y", "x", "y"])


def test_failed_compute_keeps_pairs_for_a_retry(metric):
    metric.add_batch(chosen_scores=[1.0, 0.0], rejected_scores=[0.0, 1.0])
    with pytest.raises(ValueError, match=r"subsets has 1 name but there are 2 pairs \(no name for pair 1\)"):
        metric.compute(subsets=["a"])
    r = metric.compute(subsets=["a", "b"])
    assert r["per_subset"]["a"]["accuracy"] == 1.0 and r["per_subset"]["b"]["accuracy"] == 0.0


# ------------------------------------------------------------------------------------------ bad input

BAD_SCORES = [
    (
        dict(chosen_scores=[0.1, 0.2, 0.3], rejected_scores=[0.0, 0.1]),
        r"chosen_scores has 3 values but rejected_scores has 2 \(rejected_scores has nothing for pair 2\)",
    ),
    (
        dict(chosen_scores=[0.1], rejected_scores=[0.0, 0.1]),
        r"chosen_scores has 1 value but rejected_scores has 2 \(chosen_scores has nothing for pair 1\)",
    ),
    (dict(chosen_scores=[], rejected_scores=[]), r"no pairs to score"),
    (
        dict(chosen_scores=[0.1, 0.2, 0.3, float("nan")], rejected_scores=[0.0] * 4),
        r"^chosen_scores\[3\] is nan: scores must be finite numbers$",
    ),
    (
        dict(chosen_scores=[0.1, 0.2], rejected_scores=[0.0, float("-inf")]),
        r"^rejected_scores\[1\] is -inf: scores must be finite numbers$",
    ),
    (dict(chosen_scores=np.array([0.1, np.inf]), rejected_scores=[0.0, 0.0]), r"^chosen_scores\[1\] is inf"),
    (dict(chosen_scores=[0.1, None], rejected_scores=[0.0, 0.0]), r"^chosen_scores\[1\] is None"),
    (dict(chosen_scores=[0.1, "0.2"], rejected_scores=[0.0, 0.0]), r"^chosen_scores\[1\] is '0.2'"),
    (dict(chosen_scores=[[0.1, 0.2]], rejected_scores=[0.0]), r"chosen_scores must be a flat list.*shape \(1, 2\)"),
    (
        dict(chosen_scores=[0.1, 0.2], rejected_scores=[0.0, 0.0], subsets=["Art"]),
        r"subsets has 1 name but there are 2 pairs \(no name for pair 1\)",
    ),
    (
        dict(chosen_scores=[0.1], rejected_scores=[0.0], subsets=["Art", "Art"]),
        r"subsets has 2 names but there are 1 pair \(an extra name at position 1\)",
    ),
    (
        dict(chosen_scores=[0.1, 0.2], rejected_scores=[0.0, 0.0], subsets=["Art", ""]),
        r"^subsets\[1\] is '': subset names must be non-empty strings$",
    ),
    (dict(chosen_scores=[0.1, 0.2], rejected_scores=[0.0, 0.0], subsets=[None, "Art"]), r"^subsets\[0\] is None"),
    (dict(chosen_scores=[0.1], rejected_scores=[0.0], subsets="Art"), r"subsets must be a list"),
    (dict(chosen_scores=[0.1]), r"^rejected_scores is missing"),
    (
        dict(chosen_scores=[0.0, 1e308], rejected_scores=[0.0, -1e308]),
        r"^chosen_scores\[1\] - rejected_scores\[1\] overflows",
    ),
    (dict(predictions=[1]), r"unknown argument\(s\) predictions for the 'default' config"),
]


@pytest.mark.parametrize("kwargs,message", BAD_SCORES)
def test_bad_scores_raise_value_error_with_position(kwargs, message):
    metric = load()
    with pytest.raises(ValueError, match=message):
        metric.compute(**kwargs)
    if "chosen_scores" in kwargs:
        with pytest.raises(ValueError, match=message):
            pa_module.pointwise_accuracy(kwargs["chosen_scores"], kwargs.get("rejected_scores"), kwargs.get("subsets"))


BAD_VERDICTS = [
    (dict(predictions=[1, 0, 2]), r"^predictions\[2\] is 2: predictions must be 1 .* 0 .* or -1"),
    (dict(predictions=[1, 0.5]), r"^predictions\[1\] is 0.5:"),
    (dict(predictions=np.array([1, -2])), r"^predictions\[1\] is -2:"),
    (dict(predictions=[1, float("nan")]), r"^predictions\[1\] is nan:"),
    (dict(predictions=["1"]), r"^predictions\[0\] is '1':"),
    (dict(predictions=[]), r"no pairs to score"),
    (dict(predictions=[1, 0], subsets=["a"]), r"subsets has 1 name but there are 2 pairs \(no name for pair 1\)"),
    (dict(predictions=[1, 0], subsets=["a", "  "]), r"^subsets\[1\] is '  '"),
    (
        dict(chosen_scores=[1.0], rejected_scores=[0.0]),
        r"unknown argument\(s\) chosen_scores, rejected_scores for the 'pairwise' config",
    ),
]


@pytest.mark.parametrize("kwargs,message", BAD_VERDICTS)
def test_bad_verdicts_raise_value_error_with_position(kwargs, message):
    judge = load("pairwise")
    with pytest.raises(ValueError, match=message):
        judge.compute(**kwargs)
    if "predictions" in kwargs:
        with pytest.raises(ValueError, match=message):
            pa_module.pairwise_accuracy(kwargs["predictions"], kwargs.get("subsets"))


def test_bad_batch_reports_batch_and_overall_position_and_writes_nothing(metric):
    metric.add_batch(chosen_scores=[1.0, 2.0, 3.0], rejected_scores=[0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"^rejected_scores\[1\] \(pair 4 of all pairs added so far\) is nan"):
        metric.add_batch(chosen_scores=[1.0, 2.0], rejected_scores=[0.0, float("nan")])
    with pytest.raises(
        ValueError, match=r"chosen_scores has 2 values but rejected_scores has 1 .*pair 1 of this batch, 4 of all"
    ):
        metric.add_batch(chosen_scores=[1.0, 2.0], rejected_scores=[0.0])
    assert metric.compute()["num_pairs"] == 3  # the bad batches were not stored


def test_mixing_named_and_unnamed_batches_is_refused(metric):
    metric.add_batch(chosen_scores=[1.0, 2.0], rejected_scores=[0.0, 0.0], subsets=["a", "b"])
    with pytest.raises(
        ValueError, match=r"subsets missing for pairs 2 to 3: the 2 pairs added before have subset names"
    ):
        metric.add_batch(chosen_scores=[1.0, 2.0], rejected_scores=[0.0, 0.0])
    with pytest.raises(ValueError, match=r"subsets were given twice"):
        metric.compute(subsets=["a", "b"])
    assert metric.compute()["macro_accuracy"] == 1.0
    metric.add_batch(chosen_scores=[1.0], rejected_scores=[0.0])
    with pytest.raises(ValueError, match=r"subsets given for pair 1 but not for the 1 pairs added before"):
        metric.add(chosen_score=1.0, rejected_score=0.0, subset="a")
    assert metric.compute()["num_pairs"] == 1


def test_compute_with_nothing_added_is_an_error(metric, judge):
    with pytest.raises(ValueError, match=r"no pairs to score: pass chosen_scores= and rejected_scores="):
        metric.compute()
    with pytest.raises(ValueError, match=r"no pairs to score: pass predictions="):
        judge.compute(subsets=["a"])


# ------------------------------------------------------------------------------------------ demo


@pytest.fixture(scope="module")
def app():
    return _import(METRIC_DIR / "app.py", "personalized_accuracy_app_under_test")


def test_app_returns_what_compute_returns(app, metric, judge):
    r = app.score_text("2.5, 0.25\n1.0\n-0.5, 3.0", "1.0,0.75,1.0,-2.0,0.5", "Art, Society\nSociety, Art, Society")
    assert r == metric.compute(chosen_scores=CHOSEN, rejected_scores=REJECTED, subsets=SUBSETS)
    assert r["accuracy"] == 0.6 and r["num_ties"] == 1
    assert app.score_text("1, 2", "0, 3", "") == metric.compute(chosen_scores=[1, 2], rejected_scores=[0, 3])
    assert app.judge_text("1, 0, 1, -1, 1", "") == judge.compute(predictions=[1, 0, 1, -1, 1])
    assert app.judge_text("1\n-1", "a\nb")["per_subset"]["b"]["num_no_verdict"] == 1


def test_app_turns_bad_input_into_gr_error(app):
    import gradio as gr

    with pytest.raises(gr.Error, match=r"chosen_scores\[1\] is nan: scores must be finite numbers"):
        app.score_text("1, nan", "0, 0", "")
    with pytest.raises(gr.Error, match=r"chosen_scores has 2 values but rejected_scores has 1"):
        app.score_text("1, 2", "0", "")
    with pytest.raises(gr.Error, match=r"rejected_scores\[0\] is 'abc': not a number"):
        app.score_text("1", "abc", "")
    with pytest.raises(gr.Error, match=r"predictions\[1\] is 2"):
        app.judge_text("1, 2", "")
    with pytest.raises(gr.Error, match=r"no pairs to score"):
        app.judge_text("", "")
    assert app.score_text("1", "0", "")["accuracy"] == 1.0  # the app still works after errors
