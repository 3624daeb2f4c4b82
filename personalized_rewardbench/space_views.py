"""Tables and texts the Space shows, built from stored results, scored records and benchmark rows.

Plain pandas DataFrames and Markdown strings; nothing here imports gradio, so each view is testable alone.
Percentages are numbers (sortable in the UI) rounded to two decimals.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from personalized_rewardbench.eval_items import EvalItem
from personalized_rewardbench.leaderboard import SHORT, leaderboard_rows, protocol_label
from personalized_rewardbench.prompts import format_posts
from personalized_rewardbench.results import SCORES_FILE, find_results
from personalized_rewardbench.schema import SUBSETS
from personalized_rewardbench.sources import Source

ALL = "all"
OVERALL = "overall"
LEADERBOARD_COLUMNS = ["model", "type", "protocol", *SHORT.values(), OVERALL, "95% CI", "macro", "pairs", "date", "data"]
CHART_SUBSETS = [OVERALL, *SHORT.values()]
DEMO_NOTE = "demo sample (written for this package): not benchmark data, not benchmark results"


def _pct(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 2)


def _interval(low: float, high: float) -> str:
    return f"[{100 * low:.2f}, {100 * high:.2f}]"


# -- leaderboard ----------------------------------------------------------------------------------
def _filtered(folder: Path, type_filter: str, protocol_filter: str) -> list[dict[str, Any]]:
    rows = leaderboard_rows(folder)
    return [
        row
        for row in rows
        if type_filter in (ALL, "", None, row["type"]) and protocol_filter in (ALL, "", None, row["protocol"])
    ]


def _leaderboard_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    records = [
        {
            "model": row["model"],
            "type": row["type"],
            "protocol": row["protocol"],
            **{short: _pct(row[short]) for short in SHORT.values()},
            OVERALL: _pct(row["accuracy"]),
            "95% CI": _interval(row["ci95_low"], row["ci95_high"]),
            "macro": _pct(row["macro_accuracy"]),
            "pairs": row["num_pairs"],
            "date": row["date"],
            "data": row["data"],
        }
        for row in rows
    ]
    return pd.DataFrame(records, columns=LEADERBOARD_COLUMNS)


def leaderboard_tables(folder: Path, type_filter: str = ALL, protocol_filter: str = ALL) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(benchmark runs ranked by accuracy, demo-sample runs): never mixed in one table."""
    rows = _filtered(folder, type_filter, protocol_filter)
    return _leaderboard_frame([r for r in rows if not r["demo_sample"]]), _leaderboard_frame([r for r in rows if r["demo_sample"]])


def filter_choices(folder: Path) -> tuple[list[str], list[str]]:
    """Filter menu entries: model types and protocols present in the stored runs."""
    rows = leaderboard_rows(folder)
    return [ALL, *sorted({r["type"] for r in rows})], [ALL, *sorted({r["protocol"] for r in rows})]


def chart_frame(folder: Path, subset: str = OVERALL, type_filter: str = ALL, protocol_filter: str = ALL, include_demo: bool = False) -> pd.DataFrame:
    """One bar per run for `subset` (overall, Art, Lifestyle or Society); demo runs only when asked, marked."""
    rows = [r for r in _filtered(folder, type_filter, protocol_filter) if include_demo or not r["demo_sample"]]
    key = "accuracy" if subset == OVERALL else subset
    records, seen = [], {}
    for row in rows:
        if row.get(key) is None:
            continue
        label = f"{row['model'].rstrip('/').split('/')[-1]} | {row['protocol']}"
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label += f" #{seen[label]}"
        records.append({"run": label, "accuracy (%)": _pct(row[key]), "data": "demo sample" if row["demo_sample"] else "benchmark"})
    return pd.DataFrame(records, columns=["run", "accuracy (%)", "data"])


# -- one run --------------------------------------------------------------------------------------
def summary_markdown(results: dict[str, Any], reused: bool, notices: list[str]) -> str:
    low, high = results["ci95"]
    lines = [
        f"### {results['model']} ({results['model_type']}): **{100 * results['accuracy']:.2f} %** accuracy",
        f"95 % interval [{100 * low:.2f}, {100 * high:.2f}] over {results['num_pairs']} pairs "
        f"(ties: {results['ties']}); protocol {protocol_label(results)}; data {results['dataset']}.",
    ]
    if "consistent_accuracy" in results:
        lines.append(
            f"Judge: right in both answer orders on {100 * results['consistent_accuracy']:.2f} % of pairs; "
            f"position bias {100 * results['position_bias']:+.2f} points; no verdict: {results['no_verdict']}."
        )
    if reused:
        lines.append("An identical finished run was found in the store: these are its stored results (nothing was recomputed).")
    if results.get("demo_sample"):
        lines.append(f"Note: {DEMO_NOTE}.")
    if results.get("truncated_pairs"):
        lines.append(f"Truncated pairs (lowest-ranked posts dropped to fit): {results['truncated_pairs']}.")
    lines += [f"Note: {notice}" for notice in notices]
    return "\n\n".join(lines)


def subset_frame(results: dict[str, Any]) -> pd.DataFrame:
    """Per-subset accuracy with its interval, then the overall (micro) and macro rows."""
    rows = [
        {"subset": name, "pairs": f["num_pairs"], "ties": f["ties"], "accuracy (%)": _pct(f["accuracy"]), "95% CI": _interval(*f["ci95"])}
        for name, f in results["per_subset"].items()
    ]
    rows.append({"subset": "overall (micro)", "pairs": results["num_pairs"], "ties": results["ties"], "accuracy (%)": _pct(results["accuracy"]), "95% CI": _interval(*results["ci95"])})
    rows.append({"subset": "macro (mean over subsets)", "pairs": results["num_pairs"], "ties": results["ties"], "accuracy (%)": _pct(results["macro_accuracy"]), "95% CI": ""})
    return pd.DataFrame(rows, columns=["subset", "pairs", "ties", "accuracy (%)", "95% CI"])


def margin_frame(records: list[dict[str, Any]], bins: int = 20) -> tuple[pd.DataFrame, float]:
    """One row per pair (margin = chosen - rejected, pairs = 1) and a bin width for the histogram."""
    margins = [float(r["chosen_score"]) - float(r["rejected_score"]) for r in records]
    spread = (max(margins) - min(margins)) if margins else 0.0
    width = spread / bins if spread > 0 else 1.0
    width = float(f"{width:.2g}")  # a readable bin width
    return pd.DataFrame({"margin": margins, "pairs": [1] * len(margins)}), width


def _cut(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def worst_pairs_frame(records: list[dict[str, Any]], items: list[EvalItem], count: int = 10) -> pd.DataFrame:
    """The pairs the model got wrong, most wrong (lowest margin) first."""
    by_id = {item.id: item for item in items}
    wrong = sorted((r for r in records if r["chosen_score"] <= r["rejected_score"]), key=lambda r: r["chosen_score"] - r["rejected_score"])
    rows = []
    for record in wrong[:count]:
        item = by_id.get(record["id"])
        rows.append(
            {
                "id": record["id"],
                "subset": SHORT.get(record["subset"], record["subset"]),
                "margin": round(record["chosen_score"] - record["rejected_score"], 4),
                "question": _cut(item.question) if item else "",
                "chosen": _cut(item.chosen) if item else "",
                "rejected": _cut(item.rejected) if item else "",
            }
        )
    return pd.DataFrame(rows, columns=["id", "subset", "margin", "question", "chosen", "rejected"])


def try_markdown(result: dict[str, Any]) -> str:
    """Both scores of a try-your-own pair and the model's preference."""
    preferred = "neither (a tie)" if result["preferred"] == "tie" else f"answer **{result['preferred']}**"
    lines = [
        f"### {result['model']} prefers {preferred}",
        f"Answer A: {result['score_a']:.4f}  \nAnswer B: {result['score_b']:.4f}",
    ]
    if result.get("truncated"):
        lines.append("The input was too long for the model: the last profile posts were left out.")
    return "\n\n".join(lines)


# -- explore --------------------------------------------------------------------------------------
def pair_choices(source: Source, subset: str) -> list[tuple[str, str]]:
    """(label, id) per pair of `subset`, for a menu."""
    return [(f"{row['id']}: {_cut(row['question'], 90)}", row["id"]) for row in source.rows.get(subset, [])]


def find_row(source: Source, pair_id: str) -> tuple[str, dict[str, Any]] | None:
    for subset in SUBSETS:
        for row in source.rows.get(subset, []):
            if row["id"] == pair_id:
                return subset, row
    return None


def answer_key_markdown(row: dict[str, Any]) -> str:
    """The narrative and rubric aspects: shown to the human visitor, never part of a model input."""
    aspects = "\n".join(f"- **{a['aspect'].rstrip('.')}**: {a['reason']} _(evidence: {a['evidence']})_" for a in row["rubric_aspects"])
    return f"**Narrative.** {row['narrative']}\n\n**Rubric aspects**\n\n{aspects}"


@lru_cache(maxsize=256)
def _scores_by_id(path: str, mtime: float) -> dict[str, dict[str, Any]]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return {record["id"]: record for record in map(json.loads, filter(str.strip, lines))}


def stored_scores_frame(folder: Path, source: Source, pair_id: str) -> pd.DataFrame:
    """Scores of this pair in every stored run on the same data (same revision)."""
    rows = []
    for results in find_results(folder):
        if results.get("dataset_revision") != source.revision:
            continue
        scores = Path(results["path"]).parent / SCORES_FILE
        if not scores.is_file():
            continue
        record = _scores_by_id(str(scores), scores.stat().st_mtime).get(pair_id)
        if record is None:
            continue
        margin = record["chosen_score"] - record["rejected_score"]
        rows.append(
            {
                "model": results["model"],
                "type": results.get("model_type", ""),
                "protocol": protocol_label(results),
                "chosen score": round(record["chosen_score"], 4),
                "rejected score": round(record["rejected_score"], 4),
                "correct": "yes" if margin > 0 else "no",
            }
        )
    return pd.DataFrame(rows, columns=["model", "type", "protocol", "chosen score", "rejected score", "correct"])


def model_input_markdown(item: EvalItem) -> str:
    """What a model sees besides the answer: the question and the top-k posts."""
    posts = format_posts(item.posts) if item.posts else "_no profile posts (profile-k = 0)_"
    return f"**Question**\n\n{item.question}\n\n**Top-{len(item.posts)} profile posts** (most relevant first)\n\n{posts}"

