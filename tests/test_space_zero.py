"""ZeroGPU risks closed (issue 15): the requested duration covers a fresh worker, the estimate is recorded in the
run, preloading is forced on ZeroGPU, and one allowlisted model that fails to load does not stop the Space."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tiny_models import build_tiny_reward_model

from personalized_rewardbench.data.schema import SUBSETS
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.space.allowlist import AllowedModel, load_allowlist
from personalized_rewardbench.space.context import SpaceContext, SpaceSettings
from personalized_rewardbench.space.gpu_budget import FLOOR_SECONDS, estimate_gpu_seconds, preload_seconds
from personalized_rewardbench.space.try_own import custom_item

SPACE_DIR = Path(__file__).resolve().parent.parent / "space"


def _context(tmp_path: Path, models: list[dict], **settings) -> SpaceContext:
    models_file = tmp_path / "models.yaml"
    models_file.write_text(yaml.safe_dump({"models": models}))
    return SpaceContext(SpaceSettings(results_dir=tmp_path / "results", models_file=models_file, **settings))


def test_preloading_is_forced_on_zero_gpu_and_tokenizers_stay_single_threaded():
    zero = SpaceSettings.from_env(SPACE_DIR, {"SPACES_ZERO_GPU": "true", "PRBENCH_PRELOAD": "0"})
    assert zero.preload and zero.zero_gpu
    local = SpaceSettings.from_env(SPACE_DIR, {"PRBENCH_PRELOAD": "0"})
    assert not local.preload and not local.zero_gpu
    assert 'os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")' in (SPACE_DIR / "app.py").read_text()


def test_the_estimate_has_a_floor_and_counts_the_preloaded_models():
    small = AllowedModel("Org/Small", "classifier", size_b=0.1, max_length=8192)
    item = custom_item("Which book?", "", "Dune.", "Solaris.")
    assert estimate_gpu_seconds(small, [item]) == FLOOR_SECONDS  # 10 s + a tiny model would be under a fresh fork
    allowlisted = list(load_allowlist(SPACE_DIR / "models.yaml").models.values())
    copy = preload_seconds(allowlisted)
    # 0.6 + 1.2 + 1.7 + 1.5 billion bf16 parameters = 10 GB, copied at 2 GB/s
    assert copy == pytest.approx(5.0)
    assert estimate_gpu_seconds(small, [item], copy) == FLOOR_SECONDS + 5
    assert estimate_gpu_seconds(AllowedModel("baseline:length", "baseline"), [item], copy) == 0


def test_a_run_records_the_seconds_it_requested(tmp_path):
    tiny = build_tiny_reward_model(tmp_path / "tiny-rm")
    space = _context(tmp_path, [{"id": "baseline:length", "type": "baseline"}], extra_models=[tiny], zero_gpu=True)
    space.start()
    model_id = str(Path(tiny).resolve())
    assert space.runs.preload == pytest.approx(preload_seconds(list(space.allowlist.models.values())))
    calls = []

    def gpu_runner(config, model, prepared, seconds):
        calls.append(seconds)
        return space.runs.execute(config, model, prepared, requested_seconds=seconds)

    plan, payload = space.runs.evaluate(model_id, list(SUBSETS), 1, 0, gpu_runner=gpu_runner)
    assert calls == [plan.gpu_seconds] and plan.gpu_seconds >= FLOOR_SECONDS
    (stored,) = [p for p in space.results_dir.rglob("results.json")]
    runtime = json.loads(stored.read_text())["runtime"]
    assert runtime["gpu_seconds_requested"] == plan.gpu_seconds and "seconds" in runtime
    assert payload["results"]["runtime"]["gpu_seconds_requested"] == plan.gpu_seconds


def test_a_model_that_fails_to_load_is_marked_unavailable_not_fatal(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    models = [{"id": "Org/Not-In-Any-Cache", "type": "classifier"}, {"id": "baseline:length", "type": "baseline"}]
    space = _context(tmp_path, models, preload=True)
    space.start()  # does not raise
    assert list(space.allowlist.unavailable) == ["Org/Not-In-Any-Cache"]
    assert any("Org/Not-In-Any-Cache could not be loaded" in notice for notice in space.notices)
    assert "unavailable" in space.allowlist.label(space.allowlist.models["Org/Not-In-Any-Cache"])
    with pytest.raises(UserError, match=r"Org/Not-In-Any-Cache is unavailable on this Space"):
        space.runs.evaluate("Org/Not-In-Any-Cache", list(SUBSETS), 1, 0)
    _plan, payload = space.runs.evaluate("baseline:length", list(SUBSETS), 1, 0)  # the rest works
    assert payload["results"]["num_pairs"] == len(SUBSETS)
