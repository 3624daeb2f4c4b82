"""LaMP-QA-style input made from the sample (answers stripped), and canned backends for `prbench construct`.

The canned generator and judge have the `downstream.generation.Generator` interface; they answer from
scripts the tests write, so every verification rule can be driven on purpose. They stand in for a
model's text only: the pipeline, prompts, parser, rules and output around them are the real ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from personalized_rewardbench.data.schema import ANSWER_FIELDS
from personalized_rewardbench.data.sources import load_source


def sample_rows() -> dict[str, list[dict[str, Any]]]:
    """The sample's rows per subset without `chosen` / `rejected` (the LaMP-QA layout)."""
    return load_source("sample", paired=False).rows


def write_lamp_qa_folder(folder: Path, split: str = "train", limit: int | None = None) -> dict[str, list[dict]]:
    """`<Config>/<split>-00000-of-00001.jsonl` per subset from the sample, answers stripped."""
    rows = {subset: subset_rows[:limit] for subset, subset_rows in sample_rows().items()}
    for subset, subset_rows in rows.items():
        path = folder / subset / f"{split}-00000-of-00001.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        assert all(field not in row for row in subset_rows for field in ANSWER_FIELDS)
        path.write_text("".join(json.dumps(row) + "\n" for row in subset_rows), encoding="utf-8")
    return rows


def words(tag: str, count: int) -> str:
    """`count` plain filler words, e.g. words("fit", 3) == "fit0 fit1 fit2"."""
    return " ".join(f"{tag}{k}" for k in range(count))


class CannedGenerator:
    """Answers each pair chat from `script[item id] = (chosen, rejected)`, else a default good pair."""

    name = "canned"
    model = "canned-generator"
    revision = "canned-v1"

    def __init__(self, rows: dict[str, list[dict[str, Any]]], script: dict[str, tuple[str, str]] | None = None):
        self.by_question = {row["question"]: row["id"] for subset_rows in rows.values() for row in subset_rows}
        self.script = script or {}
        self.calls: list[tuple[str, str, int]] = []  # (item id, role, seed)

    def generate(self, chats: Sequence[list[dict[str, str]]], seeds: Sequence[int], sampling: Any) -> list[str]:
        texts = []
        for chat, seed in zip(chats, seeds):
            user = chat[-1]["content"]
            question = user.split("The asker's question:\n", 1)[1].split("\n\n", 1)[0]
            item_id = self.by_question[question]
            role = "chosen" if "fits this particular asker" in user else "rejected"
            self.calls.append((item_id, role, seed))
            pair = self.script.get(item_id, (f"FIT {words('fit', 59)}", f"MISS {words('miss', 59)}"))
            texts.append(pair[0] if role == "chosen" else pair[1])
        return texts


_ANSWER = re.compile(r"\[Answer\]\n(.*)\n\[End of answer\]", re.S)
_COUNT = re.compile(r"addressed \((\d+)\)")


class CannedJudge:
    """Rates like the rubric judge would be asked to: reads the answer and the aspect count from the chat.

    Rubric: an answer starting "FIT" gets all 2s, "WEAK" all 1s, "GARBLE" no ratings, anything else 0s.
    Quality (the generic rubric): "POOR" anywhere gets 0s, "QGARBLE" no ratings, else 2s."""

    name = "canned"
    model = "canned-judge"
    revision = "canned-v1"

    def __init__(self) -> None:
        self.chats: list[list[dict[str, str]]] = []

    def generate(self, chats: Sequence[list[dict[str, str]]], seeds: Sequence[int], sampling: Any) -> list[str]:
        outputs = []
        for chat in chats:
            self.chats.append(chat)
            user = chat[-1]["content"]
            answer = _ANSWER.search(user).group(1)
            count = int(_COUNT.search(user).group(1))
            if "Answers the question that was asked" in user:  # the general-quality rubric
                rating = None if "QGARBLE" in answer else 0 if "POOR" in answer else 2
            else:
                rating = None if answer.startswith("GARBLE") else {"FIT": 2, "WEAK": 1}.get(answer.split()[0], 0)
            outputs.append("I cannot tell." if rating is None else f"Reasons.\nRatings: {[rating] * count}")
        return outputs
