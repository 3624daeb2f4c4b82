"""`prbench correlate`: does the benchmark's ranking of reward models predict their Best-of-N ranking?

Benchmark side: the `prbench evaluate` runs under `--benchmark` with the chosen protocol (profile K,
template); a model's figure is its accuracy (from results.json, computed by the metric module), and
its per-pair correctness (chosen scored above rejected; ties wrong) from scores.jsonl feeds the
bootstrap. Downstream side: a candidates folder (`bon generate/score/judge`); a model's figure is its
best-of-N gain over a random pick, and its best-of-k quality at every k (`curves`). Other benchmarks
(`--other NAME=FILE`, a CSV with columns model,score or a JSON {model: score} / [{model, score}])
are compared on the same models side by side.

Every statistic (`rank_stats.agreement`) gets a 95 % percentile bootstrap interval: each replicate
resamples the benchmark pairs (the same pairs for every model) and, independently, the downstream
items (the same items for every model), and recomputes both rankings; other benchmarks give one
figure per model, so only their downstream side is resampled.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from personalized_rewardbench.downstream.curves import CurveData, k_values, load_curve_data, save_figure
from personalized_rewardbench.downstream.rank_stats import STATISTICS, agreement
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.results import SCORES_FILE, find_results
from personalized_rewardbench.runs.score_log import write_json_atomic

OURS = "personalized-rewardbench"


@dataclass
class BenchmarkSide:
    name: str
    scores: dict[str, float]  # model -> figure
    correct: dict[str, np.ndarray] | None = None  # model -> per-pair 0/1 on shared pairs (for the bootstrap)


def load_benchmark(folder: Path, profile_k: int, template: str = "default") -> BenchmarkSide:
    """Accuracy and per-pair correctness of every model evaluated under `folder` with this protocol."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"--benchmark {folder} is not a folder of `prbench evaluate` results")
    runs: dict[str, dict[str, Any]] = {}
    for result in find_results(folder):
        protocol = result.get("protocol", {})
        if protocol.get("profile_k") != profile_k or protocol.get("template", "default") != template:
            continue
        if result["model"] in runs:
            raise UserError(
                f"--benchmark {folder}: {result['model']} has several runs with k={profile_k} "
                f"({runs[result['model']]['path']}, {result['path']}); keep one run per model there"
            )
        runs[result["model"]] = result
    if not runs:
        raise UserError(f"--benchmark {folder}: no run with --profile-k {profile_k} and --template {template}")
    pair_scores = {}
    for model, result in runs.items():
        path = Path(result["path"]).with_name(SCORES_FILE)
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        pair_scores[model] = {r["id"]: float(r["chosen_score"] > r["rejected_score"]) for r in records}
    shared = sorted(set.intersection(*(set(p) for p in pair_scores.values())))
    correct = {model: np.array([pairs[i] for i in shared]) for model, pairs in pair_scores.items()}
    return BenchmarkSide(OURS, {model: float(result["accuracy"]) for model, result in runs.items()}, correct)


def load_other(spec: str) -> BenchmarkSide:
    """`NAME=FILE`: another benchmark's score per model."""
    name, sep, file = spec.partition("=")
    path = Path(file)
    if not sep or not name or not path.is_file():
        raise UserError(f"--other {spec!r}: expected NAME=FILE with an existing CSV or JSON file of model, score")
    try:
        if path.suffix == ".json":
            payload = json.loads(path.read_text(encoding="utf-8"))
            rows = payload.items() if isinstance(payload, dict) else ((r["model"], r["score"]) for r in payload)
        else:
            with path.open(encoding="utf-8", newline="") as handle:
                rows = [(row["model"], row["score"]) for row in csv.DictReader(handle)]
        scores = {str(model): float(score) for model, score in rows}
    except (KeyError, TypeError, ValueError, json.JSONDecodeError) as error:
        raise UserError(f"--other {path}: cannot read model/score pairs ({type(error).__name__}: {error})") from None
    return BenchmarkSide(name, scores)


def downstream_targets(data: CurveData, models: list[str]) -> tuple[list[str], dict[str, np.ndarray]]:
    """Target names (`gain@N`, `quality@k`...) and each model's items x targets matrix."""
    ks = k_values(data.n)
    names = [f"gain@{data.n}"] + [f"quality@{k}" for k in ks]
    matrices = {}
    for model in models:
        values = data.values(model, ks)
        matrices[model] = np.column_stack([values[:, -1] - values[:, 0], values])
    return names, matrices


def correlate(
    benchmarks: list[BenchmarkSide], data: CurveData, *, replicates: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """Every statistic with its bootstrap interval, per benchmark and downstream target."""
    report: dict[str, Any] = {"judge": data.judge, "items": len(data.item_ids), "replicates": replicates, "rows": []}
    rng = np.random.default_rng(seed)
    for side in benchmarks:
        models = sorted(m for m in side.scores if m in data.scores)
        if len(models) < 3:
            report["rows"].append({"benchmark": side.name, "models": models, "note": "fewer than 3 shared models"})
            continue
        targets, matrices = downstream_targets(data, models)
        x = [side.scores[m] for m in models]
        points = np.stack([matrices[m].mean(0) for m in models])  # models x targets
        boot = np.empty((replicates, len(targets), len(STATISTICS)))
        n_items = len(data.item_ids)
        for b in range(replicates):
            rows = rng.integers(0, n_items, n_items)
            y = np.stack([matrices[m][rows].mean(0) for m in models])
            if side.correct is not None:
                pairs = rng.integers(0, len(side.correct[models[0]]), len(side.correct[models[0]]))
                xb = [side.correct[m][pairs].mean() for m in models]
            else:
                xb = x
            for t in range(len(targets)):
                figures = agreement(models, xb, y[:, t])
                boot[b, t] = [figures[s] for s in STATISTICS]
        for t, target in enumerate(targets):
            figures = agreement(models, x, points[:, t])
            report["rows"].append(
                {
                    "benchmark": side.name,
                    "target": target,
                    "models": models,
                    **{
                        s: {
                            "value": figures[s],
                            "ci95": [float(v) for v in np.nanpercentile(boot[:, t, j], [2.5, 97.5])]
                            if not np.isnan(boot[:, t, j]).all()
                            else [float("nan")] * 2,
                        }
                        for j, s in enumerate(STATISTICS)
                    },
                }
            )
        report.setdefault("points", {})[side.name] = {
            m: {"benchmark": side.scores[m], "downstream": dict(zip(targets, map(float, points[i])))}
            for i, m in enumerate(models)
        }
    return report


def write_scatter(report: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sides = list(report.get("points", {}))
    figure, axes = plt.subplots(1, max(1, len(sides)), figsize=(4.5 * max(1, len(sides)), 4), squeeze=False)
    for axis, side in zip(axes[0], sides):
        points = report["points"][side]
        target = next(iter(next(iter(points.values()))["downstream"]))
        for model, figures in points.items():
            axis.scatter(figures["benchmark"], figures["downstream"][target])
            axis.annotate(Path(model).name, (figures["benchmark"], figures["downstream"][target]), fontsize=7)
        axis.set_xlabel(f"{side} score")
        axis.set_ylabel(f"Best-of-N {target} (judge quality)")
        axis.set_title(side)
    figure.tight_layout()
    return save_figure(figure, path)


def run_correlation(
    benchmark: Path,
    downstream: Path,
    *,
    profile_k: int,
    template: str = "default",
    others: list[str] = (),
    judge: str | None = None,
    replicates: int = 1000,
    seed: int = 0,
    output: Path | None = None,
) -> tuple[dict[str, Any], Path, Path]:
    """Load both sides, correlate, write `correlation.json` and `correlation.png` (default: in `downstream`)."""
    if replicates < 1:
        raise UserError(f"--bootstrap must be positive, got {replicates}")
    sides = [load_benchmark(benchmark, profile_k, template), *(load_other(spec) for spec in others)]
    report = correlate(sides, load_curve_data(downstream, judge), replicates=replicates, seed=seed)
    report["benchmark_protocol"] = {"profile_k": profile_k, "template": template}
    folder = Path(output) if output else Path(downstream)
    json_path, png_path = folder / "correlation.json", folder / "correlation.png"
    write_json_atomic(json_path, report)
    write_scatter(report, png_path)
    return report, json_path, png_path
