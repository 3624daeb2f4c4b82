"""The top-k posts of a full profile, ranked with `evaluate`'s retriever (and its on-disk cache when the
rows carry ids and a data revision is known), for rewards whose data gives the whole `profile`.

Data built with `rewards.datasets` already holds the ranked top-k posts (`posts`): then no ranking
happens at reward time.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from personalized_rewardbench.data.eval_items import ProfilePost, make_eval_item
from personalized_rewardbench.data.ranking_cache import rank_profiles
from personalized_rewardbench.data.retrieval import Retriever, make_retriever
from personalized_rewardbench.errors import UserError

logger = logging.getLogger(__name__)
#: Rankings kept in memory when there is no on-disk cache (oldest dropped first).
MEMORY_ENTRIES = 10_000


def _check_profile(profile: Any, where: str) -> list[Mapping[str, Any]]:
    if isinstance(profile, str | bytes) or not isinstance(profile, Sequence):
        raise UserError(f"{where} must be a list of {{'category', 'text'}} objects")
    for n, post in enumerate(profile):
        if not isinstance(post, Mapping) or not isinstance(post.get("text"), str):
            raise UserError(f"{where}[{n}] must be an object with a string 'text'")
        if not isinstance(post.get("category", ""), str):
            raise UserError(f"{where}[{n}].category must be a string")
    return [{"category": post.get("category") or "", "text": post["text"]} for post in profile]


class ProfileRanker:
    """Ranks profiles with retriever `name` (built on first use); thread-safe."""

    def __init__(self, name: str, cache_dir: Path | None = None, data_revision: str | None = None):
        self.name = name
        self.cache_dir = cache_dir
        self.data_revision = data_revision
        self._retriever: Retriever | None = None
        self._memory: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    @property
    def retriever(self) -> Retriever:
        if self._retriever is None:
            self._retriever, notice = make_retriever(self.name)
            if notice:
                logger.warning(notice)
        return self._retriever

    @property
    def used_name(self) -> str:
        """The retriever actually in use (contriever falls back to minilm offline)."""
        return self.retriever.name

    def top_posts(
        self, questions: Sequence[str], profiles: Sequence[Any], k: int, ids: Sequence[str | None] | None = None
    ) -> list[tuple[ProfilePost, ...]]:
        """The `k` most relevant posts of each profile, most relevant first."""
        if k == 0:
            return [() for _ in questions]
        rows = [
            {
                "id": ids[n] if ids is not None and ids[n] is not None else None,
                "question": question,
                "profile": _check_profile(profile, f"profile of entry {n}"),
                "chosen": "",
                "rejected": "",
            }
            for n, (question, profile) in enumerate(zip(questions, profiles))
        ]
        with self._lock:
            rankings = self._rankings(rows)
        return [make_eval_item(row, "", ranking, k).posts for row, ranking in zip(rows, rankings)]

    def _rankings(self, rows: list[dict[str, Any]]) -> list[list[int]]:
        if self.data_revision is not None and all(row["id"] for row in rows):
            unique = list({row["id"]: row for row in rows}.values())
            ranked = rank_profiles(unique, self.retriever, self.data_revision, self.cache_dir, progress=False)
            return [ranked[row["id"]] for row in rows]
        result = []
        for row in rows:
            key = hashlib.sha1(repr((row["question"], [p["text"] for p in row["profile"]])).encode()).hexdigest()
            if key not in self._memory:
                self._memory[key] = self.retriever.rank(row["question"], [p["text"] for p in row["profile"]])
                if len(self._memory) > MEMORY_ENTRIES:
                    self._memory.pop(next(iter(self._memory)))  # oldest first
            result.append(self._memory[key])
        return result
