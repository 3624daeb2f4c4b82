"""Profile rankings cached on disk, keyed by data revision and retriever, so reruns do not re-embed."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from personalized_rewardbench.data.retrieval import Retriever, make_retriever


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
    try:
        temporary.write_text(json.dumps(payload), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise


def _valid_ranking(entry: Any, profile_size: int) -> bool:
    """A ranking is a permutation of the profile's post indexes."""
    return (
        isinstance(entry, list)
        and all(isinstance(i, int) and not isinstance(i, bool) for i in entry)
        and sorted(entry) == list(range(profile_size))
    )


def _read_cache(path: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """The cached rankings by row id; a damaged file is reported and recomputed, never trusted."""
    if not path.is_file():
        return {}
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # invalid JSON, not UTF-8, unreadable
        log(f"{path}: damaged ranking cache ({type(error).__name__}); ranking the profiles again")
        return {}
    if not isinstance(cached, dict):
        log(f"{path}: ranking cache is not a JSON object; ranking the profiles again")
        return {}
    return cached


def rank_profiles(
    rows: Sequence[Mapping[str, Any]],
    retriever: Retriever,
    data_revision: str,
    cache_dir: Path | None = None,
    progress: bool = True,
    log: Callable[[str], None] = lambda _message: None,
) -> dict[str, list[int]]:
    """Ranking (indices into `profile`, most relevant first) for every row id; computes only what is not cached.

    A cached entry that is not a permutation of the row's post indexes is recomputed (with one notice)."""
    path = cache_path(cache_dir or default_cache_dir(), data_revision, retriever.name)
    cached = _read_cache(path, log)
    bad = [
        row["id"] for row in rows if row["id"] in cached and not _valid_ranking(cached[row["id"]], len(row["profile"]))
    ]
    if bad:
        log(f"{path}: {len(bad)} damaged rankings (first: {bad[0]}); ranking those profiles again")
    missing = [row for row in rows if row["id"] not in cached or row["id"] in bad]
    for row in tqdm(
        missing, desc=f"ranking profiles ({retriever.name})", unit="item", disable=not progress or not missing
    ):
        cached[row["id"]] = retriever.rank(row["question"], [post["text"] for post in row["profile"]])
    if missing:
        try:
            _write_atomic(path, cached)
        except OSError as error:  # the cache is derived: the run goes on without it
            log(f"{path}: cannot write the ranking cache ({error.strerror or type(error).__name__}); not cached")
    return {row["id"]: cached[row["id"]] for row in rows}


def rank_selected(
    selected: Mapping[str, Sequence[Mapping[str, Any]]],
    data_revision: str,
    profile_k: int,
    retriever_name: str,
    cache_dir: Path | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    retriever: Retriever | None = None,
) -> tuple[dict[str, list[int]], str, list[str]]:
    """(rankings by row id, the retriever used, notices) for the rows of every selected subset.

    Nothing is ranked at profile-k 0 (retriever "none"). Without a `retriever` passed in (the Space keeps one
    loaded), `retriever_name` is built; its fallback notice is logged and returned."""
    if profile_k <= 0:
        return {}, "none", []
    notices: list[str] = []
    if retriever is None:
        retriever, notice = make_retriever(retriever_name)
        if notice:
            notices.append(notice)
            log(notice)
    rows = [row for subset_rows in selected.values() for row in subset_rows]
    rankings = rank_profiles(rows, retriever, data_revision, cache_dir, progress=progress, log=log)
    return rankings, retriever.name, notices
