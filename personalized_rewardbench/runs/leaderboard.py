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
from personalized_rewardbench.runs.significance import profile_gain, rank_with_ties, run_outcomes
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


def leaderboard_rows(folder: Path, notices: list[str] | None = None) -> list[dict[str, Any]]:
    """Flat rows: full benchmark runs by accuracy, then partial runs, then demo-sample runs (full ones first).

    A damaged results.json is left out; its one-line reason (naming the file) is appended to `notices`."""
    rows = []
    for result in find_results(folder, notices):
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
            "profile_k": result.get("protocol", {}).get("profile_k", 0),
            "twin_key": _twin_key(result),
        }
        for subset in SUBSETS:
            figures = result.get("per_subset", {}).get(subset)
            row[SHORT[subset]] = figures["accuracy"] if figures else None
        row["subset_figures"] = {SHORT[name]: f for name, f in result.get("per_subset", {}).items() if name in SHORT}
        rows.append(row)
    return sorted(
        rows,
        key=lambda r: (SECTIONS.index(r["section"]), _protocol_order(r), not r["full"], -r["accuracy"]),
    )


def _protocol_order(row: dict[str, Any]) -> int:
    name = row.get("input_protocol", PROTOCOLS[0])
    return PROTOCOLS.index(name) if name in PROTOCOLS else len(PROTOCOLS)


def _twin_key(result: dict[str, Any]) -> str:
    """What a run at profile-k > 0 shares with its k = 0 twin: model, revision, type, protocol, data and pairs."""
    protocol = {
        key: value for key, value in result.get("protocol", {}).items() if key not in ("profile_k", "retriever")
    }
    fields = [result.get(key) for key in ("model", "model_revision", "model_type", "dataset", "dataset_revision")]
    return repr([fields, sorted(protocol.items(), key=lambda item: item[0])])


def with_significance(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` with `rank`, `p_next`, `tied_with_next` (benchmark runs only; None elsewhere) and `profile_gain`.

    Ranks share a place where McNemar's test finds no significant difference (see `significance`)."""
    outcome_cache: dict[str, Any] = {}

    def outcomes(row: dict[str, Any]):
        if row["path"] not in outcome_cache:
            outcome_cache[row["path"]] = run_outcomes(row["path"])
        return outcome_cache[row["path"]]

    benchmark = by_section(rows)["benchmark"]
    ranked = {}
    for name in dict.fromkeys(row["input_protocol"] for row in benchmark):  # each protocol ranked on its own
        group = [row for row in benchmark if row["input_protocol"] == name]
        ranked.update({id(row): extra for row, extra in zip(group, rank_with_ties(group, outcomes))})
    out = []
    for row in rows:
        extra = ranked.get(id(row))
        row = dict(extra) if extra else {**row, "rank": None, "p_next": None, "tied_with_next": False}
        gain = profile_gain(row, rows, outcomes)
        row["profile_gain"] = gain[0] if gain else None
        row["profile_gain_p"] = gain[1].p_value if gain and gain[1] is not None else None
        out.append(row)
    return out


def by_section(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The rows of each section, in leaderboard order (empty sections included)."""
    return {name: [row for row in rows if row["section"] == name] for name in SECTIONS}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _p(value: float | None) -> str:
    return "-" if value is None else ("<0.001" if value < 0.001 else f"{value:.3f}")


def _gain(row: dict[str, Any]) -> str:
    if row.get("profile_gain") is None:
        return "-"
    return f"{100 * row['profile_gain']:+.2f}" + (
        f" p={_p(row['profile_gain_p'])}" if row.get("profile_gain_p") else ""
    )


def print_leaderboard(rows: list[dict[str, Any]]) -> None:
    """The table by section; benchmark ranks are shared where McNemar's test (p >= 0.05) cannot tell runs apart."""
    if not rows:
        print("no results found")
        return
    rows = with_significance(rows)
    header = (
        f"{'#':>3} {'model':<40} {'type':<15} {'inputs':<9} {'setting':<18} {'Art':>6} {'Life':>6} {'Soc':>6} "
        f"{'overall':>8} {'95% CI':>15} {'pairs':>6} {'p(next)':>7} {'k gain':>14}  {'coverage':<24} data"
    )
    print(header)
    for name, section_rows in by_section(rows).items():
        if not section_rows:
            continue
        print(f"-- {SECTION_TITLES[name]} --")
        previous, several = None, len({row["input_protocol"] for row in section_rows}) > 1
        for row in section_rows:
            if several and row["input_protocol"] != previous:  # each protocol ranked on its own
                previous = row["input_protocol"]
                print(f"   [{previous} protocol, ranked on its own]")
            interval = f"[{_pct(row['ci95_low'])}, {_pct(row['ci95_high'])}]"
            place = "" if row["rank"] is None else str(row["rank"])
            cells = [
                f"{place:>3} {row['model'][-40:]:<40} {row['type']:<15}",
                f"{row['input_protocol']:<9} {row['protocol']:<18}",
                " ".join(f"{_pct(row[key]):>6}" for key in ("Art", "Lifestyle", "Society")),
                f"{_pct(row['accuracy']):>8} {interval:>15} {row['num_pairs']:>6} {_p(row['p_next']):>7}",
                f"{_gain(row):>14}  {row['coverage']:<24} {row['data']}",
            ]
            print(" ".join(cells))
    if any(row["rank"] is not None for row in rows):
        print(
            "Ranks are shared where McNemar's exact test on the pairs two runs both scored finds no significant "
            "difference (p >= 0.05); p(next): against the run below. k gain: accuracy minus the same model's k=0 run."
        )


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
