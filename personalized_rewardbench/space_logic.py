"""The Space's logic: settings, allowlisted scorers loaded once, GPU-time estimates, runs, try-your-own.

`space/app.py` is a thin gr.Blocks face over `SpaceContext`. Every score comes from the same scorers the
CLI uses (`scorer_factory.make_scorer`), and every benchmark run goes through `engine.run_evaluation`,
so a run started here writes the CLI's results.json and the CLI would reuse it (and vice versa).

Environment (all optional):

- ``PRBENCH_SPACE_DATA``: data source spec (default ``sample``; on a Hub Space the upstream dataset);
- ``PRBENCH_RESULTS_DIR``: results folder (default ``results``);
- ``PRBENCH_EXTRA_MODELS``: local model folders, separated by ``os.pathsep``, allowlisted as classifiers;
- ``PRBENCH_MODELS_FILE``: the allowlist (default: ``models.yaml`` beside the app);
- ``PRBENCH_RESULTS_REPO`` (+ ``HF_TOKEN``): Hub dataset the results folder is mirrored to;
- ``PRBENCH_GPU_MAX_SECONDS`` (default 120), ``PRBENCH_MAX_PAIRS`` (per subset, default 200);
- ``PRBENCH_PRELOAD``: ``1`` loads every allowlisted model at start-up (default on ZeroGPU).
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from personalized_rewardbench.allowlist import Allowlist, AllowedModel, load_allowlist
from personalized_rewardbench.engine import PreparedData, prepare_items, run_evaluation, run_identity
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.eval_items import EvalItem, ProfilePost, make_eval_item
from personalized_rewardbench.prompts import user_message
from personalized_rewardbench.ranking_cache import rank_profiles
from personalized_rewardbench.registry import resolve_spec
from personalized_rewardbench.results import SCORES_FILE, find_results
from personalized_rewardbench.retrieval import Retriever, make_retriever
from personalized_rewardbench.run_config import RunConfig
from personalized_rewardbench.scorer_factory import make_scorer
from personalized_rewardbench.scoring import Scorer
from personalized_rewardbench.sources import UPSTREAM_REPO, Source, load_source
from personalized_rewardbench.space_store import ResultsStore
from personalized_rewardbench.space_views import find_row

# Input caps (characters) for try-your-own; benchmark rows come from the data source.
MAX_QUESTION_CHARS = 4000
MAX_ANSWER_CHARS = 8000
MAX_POSTS = 10
MAX_POST_CHARS = 2000
MAX_PROFILE_K = 10

# GPU-time model: seconds = fixed + size_b * (LOAD + tokens * PER_TOKEN * type factor).
FIXED_SECONDS = 10.0
LOAD_SECONDS_PER_B = 3.0
SECONDS_PER_TOKEN_PER_B = 4e-5  # bf16 forward at ~25 % of a ZeroGPU slice, with margin
CHARS_PER_TOKEN = 3.0  # conservative (English averages ~4)
# judge-pairwise reads both answers in both orders; judge-score reads each answer once (logits mode)
TYPE_FACTOR = {"classifier": 1.0, "judge-pairwise": 2.0, "judge-score": 1.5, "baseline": 0.0}

Runner = Callable[[RunConfig, str, int], dict[str, Any]]


@dataclass
class SpaceSettings:
    """Everything the environment decides; the token is kept out of repr and logs."""

    data: str = "sample"
    results_dir: Path = Path("results")
    models_file: Path = Path("space/models.yaml")
    extra_models: list[Path] = field(default_factory=list)
    results_repo: str | None = None
    token: str | None = field(default=None, repr=False)
    gpu_max_seconds: float = 120.0
    max_pairs: int = 200
    preload: bool = False

    @classmethod
    def from_env(cls, app_dir: Path, environ: Mapping[str, str] | None = None) -> "SpaceSettings":
        env = os.environ if environ is None else environ
        on_spaces = bool(env.get("SPACE_ID"))
        zero_gpu = env.get("SPACES_ZERO_GPU", "").lower() in ("1", "true")
        extra = [Path(p) for p in env.get("PRBENCH_EXTRA_MODELS", "").split(os.pathsep) if p.strip()]
        return cls(
            data=env.get("PRBENCH_SPACE_DATA") or (f"hub:{UPSTREAM_REPO}" if on_spaces else "sample"),
            results_dir=Path(env.get("PRBENCH_RESULTS_DIR") or "results"),
            models_file=Path(env.get("PRBENCH_MODELS_FILE") or app_dir / "models.yaml"),
            extra_models=extra,
            results_repo=env.get("PRBENCH_RESULTS_REPO") or None,
            token=env.get("HF_TOKEN") or None,
            gpu_max_seconds=_number(env, "PRBENCH_GPU_MAX_SECONDS", 120.0),
            max_pairs=int(_number(env, "PRBENCH_MAX_PAIRS", 200)),
            preload=env.get("PRBENCH_PRELOAD", "1" if zero_gpu else "0") == "1",
        )


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        return float(env.get(name) or default)
    except ValueError:
        raise UserError(f"{name}={env.get(name)!r} is not a number") from None


def _whole(value: Any, name: str, low: int, high: int) -> int:
    """A whole number from a UI value (sliders may send floats), checked against [low, high]."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{name} must be a number, got {value!r}") from None
    if not number.is_integer() or not low <= number <= high:
        raise UserError(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return int(number)


class ScorerCache:
    """Scorers loaded once per process, keyed by model settings; one user of a scorer at a time."""

    def __init__(self, loader: Callable[[RunConfig], Scorer] = make_scorer):
        self._loader = loader
        self._scorers: dict[tuple, Scorer] = {}
        self._locks: dict[tuple, threading.Lock] = {}
        self._guard = threading.Lock()
        self.loads = 0

    @staticmethod
    def key(model: AllowedModel) -> tuple:
        return (model.id, model.revision, model.type, model.dtype, model.max_length, model.trust_remote_code)

    def _load(self, model: AllowedModel) -> Scorer:
        scorer = self._loader(scorer_config(model))
        self.loads += 1
        return scorer

    @contextmanager
    def use(self, model: AllowedModel) -> Iterator[Scorer]:
        """The loaded scorer for `model` (loading it on first use), held exclusively while in use."""
        key = self.key(model)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._scorers:
                self._scorers[key] = self._load(model)
            yield self._scorers[key]


def scorer_config(model: AllowedModel, **run: Any) -> RunConfig:
    """The RunConfig that loads `model` exactly as the allowlist says (plus run settings)."""
    return RunConfig(
        model=model.id,
        model_type="auto" if model.is_baseline else model.type,
        revision=model.revision,
        dtype=model.dtype,
        trust_remote_code=model.trust_remote_code,
        max_length=model.max_length or None,  # recorded in the run's protocol, so runs stay comparable
        progress=False,
        **run,
    )


def _token_estimate(item: EvalItem, cap: int) -> int:
    """Tokens of the longer of the pair's two inputs, from characters, capped at the model's max length."""
    characters = len(user_message(item)) + max(len(item.chosen), len(item.rejected))
    return min(cap, int(characters / CHARS_PER_TOKEN) + 32)


def estimate_gpu_seconds(model: AllowedModel, items: Sequence[EvalItem]) -> int:
    """GPU seconds to score `items` with `model` (pairs x tokens x model size); 0 for baselines."""
    if model.is_baseline:
        return 0
    cap = model.max_length or resolve_spec(model.id).max_length
    tokens = sum(2 * _token_estimate(item, cap) for item in items)
    work = model.size_b * (LOAD_SECONDS_PER_B + tokens * SECONDS_PER_TOKEN_PER_B * TYPE_FACTOR[model.type])
    return math.ceil(FIXED_SECONDS + work)


@dataclass
class EvaluationPlan:
    model: AllowedModel
    config: RunConfig
    data: PreparedData
    gpu_seconds: int
    stored: dict[str, Any] | None  # an identical finished run found in the store


class SpaceContext:
    """The Space's state: settings, allowlist, results store, data source and the scorer cache."""

    def __init__(self, settings: SpaceSettings):
        self.settings = settings
        self.allowlist: Allowlist = load_allowlist(settings.models_file, settings.extra_models)
        self.store = ResultsStore(settings.results_dir, settings.results_repo, settings.token)
        self.scorers = ScorerCache()
        self._source: Source | None = None
        self._retriever: Retriever | None = None
        self._source_lock = threading.Lock()
        self.notices: list[str] = []

    def start(self) -> None:
        """Restore stored results, load the data source and (when asked) every allowlisted model."""
        self.notices += self.store.start()
        self.source()
        if self.settings.preload:
            for model in self.allowlist.models.values():
                with self.scorers.use(model):
                    pass

    def source(self) -> Source:
        with self._source_lock:
            if self._source is None:
                self._source = load_source(self.settings.data)
            return self._source

    def retriever(self) -> Retriever:
        """The profile ranker runs use (RunConfig's default, with its offline fallback), built once."""
        with self._source_lock:
            if self._retriever is None:
                self._retriever, _notice = make_retriever(RunConfig.retriever)
            return self._retriever

    @property
    def results_dir(self) -> Path:
        return self.settings.results_dir

    def pair_limit(self) -> int:
        """Most pairs per subset a visitor can ask for: the setting, or the largest subset if smaller."""
        return max(1, min(self.settings.max_pairs, max(len(rows) for rows in self.source().rows.values())))

    # -- evaluate ---------------------------------------------------------------------------------
    def plan_evaluation(self, model_id: str, subsets: Sequence[str] | None, pairs: Any, profile_k: Any) -> EvaluationPlan:
        """Validate a visitor's request, prepare the items (ranking cached) and check its GPU cost."""
        model = self.allowlist.get(model_id)
        available = list(self.source().rows)
        chosen = list(subsets or [])
        if not chosen:
            raise UserError("choose at least one subset")
        unknown = [name for name in chosen if name not in available]
        if unknown:
            raise UserError(f"unknown subset {unknown[0]!r}: choose from {', '.join(available)}")
        limit = _whole(pairs, "pairs per subset", 1, self.pair_limit())
        k = _whole(profile_k, "profile-k", 0, MAX_PROFILE_K)
        config = scorer_config(
            model,
            data=self.settings.data,
            subsets=[] if sorted(chosen) == sorted(available) else sorted(chosen),
            limit=limit,
            profile_k=k,
            output=self.results_dir,
        )
        data = prepare_items(config, log=lambda _message: None)
        seconds = estimate_gpu_seconds(model, data.items)
        cap = self.settings.gpu_max_seconds
        if seconds > cap:
            fixed = estimate_gpu_seconds(model, [])
            fitting = max(1, math.floor(limit * (cap - fixed) / max(seconds - fixed, 1e-9)))
            raise UserError(
                f"this run needs about {seconds} s of GPU time, over this Space's limit of {cap:g} s per run; "
                f"ask for at most {fitting} pairs per subset (or fewer subsets, or a smaller profile-k)"
            )
        stored = None
        if not model.is_baseline:
            with self.scorers.use(model) as scorer:
                stored = find_stored_run(self.results_dir, run_identity(config, data, scorer), [item.id for item in data.items])
        return EvaluationPlan(model, config, data, seconds, stored)

    def execute(self, config: RunConfig, model_id: str, on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Run the evaluation through the engine (the GPU part on Spaces); returns a picklable payload."""
        model = self.allowlist.get(model_id)
        with self.scorers.use(model) as scorer:
            outcome = run_evaluation(config, scorer=scorer, on_progress=on_progress, log=lambda _message: None)
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
        plan = self.plan_evaluation(model_id, subsets, pairs, profile_k)
        if plan.stored is not None:
            payload = plan.stored
        elif plan.model.is_baseline or gpu_runner is None:
            payload = self.execute(plan.config, plan.model.id, on_progress)
        else:
            payload = gpu_runner(plan.config, plan.model.id, plan.gpu_seconds)
        if not payload["reused"]:
            notice = self.store.persist()
            if notice:
                payload["notices"].append(notice)
        return plan, payload

    # -- explore ----------------------------------------------------------------------------------
    def pair(self, pair_id: str, profile_k: Any) -> tuple[dict[str, Any], EvalItem]:
        """A benchmark row and the model-facing item at profile-k (posts ranked as a run ranks them)."""
        source = self.source()
        found = find_row(source, pair_id)
        if found is None:
            raise UserError(f"no pair with id {pair_id!r} in {source.spec}; pick one from the menu")
        subset, row = found
        k = _whole(profile_k, "profile-k", 0, MAX_PROFILE_K)
        ranking = None
        if k > 0:
            ranking = rank_profiles([row], self.retriever(), source.revision, progress=False)[row["id"]]
        return row, make_eval_item(row, subset, ranking, k)

    # -- try your own -----------------------------------------------------------------------------
    def custom_item(self, question: str, posts_text: str, answer_a: str, answer_b: str) -> EvalItem:
        """An EvalItem from a visitor's text (one profile post per line), every part length-capped."""
        question, answer_a, answer_b = (text.strip() if text else "" for text in (question, answer_a, answer_b))
        for name, text, cap in (("question", question, MAX_QUESTION_CHARS), ("answer A", answer_a, MAX_ANSWER_CHARS), ("answer B", answer_b, MAX_ANSWER_CHARS)):
            if not text:
                raise UserError(f"the {name} is empty: type some text")
            if len(text) > cap:
                raise UserError(f"the {name} is {len(text)} characters long; the limit is {cap}: shorten it")
        posts = [line.strip() for line in (posts_text or "").splitlines() if line.strip()]
        if len(posts) > MAX_POSTS:
            raise UserError(f"{len(posts)} profile posts given; the limit is {MAX_POSTS} (one post per line)")
        for number, post in enumerate(posts, start=1):
            if len(post) > MAX_POST_CHARS:
                raise UserError(f"profile post {number} is {len(post)} characters long; the limit is {MAX_POST_CHARS}")
        return EvalItem("custom-0", "custom", question, tuple(ProfilePost("profile", post) for post in posts), answer_a, answer_b)

    def try_pair(self, model_id: str, question: str, posts_text: str, answer_a: str, answer_b: str, gpu_runner: Callable[[str, EvalItem, int], dict[str, Any]] | None = None) -> dict[str, Any]:
        """Score a visitor's own pair: baselines here, models through `gpu_runner` (with a GPU-time estimate)."""
        model = self.allowlist.get(model_id)
        item = self.custom_item(question, posts_text, answer_a, answer_b)
        seconds = estimate_gpu_seconds(model, [item])
        if seconds > self.settings.gpu_max_seconds:
            raise UserError(f"scoring this pair needs about {seconds} s of GPU time, over the limit of {self.settings.gpu_max_seconds:g} s; shorten the texts")
        if model.is_baseline or gpu_runner is None:
            return self.score_item(model.id, item)
        return gpu_runner(model.id, item, seconds)

    def score_item(self, model_id: str, item: EvalItem) -> dict[str, Any]:
        """Score answer A (`chosen`) and B (`rejected`) of `item` with the scorer's own plan/score."""
        model = self.allowlist.get(model_id)
        with self.scorers.use(model) as scorer:
            records = [record for batch in scorer.plan([item]) for record in scorer.score([item], batch)]
        record = records[0]
        a, b = float(record["chosen_score"]), float(record["rejected_score"])
        return {
            "model": model.id,
            "score_a": a,
            "score_b": b,
            "preferred": "A" if a > b else "B" if b > a else "tie",
            "truncated": bool(record.get("truncated")),
        }


def find_stored_run(folder: Path, identity: dict[str, Any], item_ids: list[str]) -> dict[str, Any] | None:
    """A finished run in `folder` with exactly this identity and these items, as an execute() payload."""
    wanted = json.loads(json.dumps(identity))
    for results in find_results(folder):
        if {key: results.get(key) for key in wanted} != wanted:
            continue
        run_dir = Path(results["path"]).parent
        scores = run_dir / SCORES_FILE
        if not scores.is_file():
            continue
        records = [json.loads(line) for line in scores.read_text(encoding="utf-8").splitlines() if line.strip()]
        if [record["id"] for record in records] != item_ids:
            continue
        payload = {key: value for key, value in results.items() if key != "path"}
        return {"results": payload, "records": records, "run_dir": str(run_dir), "reused": True, "notices": []}
    return None
