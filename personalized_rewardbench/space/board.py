"""The Space's leaderboard: one table per section (benchmark, partial, demo sample) and a bar chart of one section.

Sections come from `leaderboard` (the same as `prbench leaderboard`): only full benchmark runs are
ranked; partial runs and demo-sample runs have their own tables, and the chart never mixes sections.
Plain pandas DataFrames; nothing here imports gradio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from personalized_rewardbench.runs.leaderboard import SHORT, by_section, leaderboard_rows
from personalized_rewardbench.space.views import ALL, OVERALL, interval, pct, public_dataset

LEADERBOARD_COLUMNS = [
    "model",
    "type",
    "protocol",
    *SHORT.values(),
    OVERALL,
    "95% CI",
    "macro",
    "pairs",
    "date",
    "coverage",
    "data",
]
CHART_SUBSETS = [OVERALL, *SHORT.values()]
#: chart menu label -> leaderboard section
CHART_SECTIONS = {"benchmark runs": "benchmark", "partial runs": "partial", "demo-sample runs": "demo"}
CHART_COLUMNS = ["run", "accuracy (%)", "type"]


def _filtered(folder: Path, type_filter: str, protocol_filter: str) -> list[dict[str, Any]]:
    return [
        row
        for row in leaderboard_rows(folder)
        if type_filter in (ALL, "", None, row["type"]) and protocol_filter in (ALL, "", None, row["protocol"])
    ]


def _data_label(row: dict[str, Any]) -> str:
    if row["demo_sample"]:
        return row["data"]
    dataset, _, version = row["data"].rpartition("@")
    return f"{public_dataset(dataset)}@{version}"


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    records = [
        {
            "model": row["model"],
            "type": row["type"],
            "protocol": row["protocol"],
            **{short: pct(row[short]) for short in SHORT.values()},
            OVERALL: pct(row["accuracy"]),
            "95% CI": interval(row["ci95_low"], row["ci95_high"]),
            "macro": pct(row["macro_accuracy"]),
            "pairs": row["num_pairs"],
            "date": row["date"],
            "coverage": row["coverage"],
            "data": _data_label(row),
        }
        for row in rows
    ]
    return pd.DataFrame(records, columns=LEADERBOARD_COLUMNS)


def leaderboard_tables(
    folder: Path, type_filter: str = ALL, protocol_filter: str = ALL
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(full benchmark runs ranked by accuracy, partial runs, demo-sample runs): never mixed in one table."""
    sections = by_section(_filtered(folder, type_filter, protocol_filter))
    return _frame(sections["benchmark"]), _frame(sections["partial"]), _frame(sections["demo"])


def filter_choices(folder: Path) -> tuple[list[str], list[str]]:
    """Filter menu entries: model types and protocols present in the stored runs."""
    rows = leaderboard_rows(folder)
    return [ALL, *sorted({r["type"] for r in rows})], [ALL, *sorted({r["protocol"] for r in rows})]


def default_chart_section(folder: Path, demo_data: bool) -> str:
    """The chart menu's first choice: the first section with runs (demo-sample runs first on demo data)."""
    sections = by_section(leaderboard_rows(folder))
    order = ["demo", "benchmark", "partial"] if demo_data else ["benchmark", "partial", "demo"]
    chosen = next((name for name in order if sections[name]), order[0])
    return next(label for label, name in CHART_SECTIONS.items() if name == chosen)


def chart_frame(
    folder: Path,
    subset: str = OVERALL,
    type_filter: str = ALL,
    protocol_filter: str = ALL,
    chart_section: str = "benchmark runs",
) -> pd.DataFrame:
    """One bar per run of one section for `subset` (overall, Art, Lifestyle or Society), coloured by model type."""
    name = CHART_SECTIONS.get(chart_section, chart_section)
    rows = by_section(_filtered(folder, type_filter, protocol_filter)).get(name, [])
    key = "accuracy" if subset == OVERALL else subset
    records, seen = [], {}
    for row in rows:
        if row.get(key) is None:
            continue
        label = f"{row['model'].rstrip('/').split('/')[-1]} | {row['protocol']}"
        if not row["full"]:
            label += f" | {row['coverage']}"
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label += f" #{seen[label]}"
        records.append({"run": label, "accuracy (%)": pct(row[key]), "type": row["type"]})
    return pd.DataFrame(records, columns=CHART_COLUMNS)
