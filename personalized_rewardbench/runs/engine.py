"""The evaluation engine: data -> profile ranking -> model-facing items -> scores -> results.json.

Runs are resumable: each process appends its scored batches to `scores.partial/rank-<r>.jsonl`
(flushed and fsynced per batch). A rerun of the same command skips finished batches; because the
scorer's batch plan is deterministic, the final scores equal those of an uninterrupted run. When
every item is scored, the first process writes `scores.jsonl` (dataset order) and `results.json`,
each atomically, and removes the partial logs.

>>> import tempfile
>>> config = RunConfig(model="baseline:length", data="sample", output=tempfile.mkdtemp(), progress=False)
>>> outcome = run_evaluation(config, log=lambda _message: None)
>>> outcome.results["num_pairs"], sorted(path.name for path in outcome.run_dir.iterdir())
(24, ['results.json', 'run.json', 'scores.jsonl'])
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from personalized_rewardbench.data.eval_items import EvalItem, make_eval_item
from personalized_rewardbench.data.ranking_cache import rank_selected
from personalized_rewardbench.data.retrieval import Retriever
from personalized_rewardbench.data.sources import Source, load_source, select
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.hub_probe import needs_hub, offline_if_unreachable
from personalized_rewardbench.runs.results import RESULTS_FILE, SCORES_FILE, build_results, run_slug, slug
from personalized_rewardbench.runs.run_files import (
    RUN_FILE,
    RunFileError,
    read_results,
    read_run_identity,
    read_scores,
)
from personalized_rewardbench.runs.run_lock import RunLock
from personalized_rewardbench.runs.score_log import ScoreLog, stale_temp_files, write_json_atomic, write_jsonl_atomic
from personalized_rewardbench.runs.scorer_factory import make_scorer
from personalized_rewardbench.scoring.base import Scorer

PARTIAL_DIR = "scores.partial"


@dataclass
class PreparedData:
    source: Source
    items: list[EvalItem]
    retriever: str  # the retriever actually used ("none" at k = 0)
    notices: list[str]


@dataclass
class RunOutcome:
    run_dir: Path
    results: dict[str, Any] | None  # None on ranks other than 0 of a multi-process run
    records: list[dict[str, Any]]
    notices: list[str]
    reused: bool = False  # True when an identical finished run was found and nothing was scored


def prepare_items(
    config: RunConfig,
    log: Callable[[str], None] = print,
    *,
    source: Source | None = None,
    retriever: Retriever | None = None,
) -> PreparedData:
    """Load the data, rank profiles (cached) and build the model-facing items.

    A caller that keeps the data and the profile ranker loaded (the Space) passes them as `source`
    and `retriever`; by default both are built from `config`."""
    source = source if source is not None else load_source(config.data)
    selected = select(source, config.subsets or None, config.limit)
    rankings, retriever_name, notices = rank_selected(
        selected,
        source.revision,
        config.profile_k,
        config.retriever,
        config.cache_dir,
        progress=config.progress,
        log=log,
        retriever=retriever,
    )
    items = [
        make_eval_item(row, subset, rankings.get(row["id"]), config.profile_k)
        for subset, rows in selected.items()
        for row in rows
    ]
    return PreparedData(source, items, retriever_name, notices)


def run_identity(config: RunConfig, data: PreparedData, scorer: Scorer) -> dict[str, Any]:
    """What makes two runs the same run (stored in run.json; results.json starts with it).

    Returned in its JSON form (tuples as lists, ...), so it compares equal to what is read back."""
    identity = {
        "dataset": data.source.spec,
        "dataset_revision": data.source.revision,
        "dataset_version": data.source.version,
        "demo_sample": data.source.is_demo_sample,
        "model": scorer.name,
        "model_revision": scorer.revision,
        "model_type": scorer.model_type,
        "protocol": {
            "name": config.protocol,
            "profile_k": config.profile_k,
            "retriever": data.retriever,
            "subsets": sorted({item.subset for item in data.items}),
            "limit": config.limit,
            "template": config.template,
            **scorer.protocol(),
        },
    }
    return json.loads(json.dumps(identity))


def _check_identity(run_dir: Path, identity: dict[str, Any]) -> None:
    path = run_dir / RUN_FILE
    if path.is_file():
        stored = read_run_identity(path)
        if stored != identity:
            changed = sorted(key for key in identity if stored.get(key) != identity.get(key))
            raise UserError(
                f"the run folder holds a run with a different {', '.join(changed)}",
                "pass another --output, or delete that folder to start over",
                where=run_dir,
            )
    else:
        write_json_atomic(path, identity)


def _load_partials(run_dir: Path, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    done: dict[str, dict[str, Any]] = {}
    for path in sorted((run_dir / PARTIAL_DIR).glob("rank-*.jsonl")):
        score_log = ScoreLog(path)
        done.update(score_log.load())
        for notice in score_log.notices:
            log(notice)
    return done


def finished_run(
    run_dir: Path, identity: dict[str, Any], items: list[EvalItem]
) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """(results, records) of the finished run in `run_dir` when it has this identity and these items, else None.

    Outputs of the wrong shape are refused with the file named (RunFileError), never overwritten."""
    results_path, scores_path = run_dir / RESULTS_FILE, run_dir / SCORES_FILE
    if not (results_path.is_file() and scores_path.is_file()):
        return None
    results, records = read_results(results_path), read_scores(scores_path)
    changed = sorted(key for key in identity if results.get(key) != identity[key])
    if changed:
        raise RunFileError(f"{results_path}: records another run than this folder's (its {', '.join(changed)} differ)")
    if [r["id"] for r in records] != [item.id for item in items]:
        raise RunFileError(f"{scores_path}: holds {len(records)} records, not the {len(items)} items of this run")
    return results, records


def identity_digest(identity: dict[str, Any]) -> str:
    """Short hash of a run's identity: a new model or data revision, or another protocol, gets its own folder."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:8]


def run_dir_for(config: RunConfig, data: PreparedData, scorer: Scorer, identity: dict[str, Any]) -> Path:
    """`<output>/<model>/<data>-<subset>-k<K>-<retriever>-<template>[-limitN][-<judge type>]-<identity hash>`."""
    tag = "" if scorer.model_type in ("classifier", "baseline") else scorer.model_type + "-" + config.judge_mode
    template = config.template if config.protocol == "prbench" else config.protocol
    readable = run_slug(config.data, config.subsets, config.limit, config.profile_k, data.retriever, template, tag)
    return config.output / slug(config.model) / f"{readable}-{identity_digest(identity)}"


def run_evaluation(
    config: RunConfig,
    *,
    rank: int = 0,
    world_size: int = 1,
    barrier: Callable[[], None] = lambda: None,
    on_progress: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] = print,
    scorer: Scorer | None = None,
    prepared: PreparedData | None = None,
    wait_for_lock: bool = False,
) -> RunOutcome:
    """Score every selected pair (this process: batches rank, rank + world_size, ...) and write the results.

    `prepared` is `prepare_items(config)` done beforehand (the Space prepares the items in its main
    process, so its GPU function only scores); only its items, retriever name and source identity are read.
    Process 0 holds the run folder's lock while it works: another run of the same folder waits
    (`wait_for_lock`) or stops with one line naming this one's pid."""
    if needs_hub(config.data, [config.model], config.retriever, config.profile_k):
        if (notice := offline_if_unreachable()) and rank == 0:  # seconds, not minutes of retries, when offline
            log(notice)
    if prepared is not None:
        data = replace(prepared, notices=list(prepared.notices))  # the caller's copy stays as it was
    else:
        data = prepare_items(config, log if rank == 0 else (lambda _message: None))
    scorer = scorer or make_scorer(config)
    identity = run_identity(config, data, scorer)
    run_dir = run_dir_for(config, data, scorer, identity)
    lock = RunLock(run_dir)
    if rank == 0:
        lock.acquire(wait=wait_for_lock)
    fresh = not (run_dir / RUN_FILE).exists()  # run.json is ours to remove only when this call writes it
    try:
        outcome = _run_locked(config, data, scorer, identity, run_dir, rank, world_size, barrier, on_progress, log)
    except BaseException:  # a run that failed before its first score leaves no folder behind
        lock.release(remove_if_only=(RUN_FILE,) if fresh else ())
        raise
    lock.release()
    return outcome


def _run_locked(
    config: RunConfig,
    data: PreparedData,
    scorer: Scorer,
    identity: dict[str, Any],
    run_dir: Path,
    rank: int,
    world_size: int,
    barrier: Callable[[], None],
    on_progress: Callable[[int, int], None] | None,
    log: Callable[[str], None],
) -> RunOutcome:
    """`run_evaluation` once the run folder is locked (by process 0)."""
    if rank == 0:
        _check_identity(run_dir, identity)
        for leftover in stale_temp_files(run_dir):  # an atomic write that a full disk or a kill cut short
            leftover.unlink(missing_ok=True)
    barrier()
    finished = finished_run(run_dir, identity, data.items)
    if finished is not None:
        if rank == 0:  # partial logs left beside finished outputs (a crash right after writing them)
            shutil.rmtree(run_dir / PARTIAL_DIR, ignore_errors=True)
        return RunOutcome(run_dir, finished[0] if rank == 0 else None, finished[1], data.notices, reused=True)

    done = _load_partials(run_dir, log if rank == 0 else (lambda _message: None))
    barrier()  # every rank has read the same finished items before any rank appends more
    plan = scorer.plan(data.items)
    unfinished = [not all(data.items[i].id in done for i in batch) for batch in plan.batches]
    pairs_pending = sum(len(batch) for batch, open_ in zip(plan.batches, unfinished) if open_)  # all ranks together
    todo = [batch for batch, open_ in list(zip(plan.batches, unfinished))[rank::world_size] if open_]
    for notice in scorer.notices(plan):  # e.g. pairs the shared-prefix path scores in full
        data.notices.append(notice)
        if rank == 0:
            log(notice)
    log_file = ScoreLog(run_dir / PARTIAL_DIR / f"rank-{rank}.jsonl")
    total = sum(len(batch) for batch in todo)
    started = time.perf_counter()
    with tqdm(total=total, desc=f"scoring {scorer.name}", unit="pair", disable=not config.progress or rank != 0) as bar:
        for batch in todo:
            scored = scorer.score(plan, batch)
            records = [
                {"id": data.items[i].id, "subset": data.items[i].subset, **record} for i, record in zip(batch, scored)
            ]
            log_file.append(records)
            bar.update(len(batch))
            if on_progress is not None:
                on_progress(bar.n, total)
    barrier()
    seconds = time.perf_counter() - started  # wall time until the slowest rank finished
    if rank != 0:
        return RunOutcome(run_dir, None, [], data.notices)

    done = _load_partials(run_dir, log)
    missing = [item.id for item in data.items if item.id not in done]
    if missing:
        raise UserError(
            f"{len(missing)} items have no score (first: {missing[0]})",
            "rerun the same command to finish",
            where=run_dir,
        )
    records = [done[item.id] for item in data.items]
    runtime = {
        "seconds": round(seconds, 3),
        "pairs_scored": pairs_pending,
        "pairs_per_second": round(pairs_pending / seconds, 3) if seconds > 0 and pairs_pending else None,
        "device": str(scorer.device),
        "processes": world_size,
        **scorer.runtime_stats(plan),
    }
    extra = scorer.summarize(records)
    results = build_results(run=identity, records=records, extra_metrics=extra, runtime=runtime)
    write_jsonl_atomic(run_dir / SCORES_FILE, records)
    write_json_atomic(run_dir / RESULTS_FILE, results)
    shutil.rmtree(run_dir / PARTIAL_DIR, ignore_errors=True)
    return RunOutcome(run_dir, results, records, data.notices)
