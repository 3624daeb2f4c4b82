"""The engine's resumable, sharded batch pattern for the Best-of-N steps (generate, score, judge).

A step has an identity (what makes two runs the same run, kept in `<folder>/run.json`), a list of
record keys, and a deterministic plan of batches over them. Each process runs the batches
`rank, rank + world_size, ...` that are not finished, appending each batch's records to
`<folder>/<name>.partial/rank-<r>.jsonl` (flushed and fsynced, torn tails repaired: `ScoreLog`).
When every key has a record, rank 0 writes `<folder>/<name>.jsonl` in key order atomically and
removes the partial logs. A rerun after kill -9 therefore processes exactly the batches an
uninterrupted run would have processed, and its output is identical.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.score_log import ScoreLog, write_json_atomic, write_jsonl_atomic

RUN_FILE = "run.json"
Record = dict[str, Any]


def check_identity(folder: Path, identity: dict[str, Any]) -> None:
    """Store `identity` in a new folder; refuse a folder that holds a different run."""
    identity = json.loads(json.dumps(identity))
    path = folder / RUN_FILE
    if not path.is_file():
        write_json_atomic(path, identity)
        return
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        raise UserError(f"{path} is damaged (not valid JSON); delete {folder} to start that run over") from None
    if stored != identity:
        changed = sorted(key for key in identity.keys() | stored.keys() if stored.get(key) != identity.get(key))
        raise UserError(
            f"{folder} holds a run with a different {', '.join(changed)}; pass another output, or delete it"
        )


def read_jsonl(path: Path) -> list[Record]:
    """Every record of a finished JSONL output; a clear error for a damaged file."""
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                raise UserError(f"{path}: line {number} is not valid JSON; delete it and rerun its step") from None
    return records


def load_partials(folder: Path, name: str) -> dict[str, Record]:
    done: dict[str, Record] = {}
    for path in sorted((folder / f"{name}.partial").glob("rank-*.jsonl")):
        done.update(ScoreLog(path).load())
    return done


def run_batches(
    folder: Path,
    name: str,
    keys: Sequence[str],
    plan: Sequence[Sequence[int]],
    work: Callable[[list[int]], list[Record]],
    *,
    rank: int = 0,
    world_size: int = 1,
    barrier: Callable[[], None] = lambda: None,
    progress: bool = True,
    desc: str = "",
) -> list[Record] | None:
    """Run the unfinished batches of `plan` (indices into `keys`) that belong to this rank.

    `work(batch)` returns one record per index, each with `"id": keys[index]`. Returns every record in
    key order on rank 0 once all are done (also when nothing was left to do), None on other ranks."""
    final = folder / f"{name}.jsonl"
    if final.is_file():
        records = read_jsonl(final)
        if [record["id"] for record in records] == list(keys):
            return records if rank == 0 else None
    done = load_partials(folder, name)
    barrier()  # every rank has read the same finished records before any rank appends more
    open_batches = [list(batch) for batch in plan if not all(keys[i] in done for i in batch)]
    mine = open_batches[rank::world_size]
    log = ScoreLog(folder / f"{name}.partial" / f"rank-{rank}.jsonl")
    with tqdm(total=sum(map(len, mine)), desc=desc, disable=not progress or rank != 0) as bar:
        for batch in mine:
            records = work(batch)
            if [record["id"] for record in records] != [keys[i] for i in batch]:
                raise AssertionError(f"{name}: a batch returned records for other keys")
            log.append(records)
            bar.update(len(batch))
    barrier()
    if rank != 0:
        return None
    done = load_partials(folder, name)
    missing = [key for key in keys if key not in done]
    if missing:
        raise UserError(f"{folder}: {len(missing)} records missing (first: {missing[0]}); rerun the same command")
    records = [done[key] for key in keys]
    write_jsonl_atomic(final, records)
    shutil.rmtree(folder / f"{name}.partial", ignore_errors=True)
    return records
