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
from dataclasses import dataclass, field
from typing import Any

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.engine import PreparedData, finished_run, run_dir_for, run_evaluation, run_identity
from personalized_rewardbench.runs.results import RESULTS_FILE
from personalized_rewardbench.runs.score_log import write_json_atomic
from personalized_rewardbench.space.allowlist import AllowedModel, Allowlist
from personalized_rewardbench.space.data import SpaceData, slim
from personalized_rewardbench.space.errors import failed_run_message
from personalized_rewardbench.space.gpu_budget import check_run_budget, preload_seconds
from personalized_rewardbench.space.rate_limit import RateLimiter
from personalized_rewardbench.space.scorer_cache import ScorerCache, scorer_config
from personalized_rewardbench.space.settings import MAX_PROFILE_K, SpaceSettings, in_range
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
    notices: list[str] = field(default_factory=list)  # what was changed in the request (clamped numbers)


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
        self.limiter = RateLimiter(settings.runs_per_hour)
        # a fresh ZeroGPU worker receives a copy of every preloaded model before it scores
        self.preload = preload_seconds(list(allowlist.models.values())) if settings.zero_gpu else 0.0

    def plan(
        self,
        model_id: str,
        subsets: Sequence[str] | None,
        pairs: Any,
        profile_k: Any,
        on_ranking: Callable[[int, int], None] | None = None,
    ) -> EvaluationPlan:
        """Validate and normalise a visitor's request, prepare the items (ranking cached) and check its GPU cost.

        Subsets are deduplicated and put in the dataset's order (so `[Art, Art]` is the run `[Art]`);
        pair counts and profile-k are brought into range with a note (`EvaluationPlan.notices`)."""
        model = self.allowlist.get(model_id)
        available = list(self.data.source().rows)
        if isinstance(subsets, str):
            subsets = [subsets]
        requested = list(subsets or [])
        unknown = [name for name in requested if name not in available]
        if unknown:
            raise UserError(f"unknown subset {str(unknown[0])[:80]!r}: choose from {', '.join(available)}")
        chosen = [name for name in available if name in requested]
        if not chosen:
            raise UserError("choose at least one subset")
        limit, pairs_note = in_range(pairs, "pairs per subset", 1, self.data.pair_limit(self.settings.max_pairs))
        k, k_note = in_range(profile_k, "profile-k", 0, MAX_PROFILE_K)
        config = scorer_config(
            model,
            data=self.settings.data,
            subsets=[] if chosen == available else sorted(chosen),
            limit=limit,
            profile_k=k,
            output=self.settings.results_dir,
        )
        data = self.data.prepare(config, on_ranking)
        seconds = check_run_budget(model, data.items, limit, self.settings.gpu_max_seconds, self.preload)
        with self.scorers.use(model) as scorer:  # baselines too: a stored run costs no run of the visitor's limit
            stored = find_stored_run(config, data, scorer, run_identity(config, data, scorer))
        notes = [note for note in (pairs_note, k_note) if note]
        return EvaluationPlan(model, config, data, seconds, stored, notes)

    def execute(
        self,
        config: RunConfig,
        model_id: str,
        prepared: PreparedData | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        requested_seconds: int | None = None,
    ) -> dict[str, Any]:
        """Score the prepared items through the engine (the GPU part on Spaces); returns a picklable payload.

        A new run records the GPU seconds requested for it (`runtime.gpu_seconds_requested`) beside the
        engine's measured `runtime.seconds`, so the estimate can be tuned from real runs.
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
        results = outcome.results
        if requested_seconds is not None and not outcome.reused:
            results = {**results, "runtime": {**results.get("runtime", {}), "gpu_seconds_requested": requested_seconds}}
            write_json_atomic(outcome.run_dir / RESULTS_FILE, results)
        return {
            "results": results,
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
        on_ranking: Callable[[int, int], None] | None = None,
        visitor: str = "local",
    ) -> tuple[EvaluationPlan, dict[str, Any]]:
        """Plan, then serve from the store, run a baseline here, or run a model through `gpu_runner`.

        A new run counts against `visitor`'s hourly limit; a run served from the store does not."""
        plan = self.plan(model_id, subsets, pairs, profile_k, on_ranking)
        if plan.stored is None:
            self.limiter.take(visitor)
            if on_progress is not None:
                on_progress(0, len(plan.data.items))
        if plan.stored is not None:
            payload = plan.stored
        elif plan.model.is_baseline or gpu_runner is None:
            payload = self.execute(plan.config, plan.model.id, plan.data, on_progress, plan.gpu_seconds or None)
        else:
            payload = gpu_runner(plan.config, plan.model.id, slim(plan.data), plan.gpu_seconds)
        if not payload["reused"]:
            notice = self.store.persist()
            if notice:
                payload["notices"].append(notice)
        payload["notices"] = [*plan.notices, *payload["notices"]]
        return plan, payload
