"""Tiny policy -> three tiny reward models -> a rubric judge over HTTP -> curves -> correlation with the benchmark."""

from __future__ import annotations

import hashlib
import json
from itertools import combinations
from pathlib import Path
from statistics import mean

import pytest
from chat_server import make_app, serving
from scipy import stats

from personalized_rewardbench.cli import main
from personalized_rewardbench.downstream.rubric_judge import candidate_key
from personalized_rewardbench.testing.tiny_models import build_tiny_causal_lm, build_tiny_reward_model

N = 4


def _canned_judge(messages, body) -> str:
    """A deterministic stand-in judge: ratings from a hash of the answer; every 6th answer unparsable."""
    user = messages[-1]["content"]
    count = int(user.split("Aspects this user needs addressed (")[1].split(")")[0])
    answer = user.split("[Answer]\n")[1].split("\n[End of answer]")[0]
    digest = hashlib.sha256(answer.encode()).digest()
    if digest[0] % 6 == 0:
        return "I cannot rate this answer."
    return "Some reasoning.\nRatings: [" + ", ".join(str(digest[1 + a] % 3) for a in range(count)) + "]"


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("bon")
    policy = build_tiny_causal_lm(root / "policy", seed=5)
    rms = [str(build_tiny_reward_model(root / f"rm{seed}", seed=seed)) for seed in (0, 1, 2)]
    cands = root / "cands"
    args = ["bon", "generate", "--policy", str(policy), "--n", str(N), "--profile-k", "2", "--data", "sample"]
    args += ["--limit", "2", "--retriever", "bm25", "--max-new-tokens", "10", "--device", "cpu", "--no-progress"]
    assert main([*args, "--output", str(cands)]) == 0
    for model in [*rms, "baseline:length"]:
        score = ["bon", "score", "--model", model, "--candidates", str(cands), "--profile-k", "2"]
        assert main([*score, "--retriever", "bm25", "--device", "cpu", "--no-progress"]) == 0
    with serving(make_app(_canned_judge, [])) as url:
        judge = ["bon", "judge", "--judge", "canned", "--candidates", str(cands), "--base-url", url, "--no-progress"]
        assert main(judge) == 0
    return {"root": root, "cands": cands, "rms": rms}


def _score_runs(cands: Path) -> dict[str, dict[str, list[float]]]:
    runs = {}
    for folder in (cands / "scores").iterdir():
        identity = json.loads((folder / "run.json").read_text())
        records = [json.loads(line) for line in (folder / "scores.jsonl").read_text().splitlines()]
        runs[identity["model"]] = {r["id"]: r["scores"] for r in records}
    return runs


def test_every_candidate_is_scored_by_each_reward_model(pipeline):
    runs = _score_runs(pipeline["cands"])
    assert set(runs) == {*pipeline["rms"], "baseline:length"}
    candidates = [json.loads(line) for line in (pipeline["cands"] / "candidates.jsonl").read_text().splitlines()]
    for scores in runs.values():
        assert list(scores) == [r["id"] for r in candidates]
        assert all(len(s) == N for s in scores.values())
    for record in candidates:  # the length baseline scores the candidates' lengths: candidates in their order
        assert runs["baseline:length"][record["id"]] == [float(len(text)) for text in record["candidates"]]
    first, second = (runs[m] for m in pipeline["rms"][:2])
    assert first != second  # different seeds: different reward models


def test_shared_prompt_scores_equal_scoring_each_candidate_in_full(pipeline, tmp_path):
    rm = pipeline["rms"][0]
    copy = tmp_path / "cands"
    copy.mkdir()
    for name in ("run.json", "candidates.jsonl"):
        (copy / name).write_bytes((pipeline["cands"] / name).read_bytes())
    score = ["bon", "score", "--model", rm, "--candidates", str(copy), "--profile-k", "2", "--retriever", "bm25"]
    assert main([*score, "--device", "cpu", "--no-progress", "--no-shared-prefix"]) == 0
    full, shared = _score_runs(copy)[rm], _score_runs(pipeline["cands"])[rm]
    for item_id in shared:
        assert full[item_id] == pytest.approx(shared[item_id], abs=1e-4)
        ranks = lambda values: sorted(range(N), key=lambda j: -values[j])  # noqa: E731
        assert ranks(full[item_id]) == ranks(shared[item_id])


def _brute_force(scores: list[float], qualities: list[float], k: int) -> float:
    values = []
    for subset in combinations(range(len(scores)), k):
        top = max(scores[i] for i in subset)
        values.append(mean(qualities[i] for i in subset if scores[i] == top))
    return mean(values)


def test_curves_match_enumeration_from_the_files(pipeline, capsys):
    cands = pipeline["cands"]
    assert main(["bon", "curve", str(cands)]) == 0
    curves = json.loads((cands / "curves.json").read_text())
    assert (cands / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    [judge_dir] = (cands / "judge").iterdir()
    judged = {}
    for line in (judge_dir / "judgments.jsonl").read_text().splitlines():
        record = json.loads(line)
        judged[record["id"]] = record["quality"]
    candidates = [json.loads(line) for line in (cands / "candidates.jsonl").read_text().splitlines()]
    qualities = {r["id"]: [judged[candidate_key(r["id"], text)] for text in r["candidates"]] for r in candidates}
    kept = [i for i, q in qualities.items() if None not in q]
    assert curves["items"] == len(kept) and curves["items_excluded"] == len(candidates) - len(kept)
    assert curves["unparsable_judgments"] == sum(1 for value in judged.values() if value is None) > 0
    assert curves["k_values"] == [1, 2, 4]
    runs = _score_runs(cands)
    for model, figures in curves["models"].items():
        for k in (1, 2, 4):
            expected = mean(_brute_force(runs[model][i], qualities[i], k) for i in kept)
            assert figures["k"][str(k)]["mean"] == pytest.approx(expected)
            oracle = curves["oracle (judge's best)"]["k"][str(k)]["mean"]
            assert figures["k"][str(k)]["mean"] <= oracle + 1e-12
        assert figures["k"]["1"]["mean"] == pytest.approx(curves["random pick"]["mean"])
    out = capsys.readouterr().out
    assert "best-of-k judge quality over" in out and "oracle" in out


def test_correlate_against_benchmark_runs_and_another_benchmark(pipeline, tmp_path, capsys):
    bench = tmp_path / "bench"
    for model in pipeline["rms"]:
        evaluate = ["evaluate", "--model", model, "--data", "sample", "--device", "cpu", "--no-progress"]
        assert main([*evaluate, "--output", str(bench)]) == 0
    other = tmp_path / "other.csv"
    other.write_text("model,score\n" + "".join(f"{m},{s}\n" for m, s in zip(pipeline["rms"], (3.0, 1.0, 2.0))))
    cands = pipeline["cands"]
    args = ["correlate", "--benchmark", str(bench), "--downstream", str(cands), "--other", f"RB={other}"]
    assert main([*args, "--bootstrap", "30", "--output", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "correlation.json").read_text())
    assert (tmp_path / "correlation.png").read_bytes()[:4] == b"\x89PNG"
    rows = {(row["benchmark"], row["target"]): row for row in report["rows"]}
    accuracies = {}
    for path in bench.rglob("results.json"):
        result = json.loads(path.read_text())
        accuracies[result["model"]] = result["accuracy"]
    models = sorted(pipeline["rms"])
    assert rows[("personalized-rewardbench", f"gain@{N}")]["models"] == models
    points = report["points"]["personalized-rewardbench"]
    gains = [points[m]["downstream"][f"gain@{N}"] for m in models]
    row = rows[("personalized-rewardbench", f"gain@{N}")]
    x = [accuracies[m] for m in models]
    assert len(set(x)) == len(set(gains)) == 3  # three different rankings to compare
    assert row["spearman"]["value"] == pytest.approx(stats.spearmanr(x, gains).statistic)
    assert row["kendall"]["value"] == pytest.approx(stats.kendalltau(x, gains).statistic)
    assert row["weighted_tau"]["value"] == pytest.approx(stats.weightedtau(x, gains).statistic)
    # best-of-1 is the mean candidate quality for every model: a tie, so no ranking statistic
    assert all(
        v != v for v in (rows[("personalized-rewardbench", "quality@1")][s]["value"] for s in ("spearman", "rbo"))
    )
    rb = rows[("RB", f"gain@{N}")]
    rb_scores = dict(zip(pipeline["rms"], (3.0, 1.0, 2.0)))
    expected = stats.spearmanr([rb_scores[m] for m in models], gains).statistic
    assert rb["spearman"]["value"] == pytest.approx(expected)
    low, high = rb["spearman"]["ci95"]
    assert -1.0 <= low <= high <= 1.0
    # gains in the report equal the curves' figures for the same models
    curves = json.loads((cands / "curves.json").read_text())
    assert gains == pytest.approx([curves["models"][m]["gain_at_n"]["mean"] for m in models])
    assert "RB" in capsys.readouterr().out
