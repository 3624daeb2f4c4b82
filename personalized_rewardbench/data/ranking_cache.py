"""Profile rankings cached on disk, keyed by data revision and retriever, so reruns do not re-embed."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from personalized_rewardbench.data.retrieval import Retriever


def default_cache_dir() -> Path:
    """`$PRBENCH_CACHE`, else `~/.cache/prbench`."""
    return Path(os.environ.get("PRBENCH_CACHE", Path.home() / ".cache" / "prbench"))


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def cache_path(cache_dir: Path, data_revision: str, retriever: str) -> Path:
    return cache_dir / "rankings" / _safe(retriever) / f"{_safe(data_revision)}.json"


def _write_atomic(path: Path, payload: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".tmp-{os.getpid()}")
    temporary.write_text(json.dumps(payload), encoding="utf-8")
    os.replace(temporary, path)


def rank_profiles(
    rows: Sequence[Mapping[str, Any]],
    retriever: Retriever,
    data_revision: str,
    cache_dir: Path | None = None,
    progress: bool = True,
) -> dict[str, list[int]]:
    """Ranking (indices into `profile`, most relevant first) for every row id; computes only what is not cached."""
    path = cache_path(cache_dir or default_cache_dir(), data_revision, retriever.name)
    cached: dict[str, list[int]] = {}
    if path.is_file():
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            cached = {}  # a damaged cache is recomputed, never trusted
    missing = [row for row in rows if row["id"] not in cached]
    for row in tqdm(
        missing, desc=f"ranking profiles ({retriever.name})", unit="item", disable=not progress or not missing
    ):
        cached[row["id"]] = retriever.rank(row["question"], [post["text"] for post in row["profile"]])
    if missing:
        _write_atomic(path, cached)
    return {row["id"]: cached[row["id"]] for row in rows}
