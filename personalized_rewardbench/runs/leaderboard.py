"""Leaderboard over stored runs: one row per results.json, a printed table and a bar chart PNG.

Runs fall in three sections that are never ranked together:

- ``benchmark``: the benchmark data, every pair of every subset (no ``limit``) — the only ranked runs;
- ``partial``: the benchmark data, but a pair limit or only some subsets (e.g. every Space run);
- ``demo``: runs on the bundled demo sample (flagged ``demo_sample``), whatever their coverage.

Within a section, runs of different input protocols (``prbench``, ``upstream``: `scoring/protocols.py`)
form separate blocks, each ranked on its own; the protocol is a column of its own (``input_protocol``).

>>> coverage({"protocol": {"limit": 2, "subsets": ["Art_and_Entertainment"]}})
(False, 'Art, first 2 per subset')
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from personalized_rewardbench.data.schema import SUBSETS
from personalized_rewardbench.runs.results import find_results
from personalized_rewardbench.scoring.protocols import PROTOCOLS, protocol_name

SHORT = {
    "Art_and_Entertainment": "Art",
    "Lifestyle_and_Personal_Development": "Lifestyle",
    "Society_and_Culture": "Society",
}
SECTIONS = ("benchmark", "partial", "demo")
SECTION_TITLES = {
    "benchmark": "benchmark runs (every pair of every subset; ranked)",
    "partial": "partial runs (a pair limit or some subsets; not ranked with full runs)",
    "demo": "demo-sample runs (not benchmark results)",
}


def protocol_label(result: dict[str, Any]) -> str:
    protocol = result.get("protocol", {})
    k = protocol.get("profile_k", 0)
    label = ("upstream " if protocol_name(result) == "upstream" else "") + f"k={k}"
    label += f" {protocol.get('retriever')}" if k else ""
    if protocol_name(result) == "prbench" and protocol.get("template", "default") != "default":
        label += f" {protocol['template']}"
    if protocol.get("judge_mode"):
        label += f" {protocol['judge_mode']}"
    return label


def coverage(result: dict[str, Any]) -> tuple[bool, str]:
    """(whether the run scored every pair of every subset, a short description of what it scored)."""
    protocol = result.get("protocol", {})
    subsets = set(protocol.get("subsets") or result.get("per_subset") or ())
    limit = protocol.get("limit")
    parts = []
    if subsets != set(SUBSETS):
        parts.append("+".join(SHORT.get(name, name) for name in SUBSETS if name in subsets) or "no subset")
    if limit:
        parts.append(f"first {limit} per subset")
    return not parts, ", ".join(parts) or "full"


def section(result: dict[str, Any]) -> str:
    """ "demo" (demo sample), "benchmark" (full run on benchmark data) or "partial"."""
    if result.get("demo_sample"):
        return "demo"
    return "benchmark" if coverage(result)[0] else "partial"


def leaderboard_rows(folder: Path) -> list[dict[str, Any]]:
    """Flat rows: full benchmark runs by accuracy, then partial runs, then demo-sample runs (full ones first)."""
    rows = []
    for result in find_results(folder):
        full, covered = coverage(result)
        row = {
            "model": result["model"],
            "type": result.get("model_type", ""),
            "protocol": protocol_label(result),
            "input_protocol": protocol_name(result),
            "data": "demo sample"
            if result.get("demo_sample")
            else f"{result.get('dataset')}@{result.get('dataset_version') or result.get('dataset_revision')}",
            "demo_sample": bool(result.get("demo_sample")),
            "section": section(result),
            "full": full,
            "coverage": covered,
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
    return sorted(
        rows,
        key=lambda r: (SECTIONS.index(r["section"]), _protocol_order(r), not r["full"], -r["accuracy"]),
    )


def _protocol_order(row: dict[str, Any]) -> int:
    name = row.get("input_protocol", PROTOCOLS[0])
    return PROTOCOLS.index(name) if name in PROTOCOLS else len(PROTOCOLS)


def by_section(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The rows of each section, in leaderboard order (empty sections included)."""
    return {name: [row for row in rows if row["section"] == name] for name in SECTIONS}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def print_leaderboard(rows: list[dict[str, Any]]) -> None:
    if not rows:
        print("no results found")
        return
    header = (
        f"{'#':>3} {'model':<40} {'type':<15} {'inputs':<9} {'setting':<18} "
        f"{'Art':>6} {'Life':>6} {'Soc':>6} {'overall':>8} {'95% CI':>15} {'pairs':>6}  {'coverage':<24} data"
    )
    print(header)
    for name, section_rows in by_section(rows).items():
        if not section_rows:
            continue
        print(f"-- {SECTION_TITLES[name]} --")
        previous, several = None, len({row["input_protocol"] for row in section_rows}) > 1
        for row in section_rows:
            if row["input_protocol"] != previous:  # each protocol ranked on its own
                previous, rank = row["input_protocol"], 0
                if several:
                    print(f"   [{previous} protocol, ranked on its own]")
            rank += 1
            interval = f"[{_pct(row['ci95_low'])}, {_pct(row['ci95_high'])}]"
            place = str(rank) if name == "benchmark" else ""
            cells = [
                f"{place:>3} {row['model'][-40:]:<40} {row['type']:<15}",
                f"{row['input_protocol']:<9} {row['protocol']:<18}",
                " ".join(f"{_pct(row[key]):>6}" for key in ("Art", "Lifestyle", "Society")),
                f"{_pct(row['accuracy']):>8} {interval:>15} {row['num_pairs']:>6}  {row['coverage']:<24} {row['data']}",
            ]
            print(" ".join(cells))


def write_chart(rows: list[dict[str, Any]], path: Path) -> Path:
    """Grouped bars (accuracy per subset for each run), one panel per section; returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(name, section_rows) for name, section_rows in by_section(rows).items() if section_rows]
    widest = max(len(section_rows) for _, section_rows in panels)
    figure, axes = plt.subplots(len(panels), 1, figsize=(max(6, 1.6 * widest), 4.5 * len(panels)), squeeze=False)
    width = 0.8 / len(SUBSETS)
    for axis, (name, section_rows) in zip(axes[:, 0], panels):
        labels = [
            f"{row['model'].split('/')[-1]}\n{row['protocol']}" + ("" if row["full"] else f"\n{row['coverage']}")
            for row in section_rows
        ]
        for position, subset in enumerate(SUBSETS):
            values = [100 * (row[SHORT[subset]] or 0) for row in section_rows]
            axis.bar([i + position * width for i in range(len(section_rows))], values, width, label=SHORT[subset])
        axis.axhline(50, color="grey", linestyle="--", linewidth=1, label="chance")
        axis.set_xticks([i + width for i in range(len(section_rows))], labels, fontsize=8)
        axis.set_ylabel("accuracy (%)")
        axis.set_ylim(0, 100)
        axis.set_title(f"Personalized RewardBench: {SECTION_TITLES[name]}", fontsize=10)
        axis.legend(fontsize=8, ncols=4)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
