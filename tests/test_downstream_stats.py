"""Best-of-k estimator, rank statistics, correlation bootstrap and the rubric parser, on exact values."""

from __future__ import annotations

import json
import math
import random
from itertools import combinations
from statistics import mean

import numpy as np
import pytest
from scipy import stats

from personalized_rewardbench.downstream.correlation import BenchmarkSide, correlate, load_other
from personalized_rewardbench.downstream.curves import CurveData, best_of_k, interval, k_values
from personalized_rewardbench.downstream.rank_stats import STATISTICS, agreement, ndcg, rbo
from personalized_rewardbench.downstream.rubric_judge import candidate_key, parse_ratings, quality
from personalized_rewardbench.errors import UserError


def brute_force(scores: list[float], qualities: list[float], k: int) -> float:
    """Mean over every k-subset of the quality of its top-scored member (ties: mean of the tied members)."""
    values = []
    for subset in combinations(range(len(scores)), k):
        top = max(scores[i] for i in subset)
        values.append(mean(qualities[i] for i in subset if scores[i] == top))
    return mean(values)


@pytest.mark.parametrize("trial", range(40))
def test_estimator_equals_enumeration_of_all_k_subsets_with_ties(trial):
    rng = random.Random(trial)
    n = rng.randint(1, 8)
    scores = [float(rng.randint(0, 3)) for _ in range(n)]  # few values: many ties
    qualities = [rng.choice([0.0, 0.5, 1.0, 4 / 3, 2.0]) for _ in range(n)]
    for k in range(1, n + 1):
        assert best_of_k(scores, qualities, k) == pytest.approx(brute_force(scores, qualities, k), abs=1e-12)


def test_estimator_hand_values():
    # k = 1 is the mean; k = N is the top-scored (ties: their mean); not "the first k"
    assert best_of_k([1, 5, 3], [0.0, 2.0, 1.0], 1) == pytest.approx(1.0)
    assert best_of_k([1, 5, 3], [0.0, 2.0, 1.0], 3) == pytest.approx(2.0)
    assert best_of_k([5, 5, 3], [0.0, 2.0, 1.0], 3) == pytest.approx(1.0)
    # N = 4, k = 2, distinct scores: P(rank i) = (i - 1) / 6 -> (0*q1 + 1*q2 + 2*q3 + 3*q4) / 6
    assert best_of_k([1, 2, 3, 4], [2.0, 0.0, 1.0, 0.0], 2) == pytest.approx((0 * 2 + 1 * 0 + 2 * 1 + 3 * 0) / 6)
    with pytest.raises(ValueError):
        best_of_k([1, 2], [0.0, 1.0], 3)


def test_k_values_and_interval():
    assert k_values(16) == [1, 2, 4, 8, 16]
    assert k_values(12) == [1, 2, 4, 8, 12]
    assert k_values(1) == [1]
    figures = interval(np.array([1.0, 2.0, 3.0, 4.0]))
    half = 1.96 * np.std([1, 2, 3, 4], ddof=1) / 2
    assert figures["mean"] == 2.5 and figures["ci95"] == pytest.approx([2.5 - half, 2.5 + half])


def test_rank_statistics_equal_scipy_and_hand_computations():
    names = ["m1", "m2", "m3", "m4", "m5"]
    x = [0.61, 0.55, 0.70, 0.52, 0.58]
    y = [1.20, 1.25, 1.40, 0.90, 1.10]
    figures = agreement(names, x, y)
    assert figures["spearman"] == pytest.approx(stats.spearmanr(x, y).statistic)
    assert figures["kendall"] == pytest.approx(stats.kendalltau(x, y).statistic)
    assert figures["weighted_tau"] == pytest.approx(stats.weightedtau(x, y).statistic)
    # by hand: x ranks m3 m1 m5 m2 m4, y ranks m3 m2 m1 m5 m4 -> Spearman 1 - 6 * sum d^2 / (n (n^2 - 1))
    d2 = (1 - 1) ** 2 + (2 - 3) ** 2 + (3 - 4) ** 2 + (4 - 2) ** 2 + (5 - 5) ** 2
    assert figures["spearman"] == pytest.approx(1 - 6 * d2 / (5 * 24))
    # relevance = downstream rank grade: m3 5, m2 4, m1 3, m5 2, m4 1; ranked by x: m3 m1 m5 m2 m4
    dcg = 5 / math.log2(2) + 3 / math.log2(3) + 2 / math.log2(4) + 4 / math.log2(5) + 1 / math.log2(6)
    idcg = 5 / math.log2(2) + 4 / math.log2(3) + 3 / math.log2(4) + 2 / math.log2(5) + 1 / math.log2(6)
    assert figures["ndcg"] == pytest.approx(dcg / idcg)
    # RBO (Webber et al. 2010, eq. 32) at p = 0.9: overlaps X_d of the prefixes = 1, 1, 2, 4, 5
    p, overlaps = 0.9, [1, 1, 2, 4, 5]
    expected = overlaps[-1] / 5 * p**5 + (1 - p) / p * sum(x_d / d * p**d for d, x_d in enumerate(overlaps, 1))
    assert figures["rbo"] == pytest.approx(expected)


def test_rbo_and_ndcg_edge_cases():
    assert rbo(["a", "b", "c"], ["a", "b", "c"]) == pytest.approx(1.0)
    assert rbo(["a", "b"], ["b", "a"], p=0.9) == pytest.approx(0.81 + 0.09)  # X = 0, 2
    assert rbo(["a", "b", "c"], ["a", "c", "b"], p=0.5) == pytest.approx(0.875)
    with pytest.raises(ValueError):
        rbo(["a", "b"], ["a", "c"])
    assert ndcg([3, 2, 1], [30, 20, 10]) == pytest.approx(1.0)
    assert math.isnan(agreement(["a", "b", "c"], [1, 1, 1], [1, 2, 3])["spearman"])  # constant: undefined


def _curve_data(quality_by_model: dict[str, float], items: int, noise: float, seed: int = 0) -> CurveData:
    """Items with 4 candidates; each model's scores pick a candidate of quality near its level."""
    rng = np.random.default_rng(seed)
    qualities = [[0.0, 0.5, 1.5, 2.0] for _ in range(items)]
    scores = {}
    for model, level in quality_by_model.items():
        rows = []
        for q in qualities:
            rows.append([-abs(value - level) + noise * rng.standard_normal() for value in q])
        scores[model] = rows
    identities = {m: {"model_type": "baseline"} for m in scores}
    return CurveData([f"i{n}" for n in range(items)], qualities, scores, identities, "judge", [], 0, 4)


def test_correlation_values_and_bootstrap_over_items():
    levels = {"a": 2.0, "b": 1.5, "c": 0.5, "d": 0.0}
    data = _curve_data(levels, items=30, noise=0.0)
    rng = np.random.default_rng(3)
    correct = {m: (rng.random(100) < p).astype(float) for m, p in zip("abcd", [0.82, 0.78, 0.6, 0.4])}
    assert [correct[m].mean() for m in "abcd"] == sorted((correct[m].mean() for m in "abcd"), reverse=True)
    ours = BenchmarkSide("ours", {m: float(v.mean()) for m, v in correct.items()}, correct)
    reversed_ = BenchmarkSide("reversed", {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})
    report = correlate([ours, reversed_], data, replicates=40, seed=1)
    rows = {(row["benchmark"], row["target"]): row for row in report["rows"]}
    assert set(rows) >= {("ours", "gain@4"), ("ours", "quality@1"), ("ours", "quality@4"), ("reversed", "gain@4")}
    top = rows[("ours", "quality@4")]
    assert top["spearman"]["value"] == pytest.approx(1.0) and top["kendall"]["value"] == pytest.approx(1.0)
    assert top["rbo"]["value"] == pytest.approx(1.0) and top["ndcg"]["value"] == pytest.approx(1.0)
    assert rows[("reversed", "quality@4")]["spearman"]["value"] == pytest.approx(-1.0)
    # quality@1 is the mean candidate quality: the same for every model, so rank statistics are undefined
    assert all(math.isnan(rows[("ours", "quality@1")][s]["value"]) for s in STATISTICS)
    # bootstrap: the benchmark pairs are resampled, so a small accuracy gap on 100 pairs is not always kept
    low, high = top["spearman"]["ci95"]
    assert low < 1.0 and high == pytest.approx(1.0)
    assert rows[("reversed", "quality@4")]["spearman"]["ci95"] == pytest.approx([-1.0, -1.0])
    again = correlate([ours, reversed_], data, replicates=40, seed=1)
    assert json.dumps(again["rows"]) == json.dumps(report["rows"])  # nan-aware equality


def test_other_benchmark_files(tmp_path):
    (tmp_path / "o.csv").write_text("model,score\na,1.5\nb,2\n")
    (tmp_path / "o.json").write_text('[{"model": "a", "score": 1.5}, {"model": "b", "score": 2}]')
    assert load_other(f"RB={tmp_path / 'o.csv'}").scores == {"a": 1.5, "b": 2.0}
    assert load_other(f"RB={tmp_path / 'o.json'}").scores == {"a": 1.5, "b": 2.0}
    with pytest.raises(UserError, match="NAME=FILE"):
        load_other(str(tmp_path / "o.csv"))
    (tmp_path / "bad.csv").write_text("name,value\na,1\n")
    with pytest.raises(UserError, match="cannot read"):
        load_other(f"X={tmp_path / 'bad.csv'}")


@pytest.mark.parametrize(
    ("text", "count", "expected"),
    [
        ("Aspect 1 is covered well.\nRatings: [2, 1, 0]", 3, [2, 1, 0]),
        ("**Ratings:** [2,2]", 2, [2, 2]),
        ("<think>Ratings: [0, 0]</think>Final. Ratings: [1, 2]", 2, [1, 2]),
        ("Ratings: [0, 0]. On reflection, Ratings: [2, 1]", 2, [2, 1]),
        ("ratings: [1.0, 2.0, 0]", 3, [1, 2, 0]),
        ("Ratings: [2, 1]", 3, None),  # wrong count
        ("Ratings: [3, 1, 0]", 3, None),  # out of range
        ("Ratings: [1.5, 1, 0]", 3, None),  # not a whole rating
        ("Ratings: [2, one, 0]", 3, None),
        ("I would give it 2, 1 and 0.", 3, None),  # no Ratings statement
        ("", 1, None),
    ],
)
def test_rubric_parser_on_canned_generations(text, count, expected):
    assert parse_ratings(text, count) == expected


def test_quality_is_the_mean_over_aspects_and_keys_depend_on_item_and_text():
    assert quality([2, 1, 0]) == pytest.approx(1.0)
    assert quality([2, 2, 1, 1]) == pytest.approx(1.5)
    assert quality(None) is None
    assert candidate_key("0_0_1", "text") == candidate_key("0_0_1", "text")
    assert candidate_key("0_0_1", "text") != candidate_key("0_0_2", "text") != candidate_key("0_0_1", "text ")


def test_chat_ids_fold_the_system_message_for_templates_without_one():
    from personalized_rewardbench.downstream.generation import chat_ids
    from personalized_rewardbench.testing.tiny_models import make_tokenizer

    tokenizer = make_tokenizer()
    chat = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hello?"}]
    with_system = tokenizer.decode(chat_ids(tokenizer, chat))
    assert with_system.count("<|im_start|>") == 3 and "system" in with_system
    tokenizer.chat_template = (
        "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('no system role') }}{% endif %}"
        "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )
    folded = tokenizer.decode(chat_ids(tokenizer, chat))
    assert folded.count("<|im_start|>") == 2 and "system" not in folded
    assert folded.index("kind") < folded.index("hello")
