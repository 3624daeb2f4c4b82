"""The Space's Explore tab: the pair menu, what a model sees, the answer key, and stored runs' scores of a pair.

The narrative and rubric aspects are the answer key: shown to the human visitor, never part of a
model input. Stored scores come from every run on the same data revision; a pairwise judge's row
shows its verdict in each answer order instead of two scores.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.data.sources import Source
from personalized_rewardbench.runs.leaderboard import protocol_label
from personalized_rewardbench.runs.results import SCORES_FILE, find_results
from personalized_rewardbench.scoring.prompts import format_posts
from personalized_rewardbench.space.views import ORDERS, is_pairwise, orders_right, verdict_text

STORED_COLUMNS = [
    "model",
    "type",
    "protocol",
    "chosen score",
    "rejected score",
    "margin",
    *(title for _, title in ORDERS),
    "correct",
]


def _cut(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pair_choices(source: Source, subset: str) -> list[tuple[str, str]]:
    """(label, id) per pair of `subset`, for a menu."""
    return [(f"{row['id']}: {_cut(row['question'])}", row["id"]) for row in source.rows.get(subset, [])]


def answer_key_markdown(row: dict[str, Any]) -> str:
    """The narrative and rubric aspects: shown to the human visitor, never part of a model input."""
    aspects = "\n".join(
        f"- **{a['aspect'].rstrip('.')}**: {a['reason']} _(evidence: {a['evidence']})_" for a in row["rubric_aspects"]
    )
    return f"**Narrative.** {row['narrative']}\n\n**Rubric aspects**\n\n{aspects}"


def model_input_markdown(item: EvalItem) -> str:
    """What a model sees besides the answer: the question and the top-k posts."""
    posts = format_posts(item.posts) if item.posts else "_no profile posts (profile-k = 0)_"
    return (
        f"**Question**\n\n{item.question}\n\n**Top-{len(item.posts)} profile posts** (most relevant first)\n\n{posts}"
    )


@lru_cache(maxsize=256)
def _scores_by_id(path: str, mtime: float) -> dict[str, dict[str, Any]]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return {record["id"]: record for record in map(json.loads, filter(str.strip, lines))}


def _stored_row(results: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    row = {"model": results["model"], "type": results.get("model_type", ""), "protocol": protocol_label(results)}
    if is_pairwise(record):
        return {
            **row,
            "chosen score": None,
            "rejected score": None,
            "margin": None,
            **{title: verdict_text(record, order) for order, title in ORDERS},
            "correct": f"{orders_right(record)} of 2 orders",
        }
    margin = record["chosen_score"] - record["rejected_score"]
    return {
        **row,
        "chosen score": round(record["chosen_score"], 4),
        "rejected score": round(record["rejected_score"], 4),
        "margin": round(margin, 4),
        **{title: "" for _, title in ORDERS},
        "correct": "yes" if margin > 0 else "no",
    }


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
        if record is not None:
            rows.append(_stored_row(results, record))
    return pd.DataFrame(rows, columns=STORED_COLUMNS)
