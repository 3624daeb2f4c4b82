"""Leaderboard over stored runs: one row per results.json, a printed table and a bar chart PNG.

Runs on the demo sample are kept apart from benchmark runs (flagged `demo_sample`) and never ranked with them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from personalized_rewardbench.results import find_results
from personalized_rewardbench.schema import SUBSETS

SHORT = {"Art_and_Entertainment": "Art", "Lifestyle_and_Personal_Development": "Lifestyle", "Society_and_Culture": "Society"}


def protocol_label(result: dict[str, Any]) -> str:
    protocol = result.get("protocol", {})
    k = protocol.get("profile_k", 0)
    label = f"k={k}" + (f" {protocol.get('retriever')}" if k else "")
    if protocol.get("template", "default") != "default":
        label += f" {protocol['template']}"
    if protocol.get("judge_mode"):
        label += f" {protocol['judge_mode']}"
    return label


def leaderboard_rows(folder: Path) -> list[dict[str, Any]]:
    """Flat rows (benchmark runs first, by accuracy; then demo-sample runs)."""
    rows = []
    for result in find_results(folder):
        row = {
            "model": result["model"],
            "type": result.get("model_type", ""),
            "protocol": protocol_label(result),
            "data": "demo sample" if result.get("demo_sample") else f"{result.get('dataset')}@{result.get('dataset_version') or result.get('dataset_revision')}",
            "demo_sample": bool(result.get("demo_sample")),
            "accuracy": result["accuracy"],
            "ci95_low": result["ci95"][0],
            "ci95_high": result["ci95"][1],
            "macro_accuracy": result.get("macro_accuracy"),
            "num_pairs": result["num_pairs"],
            "date": result.get("created_at", "")[:10],
            "path": result["path"],
        }
        for subset in SUBSETS:
            figures = result.get("per_subset", {}).get(subset)
            row[SHORT[subset]] = figures["accuracy"] if figures else None
        rows.append(row)
    return sorted(rows, key=lambda r: (r["demo_sample"], -r["accuracy"]))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def print_leaderboard(rows: list[dict[str, Any]]) -> None:
    if not rows:
        print("no results found")
        return
    header = f"{'model':<40} {'type':<15} {'protocol':<18} {'Art':>6} {'Life':>6} {'Soc':>6} {'overall':>8} {'95% CI':>15} {'pairs':>6}  data"
    print(header)
    demo_started = False
    for row in rows:
        if row["demo_sample"] and not demo_started:
            print("-- demo-sample runs (not benchmark results) --")
            demo_started = True
        interval = f"[{_pct(row['ci95_low'])}, {_pct(row['ci95_high'])}]"
        print(
            f"{row['model'][-40:]:<40} {row['type']:<15} {row['protocol']:<18} {_pct(row['Art']):>6} {_pct(row['Lifestyle']):>6} "
            f"{_pct(row['Society']):>6} {_pct(row['accuracy']):>8} {interval:>15} {row['num_pairs']:>6}  {row['data']}"
        )


def write_chart(rows: list[dict[str, Any]], path: Path) -> Path:
    """Grouped bars: accuracy per subset for each run; returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{row['model'].split('/')[-1]}\n{row['protocol']}" + (" (demo)" if row["demo_sample"] else "") for row in rows]
    width = 0.8 / len(SUBSETS)
    figure, axis = plt.subplots(figsize=(max(6, 1.6 * len(rows)), 4.5))
    for position, subset in enumerate(SUBSETS):
        values = [100 * (row[SHORT[subset]] or 0) for row in rows]
        axis.bar([i + position * width for i in range(len(rows))], values, width, label=SHORT[subset])
    axis.axhline(50, color="grey", linestyle="--", linewidth=1, label="chance")
    axis.set_xticks([i + width for i in range(len(rows))], labels, fontsize=8)
    axis.set_ylabel("accuracy (%)")
    axis.set_ylim(0, 100)
    axis.set_title("Personalized RewardBench: accuracy per subset")
    axis.legend(fontsize=8, ncols=4)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
