"""The Space's Explore tab: the pair menu, what a model sees, the answer key, and stored runs' scores of a pair.

What a model sees is built by the library's own prompt builders (`scoring.prompts` for reward models,
`scoring.judge_prompts` for judges), never re-rendered here, and shown as plain text. The narrative and
rubric aspects are the answer key: shown to the human visitor, never part of a model input; dataset
text inside Markdown is escaped, so a row's HTML or Markdown is shown as the characters it is.
Stored scores come from every run on the same data revision; a pairwise judge's row shows its verdict
in each answer order instead of two scores.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.data.sources import Source
from personalized_rewardbench.runs.leaderboard import coverage, protocol_label
from personalized_rewardbench.runs.results import SCORES_FILE, find_results
from personalized_rewardbench.scoring.judge_prompts import pairwise_chat, score_chat
from personalized_rewardbench.scoring.prompts import reward_chat
from personalized_rewardbench.space.board import model_name
from personalized_rewardbench.space.views import ORDERS, is_pairwise, orders_right, plain, verdict_text

STORED_COLUMNS = [
    "model",
    "protocol",
    "run",
    "correct",
    "margin",
    "chosen score",
    "rejected score",
    *(title for _, title in ORDERS),
    "type",
]
STORED_NOTE = (
    "Scores are on each model's own scale (a reward model's logit, a length, a cosine, a 0–10 rating): "
    "compare chosen with rejected within a row, not across rows."
)
#: menu label -> what the prompt builders make of the pair
PROMPT_KINDS = (
    "reward model (default template)",
    "reward model (upstream template)",
    "pairwise judge",
    "rating judge",
)


def _cut(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pair_choices(source: Source, subset: str) -> list[tuple[str, str]]:
    """(label, id) per pair of `subset`, for a menu."""
    return [(f"{row['id']}: {_cut(row['question'])}", row["id"]) for row in source.rows.get(subset, [])]


def answer_key_markdown(row: dict[str, Any]) -> str:
    """The narrative and rubric aspects: shown to the human visitor, never part of a model input."""
    aspects = "\n".join(
        f"- **{plain(a['aspect'].rstrip('.'))}**: {plain(a['reason'])} _(evidence: {plain(a['evidence'])})_"
        for a in row["rubric_aspects"]
    )
    return f"**Narrative.** {plain(row['narrative'])}\n\n**Rubric aspects**\n\n{aspects}"


def _chat_text(chat: list[dict[str, str]]) -> str:
    return "\n\n".join(f"── {message['role']} ──\n{message['content']}" for message in chat)


def model_input_text(item: EvalItem, kind: str = PROMPT_KINDS[0]) -> str:
    """The chat a model of `kind` reads for this pair, as plain text, built by the library's prompt builders."""
    posts = f"top {len(item.posts)} profile posts" if item.posts else "no profile posts (profile-k = 0)"
    if kind == "pairwise judge":
        head = f"A pairwise judge's chat ({posts}), chosen shown as answer A; the second order swaps A and B."
        return f"{head}\n\n{_chat_text(pairwise_chat(item, chosen_first=True))}"
    if kind == "rating judge":
        head = f"A rating judge's chat ({posts}) for the chosen answer; the rejected answer gets the same chat."
        return f"{head}\n\n{_chat_text(score_chat(item, item.chosen))}"
    template = "upstream" if "upstream" in kind else "default"
    chat = reward_chat(item, "<the answer: chosen or rejected, below>", template)
    head = f"A reward model's chat ({template} template, {posts}); it scores each answer in the assistant turn."
    return f"{head}\n\n{_chat_text(chat)}"


@lru_cache(maxsize=256)
def _scores_by_id(path: str, mtime: float) -> dict[str, dict[str, Any]]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return {record["id"]: record for record in map(json.loads, filter(str.strip, lines))}


def _stored_row(results: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    run = f"{coverage(results)[1]}, {results.get('created_at', '')[:16].replace('T', ' ')}"
    row = {
        "model": model_name(results["model"]),
        "type": results.get("model_type", ""),
        "protocol": protocol_label(results),
        "run": run,
    }
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
