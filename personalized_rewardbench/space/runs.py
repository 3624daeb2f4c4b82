"""Evaluate a model from the Space: validate the request, serve an identical stored run, or run the engine.

The items are prepared in the Space's main process (`SpaceData.prepare`); the GPU function receives
them (`execute(..., prepared=...)`) and only scores, through the same `engine.run_evaluation` as
`prbench evaluate`, so a Space run writes the CLI's results.json in the CLI's run folder.

A stored run is found by its identity (model revision, data version, protocol), not by its folder
name, so runs restored from the Hub and runs in folders named by any engine version are found alike.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.engine import PreparedData, finished_run, run_dir_for, run_evaluation, run_identity
from personalized_rewardbench.space.allowlist import AllowedModel, Allowlist
from personalized_rewardbench.space.data import SpaceData, slim
from personalized_rewardbench.space.errors import failed_run_message
from personalized_rewardbench.space.gpu_budget import check_run_budget
from personalized_rewardbench.space.scorer_cache import ScorerCache, scorer_config
from personalized_rewardbench.space.settings import MAX_PROFILE_K, SpaceSettings, whole_number
from personalized_rewardbench.space.store import ResultsStore

logger = logging.getLogger(__name__)

#: gpu_runner(config, model_id, prepared, seconds) -> execute()'s payload, run inside @spaces.GPU.
Runner = Callable[[RunConfig, str, PreparedData, int], dict[str, Any]]


@dataclass
class EvaluationPlan:
    model: AllowedModel
    config: RunConfig
    data: PreparedData
    gpu_seconds: int
    stored: dict[str, Any] | None  # an identical finished run found in the store


def find_stored_run(config: RunConfig, data: PreparedData, scorer, identity: dict[str, Any]) -> dict[str, Any] | None:
    """The identical finished run in the store (the engine's own run folder for it), as an execute() payload."""
    run_dir = run_dir_for(config, data, scorer, identity)
    finished = finished_run(run_dir, identity, data.items)
    if finished is None:
        return None
    results, records = finished
    return {"results": results, "records": records, "run_dir": str(run_dir), "reused": True, "notices": []}


class RunService:
    """Plans, serves and runs visitor evaluations against one results folder."""

    def __init__(
        self, settings: SpaceSettings, allowlist: Allowlist, scorers: ScorerCache, data: SpaceData, store: ResultsStore
    ):
        self.settings, self.allowlist, self.scorers, self.data, self.store = settings, allowlist, scorers, data, store

    def plan(self, model_id: str, subsets: Sequence[str] | None, pairs: Any, profile_k: Any) -> EvaluationPlan:
        """Validate a visitor's request, prepare the items (ranking cached) and check its GPU cost."""
        model = self.allowlist.get(model_id)
        available = list(self.data.source().rows)
        chosen = list(subsets or [])
        if not chosen:
            raise UserError("choose at least one subset")
        unknown = [name for name in chosen if name not in available]
        if unknown:
            raise UserError(f"unknown subset {unknown[0]!r}: choose from {', '.join(available)}")
        limit = whole_number(pairs, "pairs per subset", 1, self.data.pair_limit(self.settings.max_pairs))
        k = whole_number(profile_k, "profile-k", 0, MAX_PROFILE_K)
        config = scorer_config(
            model,
            data=self.settings.data,
            subsets=[] if sorted(chosen) == sorted(available) else sorted(chosen),
            limit=limit,
            profile_k=k,
            output=self.settings.results_dir,
        )
        data = self.data.prepare(config)
        seconds = check_run_budget(model, data.items, limit, self.settings.gpu_max_seconds)
        stored = None
        if not model.is_baseline:
            with self.scorers.use(model) as scorer:
                stored = find_stored_run(config, data, scorer, run_identity(config, data, scorer))
        return EvaluationPlan(model, config, data, seconds, stored)

    def execute(
        self,
        config: RunConfig,
        model_id: str,
        prepared: PreparedData | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Score the prepared items through the engine (the GPU part on Spaces); returns a picklable payload.

        Library errors are logged whole and re-raised in words fit for a visitor (no server paths)."""
        model = self.allowlist.get(model_id)
        data = prepared if prepared is not None else self.data.prepare(config)
        try:
            with self.scorers.use(model) as scorer:
                outcome = run_evaluation(
                    config, scorer=scorer, prepared=data, on_progress=on_progress, log=lambda _message: None
                )
        except UserError as error:
            logger.warning("run of %s failed: %s", model_id, error)
            raise UserError(failed_run_message(error)) from None
        return {
            "results": outcome.results,
            "records": outcome.records,
            "run_dir": str(outcome.run_dir),
            "reused": outcome.reused,
            "notices": list(outcome.notices),
        }

    def evaluate(
        self,
        model_id: str,
        subsets: Sequence[str] | None,
        pairs: Any,
        profile_k: Any,
        gpu_runner: Runner | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> tuple[EvaluationPlan, dict[str, Any]]:
        """Plan, then serve from the store, run a baseline here, or run a model through `gpu_runner`."""
        plan = self.plan(model_id, subsets, pairs, profile_k)
        if plan.stored is not None:
            payload = plan.stored
        elif plan.model.is_baseline or gpu_runner is None:
            payload = self.execute(plan.config, plan.model.id, plan.data, on_progress)
        else:
            payload = gpu_runner(plan.config, plan.model.id, slim(plan.data), plan.gpu_seconds)
        if not payload["reused"]:
            notice = self.store.persist()
            if notice:
                payload["notices"].append(notice)
        return plan, payload
