"""The Space: its named endpoints (through gradio_client against `python space/app.py`) and its logic.

The server runs offline on the bundled sample with the baselines and a tiny reward model added through
PRBENCH_EXTRA_MODELS; the accuracy it reports must equal `prbench evaluate` on the same inputs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from gradio_client import Client
from gradio_client.exceptions import AppError

from personalized_rewardbench.allowlist import load_allowlist
from personalized_rewardbench.engine import prepare_items
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.schema import SUBSETS
from personalized_rewardbench.space_logic import SpaceContext, SpaceSettings, estimate_gpu_seconds, scorer_config
from personalized_rewardbench.space_store import ResultsStore
from space_server import REPO, cli_results, running_space
from tiny_models import build_tiny_reward_model

SPACE_DIR = REPO / "space"
SECRET = "hf_thisIsAFakeTokenForTheLeakTest"
LIMIT = 2


@pytest.fixture(scope="module")
def space(tmp_path_factory):
    root = tmp_path_factory.mktemp("space")
    tiny = build_tiny_reward_model(root / "tiny-rm")
    env = {
        "PRBENCH_RESULTS_DIR": str(root / "results"),
        "PRBENCH_CACHE": str(root / "cache"),
        "PRBENCH_EXTRA_MODELS": str(tiny),
        "HF_TOKEN": SECRET,  # must never reach a page, an answer or the log
    }
    with running_space(root, **env) as url:
        yield {"client": Client(url, verbose=False), "url": url, "root": root, "tiny": str(tiny), "env": env}


def _evaluate(client: Client, model: str, profile_k: int) -> tuple:
    return client.predict(model, list(SUBSETS), LIMIT, profile_k, api_name="/evaluate")


@pytest.mark.parametrize("which, profile_k", [("baseline:length", 0), ("tiny", 1)])
def test_evaluate_matches_the_cli(space, tmp_path, monkeypatch, which, profile_k):
    model = space["tiny"] if which == "tiny" else which
    summary, per_subset, _margins, _worst, results = _evaluate(space["client"], model, profile_k)
    monkeypatch.setenv("PRBENCH_CACHE", space["env"]["PRBENCH_CACHE"])
    expected = cli_results(tmp_path / "cli", model, LIMIT, profile_k)
    assert results["accuracy"] == expected["accuracy"]
    assert results["ci95"] == expected["ci95"]
    assert results["per_subset"] == expected["per_subset"]
    assert results["num_pairs"] == expected["num_pairs"] == LIMIT * len(SUBSETS)
    assert results["model_revision"] == expected["model_revision"]
    assert f"{100 * expected['accuracy']:.2f} %" in summary
    overall = next(row for row in per_subset["data"] if row[0] == "overall (micro)")
    assert overall[3] == round(100 * expected["accuracy"], 2)
    stored = list((space["root"] / "results").rglob("results.json"))
    assert any(json.loads(path.read_text())["model"] == model for path in stored)


def test_identical_run_is_served_from_the_store(space):
    first = _evaluate(space["client"], "baseline:length", 0)
    again = _evaluate(space["client"], "baseline:length", 0)
    assert "found in the store" in again[0]
    assert again[4]["created_at"] == first[4]["created_at"]


def test_leaderboard_lists_runs_and_keeps_demo_runs_apart(space):
    _evaluate(space["client"], "baseline:length", 0)
    benchmark, demo, chart = space["client"].predict("all", "all", True, "overall", api_name="/leaderboard")
    assert benchmark["data"] == []  # the sample is never ranked as benchmark data
    models = {row[0] for row in demo["data"]}
    assert "baseline:length" in models
    row = next(r for r in demo["data"] if r[0] == "baseline:length")
    assert row[-1] == "demo sample" and row[9] == LIMIT * len(SUBSETS)
    assert ["baseline:length | k=0", row[6], "demo sample"] in chart["data"]
    hidden = space["client"].predict("all", "all", False, "overall", api_name="/leaderboard")[2]
    assert hidden["data"] == []
    only_classifiers = space["client"].predict("classifier", "all", True, "overall", api_name="/leaderboard")[1]
    assert all(r[1] == "classifier" for r in only_classifiers["data"])


def test_try_your_own_returns_two_scores(space):
    question = "Which sci-fi novel should I read next?"
    _summary, result = space["client"].predict(
        space["tiny"], question, "I loved Solaris.\nI read on the train.", "Try Roadside Picnic.", "Read Dune.", api_name="/try"
    )
    assert isinstance(result["score_a"], float) and isinstance(result["score_b"], float)
    assert result["preferred"] == ("A" if result["score_a"] > result["score_b"] else "B" if result["score_b"] > result["score_a"] else "tie")
    summary, result = space["client"].predict("baseline:length", question, "", "short", "a longer answer", api_name="/try")
    assert (result["score_a"], result["score_b"], result["preferred"]) == (5.0, 15.0, "B")
    assert "prefers answer **B**" in summary


def test_pair_view_shows_key_to_humans_and_stored_scores(space):
    _evaluate(space["client"], "baseline:length", 0)
    model_view, answer_key, chosen, rejected, scores = space["client"].predict("0_0_0", 2, api_name="/pair")
    sample = json.loads((REPO / "personalized_rewardbench/sample/Art_and_Entertainment.jsonl").read_text().splitlines()[0])
    assert sample["question"] in model_view and "Post 2 (Category:" in model_view and "Post 3" not in model_view
    assert sample["narrative"] not in model_view and sample["narrative"] in answer_key
    assert (chosen, rejected) == (sample["chosen"], sample["rejected"])
    length_row = next(r for r in scores["data"] if r[0] == "baseline:length")
    assert length_row[3:5] == [len(sample["chosen"]), len(sample["rejected"])]


def test_refusals_reach_the_visitor_as_one_line(space):
    client = space["client"]
    with pytest.raises(AppError, match=r"evil/model.*not in the list of choices"):
        client.predict("evil/model", list(SUBSETS), LIMIT, 0, api_name="/evaluate")
    with pytest.raises(AppError, match=r"evil/model.*not in the list of choices"):
        client.predict("evil/model", "q", "", "a", "b", api_name="/try")
    with pytest.raises(AppError, match=r"the question is 5000 characters long; the limit is 4000"):
        client.predict("baseline:length", "q" * 5000, "", "a", "b", api_name="/try")
    with pytest.raises(AppError, match=r"answer B is 9000 characters long"):
        client.predict("baseline:length", "q", "", "a", "b" * 9000, api_name="/try")
    with pytest.raises(AppError, match=r"Value 50 is greater than maximum value 8"):  # the slider's own check
        client.predict("baseline:length", list(SUBSETS), 50, 0, api_name="/evaluate")
    with pytest.raises(AppError, match=r"choose at least one subset"):
        client.predict("baseline:length", [], LIMIT, 0, api_name="/evaluate")


def test_no_secret_or_traceback_reaches_pages_or_log(space):
    import urllib.request

    with urllib.request.urlopen(space["url"] + "/config") as response:
        config = response.read().decode()
    with urllib.request.urlopen(space["url"] + "/") as response:
        page = response.read().decode()
    log = (space["root"] / "space.log").read_text()
    for text in (config, page, log):
        assert SECRET not in text
    with pytest.raises(AppError) as refused:
        space["client"].predict("baseline:length", "q" * 5000, "", "a", "b", api_name="/try")
    assert "Traceback" not in str(refused.value) and "\n" not in str(refused.value).strip()


# -- logic, in process ----------------------------------------------------------------------------
def _context(tmp_path: Path, models: list[dict], **settings) -> SpaceContext:
    models_file = tmp_path / "models.yaml"
    models_file.write_text(yaml.safe_dump({"models": models}))
    return SpaceContext(SpaceSettings(results_dir=tmp_path / "results", models_file=models_file, **settings))


def test_allowlist_is_the_only_door(tmp_path):
    allowlist = load_allowlist(SPACE_DIR / "models.yaml")
    with pytest.raises(UserError, match=r"'evil/model' is not on this Space's allowlist"):
        allowlist.get("evil/model")
    assert not any(model.trust_remote_code for model in allowlist.models.values())
    custom_code = tmp_path / "custom.yaml"
    custom_code.write_text(yaml.safe_dump({"models": [{"id": "nicolinho/QRM-Llama3.1-8B", "type": "classifier"}]}))
    with pytest.raises(UserError, match="trust_remote_code: true"):
        load_allowlist(custom_code)
    typo = tmp_path / "typo.yaml"
    typo.write_text(yaml.safe_dump({"models": [{"id": "a/b", "type": "classifier", "max_lenght": 10}]}))
    with pytest.raises(UserError, match="unknown field 'max_lenght'"):
        load_allowlist(typo)


def test_space_card_lists_the_allowlist_and_pins_the_stack():
    text = (SPACE_DIR / "README.md").read_text()
    card = yaml.safe_load(text.split("---")[1])
    assert card["sdk"] == "gradio" and card["sdk_version"] == "6.31.0" and card["python_version"] == "3.12"
    assert card["app_file"] == "app.py"
    assert card["models"] == load_allowlist(SPACE_DIR / "models.yaml").hub_ids()
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (SPACE_DIR / "requirements.txt").read_text(), re.M))
    project = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (REPO / "requirements.txt").read_text(), re.M))
    for package in ("transformers", "datasets", "evaluate", "huggingface_hub", "spaces"):
        assert pins[package] == project[package], package
    assert "torch" in pins


def test_gpu_estimate_grows_with_pairs_and_size_and_refuses_big_runs(tmp_path):
    big = {"id": "Org/Big-RM", "type": "classifier", "size_b": 8.0, "max_length": 8192}
    space = _context(tmp_path, [big], gpu_max_seconds=12.0)
    model = space.allowlist.get("Org/Big-RM")
    data = prepare_items(scorer_config(model, data="sample", limit=4, output=tmp_path / "r"), log=lambda _m: None)
    few, many = estimate_gpu_seconds(model, data.items[:2]), estimate_gpu_seconds(model, data.items)
    assert few < many
    small = type(model)(**{**model.__dict__, "size_b": 0.6})
    assert estimate_gpu_seconds(small, data.items) < many
    with pytest.raises(UserError, match=r"pairs per subset must be a whole number from 1 to 8, got 50"):
        space.plan_evaluation("Org/Big-RM", list(SUBSETS), 50, 0)
    with pytest.raises(UserError, match=r"profile-k must be a whole number from 0 to 10, got 1.5"):
        space.plan_evaluation("Org/Big-RM", list(SUBSETS), 2, 1.5)
    with pytest.raises(UserError, match=r"needs about \d+ s of GPU time, over this Space's limit of 12 s per run; ask for at most \d+ pairs"):
        space.plan_evaluation("Org/Big-RM", list(SUBSETS), 8, 0)


class _FakeScheduler:
    instances: list["_FakeScheduler"] = []

    def __init__(self, **kwargs):
        self.kwargs, self.triggers = kwargs, 0
        _FakeScheduler.instances.append(self)

    def trigger(self):
        from concurrent.futures import Future

        self.triggers += 1
        future: Future = Future()
        future.set_result(None)
        return future


def test_results_store_commits_finished_runs_before_reporting(tmp_path, monkeypatch):
    import huggingface_hub

    restored = []
    monkeypatch.setattr(huggingface_hub, "CommitScheduler", _FakeScheduler)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo, **kw: restored.append((repo, kw["local_dir"])))
    assert ResultsStore(tmp_path / "local").start() == [] and ResultsStore(tmp_path / "local").persist() is None
    assert "no token" in ResultsStore(tmp_path / "r", "me/results").start()[0]
    store = ResultsStore(tmp_path / "hub", "me/results", token=SECRET)
    assert store.start() == [] and restored == [("me/results", tmp_path / "hub")]
    scheduler = _FakeScheduler.instances[-1]
    assert scheduler.kwargs["repo_type"] == "dataset" and scheduler.kwargs["folder_path"] == tmp_path / "hub"
    assert store.persist() is None and scheduler.triggers == 1
    assert SECRET not in repr(store) and SECRET not in repr(SpaceSettings(token=SECRET))


def test_stored_model_run_is_served_without_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("PRBENCH_CACHE", str(tmp_path / "cache"))
    tiny = build_tiny_reward_model(tmp_path / "tiny-rm")
    capped = {"id": str(tiny), "type": "classifier", "max_length": 64}
    space = _context(tmp_path, [{"id": "baseline:length", "type": "baseline"}, capped])
    calls = []

    def gpu_runner(config, model_id, seconds):
        calls.append(seconds)
        return space.execute(config, model_id)

    _plan, first = space.evaluate(str(tiny), list(SUBSETS), 1, 0, gpu_runner=gpu_runner)
    _plan, again = space.evaluate(str(tiny), list(SUBSETS), 1, 0, gpu_runner=gpu_runner)
    assert len(calls) == 1 and calls[0] >= 10
    assert not first["reused"] and again["reused"]
    assert again["results"]["accuracy"] == first["results"]["accuracy"] and again["records"] == first["records"]
    assert first["results"]["protocol"]["max_length"] == 64  # the allowlist's cap is applied and recorded
    assert space.scorers.loads == 1  # loaded once, reused for the lookup and the run
    result = space.try_pair(str(tiny), "q?", "", "yes", "no", gpu_runner=lambda model_id, item, seconds: space.score_item(model_id, item))
    assert space.scorers.loads == 1 and result["preferred"] in ("A", "B", "tie")
