"""The Space's leaderboard: one table per section (benchmark, partial, demo sample) and a chart of one section.

Sections come from `leaderboard` (the same as `prbench leaderboard`): only full benchmark runs are
ranked, with shared ranks where McNemar's exact test cannot tell two runs apart (`significance`);
partial runs and demo-sample runs have their own tables, and the chart never mixes sections.
One search and the type/protocol filters apply to every table and to the chart.
Plain pandas DataFrames and a matplotlib Figure; nothing here imports gradio.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from personalized_rewardbench.runs.leaderboard import SHORT, by_section, leaderboard_rows, with_significance
from personalized_rewardbench.space.views import ALL, HUB_URL, OVERALL, interval, pct, plain, public_dataset

#: Every column a table can show, in order; the first three are always shown (and pinned on phones).
ALWAYS = ["rank", "model", OVERALL]
OPTIONAL = [
    "95% CI",
    "pairs",
    "coverage",
    "type",
    "protocol",
    *SHORT.values(),
    "macro",
    "k gain",
    "p (next)",
    "date",
    "data",
]
LEADERBOARD_COLUMNS = ALWAYS + OPTIONAL
DEFAULT_COLUMNS = ["95% CI", "pairs", "coverage", "type", "protocol", *SHORT.values(), "macro", "k gain", "date"]
#: column -> width on screen (the model name wraps; rank, model and overall stay pinned while the rest scrolls)
WIDTHS = {
    "rank": "52px",
    "model": "150px",
    OVERALL: "76px",
    "95% CI": "140px",
    "pairs": "64px",
    "coverage": "150px",
    "type": "110px",
    "protocol": "110px",
    **{short: "96px" for short in SHORT.values()},
    "macro": "72px",
    "k gain": "132px",
    "p (next)": "80px",
    "date": "104px",
    "data": "240px",
}
CHART_SUBSETS = [OVERALL, *SHORT.values()]
#: chart menu label -> leaderboard section
CHART_SECTIONS = {"benchmark runs": "benchmark", "partial runs": "partial", "demo-sample runs": "demo"}
SECTION_HEADINGS = {
    "benchmark": (
        "Benchmark runs",
        "every pair of every subset; ranked by overall accuracy. Runs share a rank when McNemar's exact test on "
        "their pairs finds no significant difference (p ≥ 0.05).",
    ),
    "partial": ("Partial runs", "a pair limit or only some subsets (every run started here): never ranked."),
    "demo": ("Demo-sample runs", "the bundled demo sample: not benchmark data, never ranked."),
}
EMPTY = {
    "benchmark": "No benchmark runs yet: a full run of `prbench evaluate` on the benchmark data appears here.",
    "partial": "No partial runs yet: start one in the Evaluate tab.",
    "demo": "No demo-sample runs yet: start one in the Evaluate tab.",
}


_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")


def model_cell(model_id: str) -> str:
    """A model as the tables show it: a Hub id's name linked to its Hub page, local folders by name only."""
    if model_id.startswith("baseline:"):
        return model_id
    if Path(model_id).is_absolute():
        return f"local: {Path(model_id).name}"  # set by the operator (PRBENCH_EXTRA_MODELS)
    if not _HUB_ID.fullmatch(model_id):  # e.g. a results.json from elsewhere: shown as the text it is
        return plain(model_id)
    return f"[{model_name(model_id)}]({HUB_URL}/{model_id})"


def model_name(model_id: str) -> str:
    """A model's short plain name (charts, menus): a Hub id's last part, a local folder's name."""
    return model_id if model_id.startswith("baseline:") else model_id.rstrip("/").split("/")[-1]


def _matches(row: dict[str, Any], type_filter: str, protocol_filter: str, search: str) -> bool:
    if type_filter not in (ALL, "", None, row["type"]) or protocol_filter not in (ALL, "", None, row["protocol"]):
        return False
    text = " ".join(str(row[key]) for key in ("model", "type", "protocol", "coverage", "data")).lower()
    text += " " + model_cell(row["model"]).lower()
    return all(word in text for word in (search or "").lower().split())


def filtered_sections(
    folder: Path,
    type_filter: str = ALL,
    protocol_filter: str = ALL,
    search: str = "",
    notices: list[str] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The rows of each section (ranks and profile gains computed over the unfiltered board), then filtered.

    A stored results.json that cannot be read is left out; its reason (naming the file) goes to `notices`."""
    rows = with_significance(leaderboard_rows(folder, notices))
    return {
        name: [row for row in section_rows if _matches(row, type_filter, protocol_filter, search)]
        for name, section_rows in by_section(rows).items()
    }


def _data_label(row: dict[str, Any]) -> str:
    if row["demo_sample"]:
        return row["data"]
    dataset, _, version = row["data"].rpartition("@")
    return f"{public_dataset(dataset)}@{version}"


def _p(value: float | None) -> str:
    return "" if value is None else ("< 0.001" if value < 0.001 else f"{value:.3f}")


def _gain(row: dict[str, Any]) -> str:
    if row.get("profile_gain") is None:
        return ""
    text = f"{100 * row['profile_gain']:+.2f}"
    return text + (f" (p {_p(row['profile_gain_p'])})" if row.get("profile_gain_p") is not None else "")


def _rank(row: dict[str, Any], previous: dict[str, Any] | None) -> str:
    if row.get("rank") is None:
        return ""
    shared = previous is not None and previous.get("rank") == row["rank"]
    return f"{row['rank']}=" if shared or row.get("tied_with_next") else str(row["rank"])


def section_frame(rows: list[dict[str, Any]], columns: list[str] | None = None) -> pd.DataFrame:
    """One section's table with the always-shown columns and the chosen optional ones (in the fixed order)."""
    chosen = [name for name in OPTIONAL if name in (DEFAULT_COLUMNS if columns is None else columns)]
    records = []
    for index, row in enumerate(rows):
        record = {
            "rank": _rank(row, rows[index - 1] if index else None),
            "model": model_cell(row["model"]),
            OVERALL: pct(row["accuracy"]),
            "95% CI": interval(row["ci95_low"], row["ci95_high"]),
            "type": row["type"],
            "protocol": row["protocol"],
            **{short: pct(row[short]) for short in SHORT.values()},
            "macro": pct(row["macro_accuracy"]),
            "pairs": row["num_pairs"],
            "coverage": row["coverage"],
            "k gain": _gain(row),
            "p (next)": _p(row.get("p_next")),
            "date": row["date"],
            "data": _data_label(row),
        }
        records.append(record)
    return pd.DataFrame(records, columns=ALWAYS + chosen)


def skipped_runs_note(count: int) -> str:
    """The visitor's line about results files left off the board (the reasons name server files: logged only).

    >>> skipped_runs_note(2).split(";")[0]
    '_2 stored results files are left off the leaderboard (unreadable, or not results of this benchmark)'
    """
    files = "1 stored results file is" if count == 1 else f"{count} stored results files are"
    return (
        f"_{files} left off the leaderboard (unreadable, or not results of this benchmark); "
        "the reason was logged for the Space's maintainers._"
    )


def section_heading(name: str, rows: list[dict[str, Any]], filtered: bool) -> str:
    """The section's title with its run count, what it holds, and a plain line when it is empty."""
    title, about = SECTION_HEADINGS[name]
    text = f"### {title} ({len(rows)})\n{about}"
    if not rows:
        text += "\n\n_" + ("No run matches the search and filters." if filtered else EMPTY[name]) + "_"
    return text


def leaderboard_tables(
    folder: Path, type_filter: str = ALL, protocol_filter: str = ALL, search: str = "", columns: list[str] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(full benchmark runs ranked by accuracy, partial runs, demo-sample runs): never mixed in one table."""
    sections = filtered_sections(folder, type_filter, protocol_filter, search)
    return tuple(section_frame(sections[name], columns) for name in ("benchmark", "partial", "demo"))


def filter_choices(folder: Path) -> tuple[list[str], list[str]]:
    """Filter menu entries: model types and protocols present in the stored runs."""
    rows = leaderboard_rows(folder)
    return [ALL, *sorted({r["type"] for r in rows})], [ALL, *sorted({r["protocol"] for r in rows})]


def chart_sections(show_demo: bool) -> list[str]:
    """The chart menu: demo-sample runs only while they are shown."""
    return [label for label, name in CHART_SECTIONS.items() if show_demo or name != "demo"]


def default_chart_section(folder: Path, demo_data: bool) -> str:
    """The chart menu's first choice: the first section with runs (demo-sample runs first on demo data)."""
    sections = by_section(leaderboard_rows(folder))
    order = ["demo", "benchmark", "partial"] if demo_data else ["benchmark", "partial", "demo"]
    chosen = next((name for name in order if sections[name]), order[0])
    return next(label for label, name in CHART_SECTIONS.items() if name == chosen)


def chart_rows(
    folder: Path,
    subset: str = OVERALL,
    type_filter: str = ALL,
    protocol_filter: str = ALL,
    chart_section: str = "benchmark runs",
    search: str = "",
    show_demo: bool = True,
) -> pd.DataFrame:
    """One bar per run of one section for `subset`: label, accuracy and 95 % interval in %, type, pairs."""
    name = CHART_SECTIONS.get(chart_section, chart_section)
    columns = ["run", "accuracy (%)", "low (%)", "high (%)", "type", "pairs"]
    if name == "demo" and not show_demo:
        return pd.DataFrame([], columns=columns)
    rows = filtered_sections(folder, type_filter, protocol_filter, search).get(name, [])
    records, seen = [], {}
    for row in rows:
        if subset == OVERALL:
            accuracy, low, high, pairs = row["accuracy"], row["ci95_low"], row["ci95_high"], row["num_pairs"]
        else:
            figures = row.get("subset_figures", {}).get(subset)
            if not figures:
                continue
            accuracy, pairs = figures["accuracy"], figures.get("num_pairs")
            low, high = figures.get("ci95") or (accuracy, accuracy)
        label = f"{model_name(row['model'])} | {row['protocol']}"
        if not row["full"]:
            label += f" | {row['coverage']}"
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label += f" #{seen[label]}"
        records.append(
            {
                "run": label,
                "accuracy (%)": pct(accuracy),
                "low (%)": pct(low),
                "high (%)": pct(high),
                "type": row["type"],
                "pairs": pairs,
            }
        )
    frame = pd.DataFrame(records, columns=columns)
    return frame.sort_values("accuracy (%)", ascending=False, kind="stable").reset_index(drop=True)


def chart_figure(frame: pd.DataFrame, title: str):
    """Horizontal bars (best on top) with 95 % interval error bars and the 50 % chance line; a matplotlib Figure."""
    from matplotlib.figure import Figure

    # narrow with large type: the image is scaled to the column, about 360 px on a phone
    height = 1.4 + 0.5 * max(1, len(frame))
    figure = Figure(figsize=(6.0, height), layout="constrained")
    axis = figure.add_subplot()
    if frame.empty:
        axis.text(0.5, 0.5, "no runs to chart: check the section, the search and the filters", ha="center", va="center")
        axis.set_axis_off()
        return figure
    frame = frame.iloc[::-1]  # barh draws bottom-up
    palette = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2"]
    types = sorted(set(frame["type"]))
    colours = [palette[types.index(kind) % len(palette)] for kind in frame["type"]]
    accuracy = frame["accuracy (%)"].to_numpy(dtype=float)
    errors = [accuracy - frame["low (%)"].to_numpy(dtype=float), frame["high (%)"].to_numpy(dtype=float) - accuracy]
    positions = range(len(frame))
    axis.barh(positions, accuracy, xerr=errors, color=colours, capsize=3, error_kw={"elinewidth": 1})
    labels = [f"{run}  (n={pairs})" for run, pairs in zip(frame["run"], frame["pairs"])]
    axis.set_yticks(list(positions), labels, fontsize=10)
    axis.axvline(50, color="grey", linestyle="--", linewidth=1)
    axis.set_xlim(0, 100)
    axis.set_xlabel("accuracy (%); bars: 95 % Wilson interval; dashed: chance", fontsize=9)
    axis.set_title(title, fontsize=11)
    for kind in types:
        axis.bar(0, 0, color=palette[types.index(kind) % len(palette)], label=kind)
    axis.legend(fontsize=9, loc="lower right")
    return figure
