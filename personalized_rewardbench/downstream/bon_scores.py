"""`prbench bon score`: every candidate of a candidates folder scored by one reward model.

The scorer is whatever `runs.scorer_factory.make_scorer` builds for a `RunConfig` (classifier,
judge-score, baselines), with the same protocol options as `evaluate` (profile K, retriever,
template, ...). An item's N candidates form one `AnswerGroup` (they share the prompt), scored
through `Scorer.score_answers`, which runs the prompt once and the N answers on its cache.

Output: ``<candidates>/scores/<model>-<protocol>-<hash>/scores.jsonl``, one record per item
``{"id", "subset", "scores": [N floats], "truncated", "question_shortened"}``, beside its ``run.json``
(the model, its revision and type, the protocol; the run's identity).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from personalized_rewardbench.downstream.candidates import candidate_data, load_candidates
from personalized_rewardbench.downstream.resumable import RUN_FILE, check_identity, read_jsonl, run_batches
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.engine import identity_digest, prepare_items
from personalized_rewardbench.runs.results import slug
from personalized_rewardbench.runs.scorer_factory import make_scorer
from personalized_rewardbench.scoring.base import AnswerGroup, fixed_batches

SCORES = "scores"


@dataclass
class BonScoreConfig:
    """`run` holds the model and protocol options exactly as `evaluate` takes them (data fields are ignored:
    they come from the candidates folder)."""

    candidates: Path
    run: RunConfig
    groups_per_batch: int = 4


def scores_folder(candidates: Path, model: str, identity: dict[str, Any]) -> Path:
    return Path(candidates) / SCORES / f"{slug(model)}-k{identity['protocol']['profile_k']}-{identity_digest(identity)}"


def score_candidates(
    config: BonScoreConfig, *, rank: int = 0, world_size: int = 1, barrier=lambda: None, log=print
) -> tuple[Path, list[dict[str, Any]] | None]:
    """Score every candidate (resumable, sharded); returns the run folder and, on rank 0, its records."""
    if config.groups_per_batch < 1:
        raise UserError(f"--groups-per-batch must be positive, got {config.groups_per_batch}")
    identity, records = load_candidates(config.candidates)
    data_config = candidate_data(identity, config.run.profile_k, config.run.retriever, config.run.cache_dir)
    run = replace(config.run, data=data_config.data, subsets=data_config.subsets, limit=data_config.limit)
    data = prepare_items(run, log if rank == 0 else (lambda _m: None))
    items = {item.id: item for item in data.items}
    missing = [record["id"] for record in records if record["id"] not in items]
    if missing:
        raise UserError(f"{config.candidates}: item {missing[0]} is not in {identity['dataset']} any more")
    scorer = make_scorer(run)
    score_identity = json.loads(
        json.dumps(
            {
                "candidates": {key: identity[key] for key in ("dataset", "dataset_revision", "policy", "n", "seed")},
                "model": scorer.name,
                "model_revision": scorer.revision,
                "model_type": scorer.model_type,
                "protocol": {
                    "profile_k": run.profile_k,
                    "retriever": data.retriever,
                    "template": run.template,
                    **scorer.protocol(),
                },
            }
        )
    )
    folder = scores_folder(config.candidates, run.model, score_identity)
    if rank == 0:
        folder.mkdir(parents=True, exist_ok=True)
        check_identity(folder, score_identity)
    barrier()

    def work(batch: list[int]) -> list[dict[str, Any]]:
        groups = [AnswerGroup(items[records[i]["id"]], tuple(records[i]["candidates"])) for i in batch]
        results = scorer.score_answers(groups)
        return [
            {
                "id": records[i]["id"],
                "subset": records[i]["subset"],
                "scores": [float(score) for score in result.scores],
                "truncated": result.truncated,
                "question_shortened": result.question_shortened,
            }
            for i, result in zip(batch, results)
        ]

    scored = run_batches(
        folder,
        SCORES,
        [record["id"] for record in records],
        fixed_batches(len(records), config.groups_per_batch),
        work,
        rank=rank,
        world_size=world_size,
        barrier=barrier,
        progress=run.progress,
        desc=f"scoring candidates with {scorer.name}",
    )
    return folder, scored


def load_score_runs(candidates: Path) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Every finished `bon score` run of a candidates folder: label -> (identity, records).

    The label is the model name; a model scored under several protocols gets its folder name instead."""
    runs = []
    for folder in sorted((Path(candidates) / SCORES).glob("*/")):
        if (folder / RUN_FILE).is_file() and (folder / f"{SCORES}.jsonl").is_file():
            identity = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
            runs.append((folder, identity, read_jsonl(folder / f"{SCORES}.jsonl")))
    names = [identity["model"] for _, identity, _ in runs]
    return {
        (identity["model"] if names.count(identity["model"]) == 1 else folder.name): (identity, records)
        for folder, identity, records in runs
    }
