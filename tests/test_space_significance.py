"""Paired significance (McNemar's exact test) and what the leaderboard makes of it: shared ranks, profile gain,
and the Space's board tables and chart (filters, search, empty sections, intervals)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from scipy.stats import binomtest

from personalized_rewardbench.data.schema import SUBSETS
from personalized_rewardbench.runs.leaderboard import leaderboard_rows, print_leaderboard, with_significance
from personalized_rewardbench.runs.results import BENCHMARK, summarize
from personalized_rewardbench.runs.significance import mcnemar_p, paired_test, rank_with_ties, record_outcomes
from personalized_rewardbench.space.board import (
    chart_figure,
    chart_rows,
    filtered_sections,
    model_cell,
    section_frame,
    section_heading,
)
from personalized_rewardbench.space.views import HUB_URL


def _outcomes(flags: list[tuple[bool, bool]]) -> tuple[dict, dict]:
    a = {f"p{i}": ("Art", x) for i, (x, _) in enumerate(flags)}
    b = {f"p{i}": ("Art", y) for i, (_, y) in enumerate(flags)}
    return a, b


def test_mcnemar_p_matches_a_hand_computation_and_scipy():
    # 9 discordant pairs won by A, 2 by B: p = 2 * P(X <= 2), X ~ Bin(11, 1/2) = 2 * (1 + 11 + 55) / 2^11
    assert mcnemar_p(9, 2) == pytest.approx(2 * 67 / 2048, abs=1e-12)
    assert mcnemar_p(2, 9) == pytest.approx(2 * 67 / 2048, abs=1e-12)  # symmetric
    assert mcnemar_p(0, 0) == 1.0 and mcnemar_p(3, 3) == 1.0
    assert mcnemar_p(5, 0) == pytest.approx(2 / 32)  # all five discordant pairs for A: 2 * (1/2)^5
    for a_only, b_only in [(1, 7), (12, 30), (40, 41), (0, 11)]:
        expected = binomtest(a_only, a_only + b_only, 0.5).pvalue
        assert mcnemar_p(a_only, b_only) == pytest.approx(expected, rel=1e-12)


def test_paired_test_counts_only_shared_units_and_its_interval_is_the_hand_value():
    flags = [(True, True)] * 50 + [(True, False)] * 9 + [(False, True)] * 2 + [(False, False)] * 39
    a, b = _outcomes(flags)
    b["extra"] = ("Art", True)  # scored by B only: not part of the comparison
    test = paired_test(a, b)
    assert (test.units, test.both_right, test.a_only, test.b_only, test.both_wrong) == (100, 50, 9, 2, 39)
    assert test.difference == pytest.approx(0.07) and test.agreement == pytest.approx(0.89)
    assert test.p_value == pytest.approx(2 * 67 / 2048)
    spread = 1.96 * math.sqrt((11 / 100 - 0.07**2) / 100)  # Wald interval of a paired difference
    assert test.ci95 == pytest.approx((0.07 - spread, 0.07 + spread))
    assert not test.significant  # p = 0.065
    assert paired_test(a, {"other": ("Art", True)}) is None


def test_a_pairwise_judge_is_compared_per_answer_order():
    judge = [
        {"id": "x", "subset": "Art", "verdict_chosen_first": 1, "verdict_chosen_second": 0},
        {"id": "y", "subset": "Art", "verdict_chosen_first": -1, "verdict_chosen_second": 1},
    ]
    scores = [
        {"id": "x", "subset": "Art", "chosen_score": 1.0, "rejected_score": 0.0},
        {"id": "y", "subset": "Art", "chosen_score": 0.5, "rejected_score": 0.5},  # a tie is wrong
    ]
    test = paired_test(record_outcomes(judge), record_outcomes(scores))
    # units x#first (T,T), x#second (F,T), y#first (F,F), y#second (T,F)
    assert (test.units, test.both_right, test.a_only, test.b_only, test.both_wrong) == (4, 1, 1, 1, 1)


def _run(folder: Path, model: str, correct: list[bool], k: int = 0, demo: bool = False, limit=None) -> None:
    records = [
        {
            "id": f"{i % 3}_0_{i}",
            "subset": SUBSETS[i % 3],
            "chosen_score": 1.0 if right else 0.0,
            "rejected_score": 0.5,
        }
        for i, right in enumerate(correct)
    ]
    run = folder / model.replace("/", "__") / f"k{k}-{demo}-{limit}"
    run.mkdir(parents=True)
    payload = {
        "benchmark": BENCHMARK,
        "model": model,
        "model_type": "classifier",
        "model_revision": "r",
        "dataset": "hub:QiyaoMa/Personalized-RewardBench",
        "dataset_revision": "d",
        "demo_sample": demo,
        "created_at": "2026-11-01T00:00:00+00:00",
        "protocol": {"profile_k": k, "retriever": "minilm" if k else "none", "subsets": [], "limit": limit},
        **summarize(records),
    }
    (run / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run / "results.json").write_text(json.dumps(payload))


@pytest.fixture
def board(tmp_path):
    """Four full runs on the same 300 pairs: `best` beats everyone; `mid-a` and `mid-b` are not distinguishable;
    `best` is `mid-a` at profile-k 3. Plus a partial run and a demo-sample run."""
    rng = random.Random(7)
    base = [rng.random() < 0.62 for _ in range(300)]
    mid_b = list(base)
    for i in range(0, 300, 25):  # 12 flips: a few discordant pairs each way, far from significant
        mid_b[i] = not mid_b[i]
    best = [True if i % 3 else right for i, right in enumerate(base)]
    folder = tmp_path / "results"
    _run(folder, "Org/mid-a", base)
    _run(folder, "Org/mid-b", mid_b)
    _run(folder, "Org/mid-a", best, k=3)
    _run(folder, "Org/low", [right and i % 2 == 0 for i, right in enumerate(base)])
    _run(folder, "Org/partial", base[:30], limit=10)
    _run(folder, "baseline:length", base[:24], demo=True)
    return folder


def test_ranks_are_shared_where_mcnemar_finds_no_difference(board, capsys):
    rows = with_significance(leaderboard_rows(board))
    benchmark = [r for r in rows if r["section"] == "benchmark"]
    assert [(r["model"], r["profile_k"], r["rank"]) for r in benchmark] == [
        ("Org/mid-a", 3, 1),
        ("Org/mid-a", 0, 2),
        ("Org/mid-b", 0, 2),
        ("Org/low", 0, 4),
    ]
    rng = random.Random(7)
    base = [rng.random() < 0.62 for _ in range(300)]
    flipped = [base[i] for i in range(0, 300, 25)]
    a_only, b_only = sum(flipped), len(flipped) - sum(flipped)  # mid-a right where mid-b was flipped to wrong
    assert benchmark[1]["p_next"] == pytest.approx(mcnemar_p(a_only, b_only)) and benchmark[1]["p_next"] > 0.05
    assert benchmark[1]["tied_with_next"] and not benchmark[0]["tied_with_next"]
    assert all(r["rank"] is None for r in rows if r["section"] != "benchmark")
    gain_row = benchmark[0]
    assert gain_row["profile_gain"] == pytest.approx(benchmark[0]["accuracy"] - benchmark[1]["accuracy"])
    assert gain_row["profile_gain_p"] < 1e-6 and benchmark[1]["profile_gain"] is None

    print_leaderboard(leaderboard_rows(board))
    out = capsys.readouterr().out
    places = [line.split()[0] for line in out.splitlines() if "Org/" in line and "first 10" not in line]
    assert places == ["1", "2", "2", "4"]
    assert "McNemar's exact test" in out and f"{mcnemar_p(a_only, b_only):.3f}" in out  # p(next) of the tied runs

    frame = section_frame(filtered_sections(board)["benchmark"])
    assert list(frame["rank"]) == ["1", "2=", "2=", "4"]
    assert frame["k gain"][0].startswith("+") and "(p < 0.001)" in frame["k gain"][0]


def test_rank_with_ties_falls_back_to_intervals_without_scores():
    rows = [
        {"accuracy": 0.80, "ci95_low": 0.75, "ci95_high": 0.85},
        {"accuracy": 0.78, "ci95_low": 0.72, "ci95_high": 0.83},
        {"accuracy": 0.60, "ci95_low": 0.55, "ci95_high": 0.66},
    ]
    assert [r["rank"] for r in rank_with_ties(rows, lambda row: None)] == [1, 1, 3]


def test_board_tables_search_filters_and_empty_sections(board):
    sections = filtered_sections(board, search="mid-b")
    assert [r["model"] for r in sections["benchmark"]] == ["Org/mid-b"] and sections["demo"] == []
    assert "No run matches the search" in section_heading("demo", sections["demo"], filtered=True)
    assert "No partial runs yet" in section_heading("partial", [], filtered=False)
    assert section_heading("benchmark", sections["benchmark"], True).startswith("### Benchmark runs (1)")
    assert model_cell("Org/mid-b") == f"[mid-b]({HUB_URL}/Org/mid-b)"
    assert model_cell("/srv/models/tiny-rm") == "local: tiny-rm" and model_cell("baseline:length") == "baseline:length"
    frame = section_frame(filtered_sections(board)["partial"], columns=["pairs", "coverage"])
    assert list(frame.columns) == ["rank", "model", "overall", "pairs", "coverage"]
    assert list(frame["coverage"]) == ["first 10 per subset"] and list(frame["rank"]) == [""]


def test_chart_follows_the_section_filters_search_and_demo_toggle(board):
    rows = chart_rows(board, chart_section="benchmark runs")
    assert list(rows["accuracy (%)"]) == sorted(rows["accuracy (%)"], reverse=True) and len(rows) == 4
    assert all(low < acc < high for low, acc, high in zip(rows["low (%)"], rows["accuracy (%)"], rows["high (%)"]))
    assert list(chart_rows(board, chart_section="benchmark runs", search="low")["run"]) == ["low | k=0"]
    assert chart_rows(board, chart_section="demo-sample runs", show_demo=False).empty
    assert len(chart_rows(board, chart_section="demo-sample runs", show_demo=True)) == 1
    art = chart_rows(board, subset="Art", chart_section="benchmark runs")
    assert set(art["pairs"]) == {100}
    figure = chart_figure(rows, "benchmark runs")
    (axis,) = figure.axes
    assert len(axis.patches) >= 4 and axis.get_xlim() == (0, 100)
