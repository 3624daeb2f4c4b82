"""The `Scorer` interface: every scorer is a `Scorer`, its plan is immutable and carries its encodings, and a
scorer cached by the Space serves two different runs back to back with the scores fresh scorers give."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.engine import prepare_items, run_evaluation
from personalized_rewardbench.runs.scorer_factory import make_scorer
from personalized_rewardbench.scoring.base import Scorer, ScoringPlan
from personalized_rewardbench.space.allowlist import AllowedModel
from personalized_rewardbench.space.scorer_cache import ScorerCache, scorer_config
from personalized_rewardbench.testing.tiny_models import build_tiny_causal_lm, build_tiny_reward_model

RUNS = ({"profile_k": 3, "limit": 2}, {"profile_k": 0, "limit": 1, "subsets": ["Lifestyle_and_Personal_Development"]})


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {"rm": build_tiny_reward_model(folder / "rm", seed=5), "lm": build_tiny_causal_lm(folder / "lm", seed=6)}


def _config(model: AllowedModel, out: Path, run: dict) -> RunConfig:
    settings = dict(data="sample", retriever="bm25", output=out, cache_dir=out.parent / "cache", device="cpu")
    return scorer_config(model, **settings, **run)


def _scores(outcome) -> list[tuple]:
    return [(r["id"], r["chosen_score"], r["rejected_score"], r["truncated"]) for r in outcome.records]


@pytest.mark.parametrize("kind", ["classifier", "judge-pairwise", "judge-score", "baseline"])
def test_a_cached_scorer_serves_two_runs_like_fresh_scorers(kind, models, tmp_path):
    model_id = {"classifier": models["rm"], "baseline": "baseline:random"}.get(kind, models["lm"])
    model = AllowedModel(str(model_id), kind, dtype="float32")
    cache = ScorerCache()
    cached, fresh = [], []
    for n, run in enumerate(RUNS):
        with cache.use(model) as scorer:
            outcome = run_evaluation(_config(model, tmp_path / f"cached-{n}", run), scorer=scorer, log=lambda _: None)
        cached.append(outcome)
        config = _config(model, tmp_path / f"fresh-{n}", run)
        fresh.append(run_evaluation(config, scorer=make_scorer(config), log=lambda _: None))
    assert cache.loads == 1
    assert _scores(cached[0]) != _scores(cached[1])  # two different runs
    for mine, theirs in zip(cached, fresh):
        assert _scores(mine) == _scores(theirs)  # byte-equal floats
        assert (mine.run_dir / "scores.jsonl").read_bytes() == (theirs.run_dir / "scores.jsonl").read_bytes()
        runtime = {
            key: value for key, value in mine.results["runtime"].items() if key not in ("seconds", "pairs_per_second")
        }
        expected = json.loads(json.dumps(theirs.results["runtime"]))
        assert runtime == {key: expected[key] for key in runtime}  # the second run counts only its own work


def test_every_scorer_is_a_scorer_and_its_plan_is_frozen(models, tmp_path):
    config = RunConfig(model=str(models["rm"]), data="sample", limit=1, device="cpu", progress=False)
    items = prepare_items(config, log=lambda _: None).items
    for model in (str(models["rm"]), "baseline:length", "baseline:embedding"):
        scorer = make_scorer(dataclasses.replace(config, model=model))
        assert isinstance(scorer, Scorer)
        plan = scorer.plan(items)
        assert isinstance(plan, ScoringPlan) and plan.items == tuple(items)
        assert sorted(i for batch in plan.batches for i in batch) == list(range(len(items)))
        with pytest.raises(dataclasses.FrozenInstanceError):
            plan.batches = ()  # type: ignore[misc]
        with pytest.raises(TypeError):
            plan.stats["batches"] = 0  # type: ignore[index]
    scorer = make_scorer(config)
    plan = scorer.plan(items)
    assert len(plan.encodings) == len(items) and not hasattr(scorer, "_encoded")
    # score() reads the plan's encodings, not the items: a plan of other items scores those other items
    other = scorer.plan(items[1:] + items[:1])
    first = scorer.score(plan, [0])[0]
    assert scorer.score(other, [len(items) - 1])[0] == first
