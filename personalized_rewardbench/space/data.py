"""The Space's data: the benchmark rows and the profile ranker, loaded once and shared by every request.

Runs prepare their items here, in the Space's main process (`engine.prepare_items` with the loaded
source and ranker), so the GPU function receives the items and only scores. Explore builds the
model-facing view of one pair with the same ranking a run uses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from personalized_rewardbench.data.eval_items import EvalItem, make_eval_item
from personalized_rewardbench.data.ranking_cache import rank_profiles
from personalized_rewardbench.data.retrieval import Retriever, make_retriever
from personalized_rewardbench.data.schema import SUBSETS
from personalized_rewardbench.data.sources import Source, load_source, select
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.engine import PreparedData, prepare_items
from personalized_rewardbench.space.settings import MAX_PROFILE_K, whole_number

RANKING_CHUNK = 4  # rows ranked between two progress reports


def find_row(source: Source, pair_id: str) -> tuple[str, dict[str, Any]] | None:
    """(subset, row) of the pair with id `pair_id`, or None."""
    for subset in SUBSETS:
        for row in source.rows.get(subset, []):
            if row["id"] == pair_id:
                return subset, row
    return None


def slim(data: PreparedData) -> PreparedData:
    """`data` without the source's rows: what the GPU function needs (items and the run identity), cheap to pickle."""
    return replace(data, source=replace(data.source, rows={}, files={}), notices=list(data.notices))


class SpaceData:
    """The data source `spec` and the default profile ranker, each built on first use and then kept."""

    def __init__(self, spec: str):
        self.spec = spec
        self._source: Source | None = None
        self._retriever: tuple[Retriever, str | None] | None = None
        self._lock = threading.Lock()

    def source(self) -> Source:
        with self._lock:
            if self._source is None:
                self._source = load_source(self.spec)
            return self._source

    def retriever(self) -> tuple[Retriever, str | None]:
        """The profile ranker runs use (RunConfig's default, with its offline fallback) and its notice."""
        with self._lock:
            if self._retriever is None:
                self._retriever = make_retriever(RunConfig.retriever)
            return self._retriever

    def pair_limit(self, max_pairs: int) -> int:
        """Most pairs per subset a visitor can ask for: `max_pairs`, or the largest subset if smaller."""
        return max(1, min(max_pairs, max(len(rows) for rows in self.source().rows.values())))

    def prepare(self, config: RunConfig, on_progress: Callable[[int, int], None] | None = None) -> PreparedData:
        """The run's items from the loaded rows, profiles ranked by the loaded ranker (rankings cached on disk).

        Profiles are ranked a few rows at a time first, so `on_progress(done, total)` can report it;
        `prepare_items` then finds every ranking in the cache."""
        retriever, notice = self.retriever() if config.profile_k > 0 else (None, None)
        if retriever is not None and on_progress is not None:
            rows = [
                row for rows in select(self.source(), config.subsets or None, config.limit).values() for row in rows
            ]
            for start in range(0, len(rows), RANKING_CHUNK):
                on_progress(start, len(rows))
                chunk = rows[start : start + RANKING_CHUNK]
                rank_profiles(chunk, retriever, self.source().revision, config.cache_dir, progress=False)
            on_progress(len(rows), len(rows))
        data = prepare_items(config, log=lambda _message: None, source=self.source(), retriever=retriever)
        if notice:
            data.notices.append(notice)
        return data

    def pair(self, pair_id: str, profile_k: Any) -> tuple[dict[str, Any], EvalItem]:
        """A benchmark row and the model-facing item at profile-k (posts ranked as a run ranks them)."""
        source = self.source()
        found = find_row(source, pair_id)
        if found is None:
            raise UserError(f"no pair with id {pair_id!r} in this Space's data; pick one from the menu")
        subset, row = found
        k = whole_number(profile_k, "profile-k", 0, MAX_PROFILE_K)
        ranking = None
        if k > 0:
            ranking = rank_profiles([row], self.retriever()[0], source.revision, progress=False)[row["id"]]
        return row, make_eval_item(row, subset, ranking, k)
