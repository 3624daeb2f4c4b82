"""The Space: its named endpoints (through gradio_client against `python space/app.py`) and its logic.

The server runs offline on the bundled sample with the baselines and a tiny reward model added through
PRBENCH_EXTRA_MODELS; the accuracy it reports must equal `prbench evaluate` on the same inputs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from cli_errors import user_error
from gradio_client import Client
from gradio_client.exceptions import AppError
from space_server import APP, REPO, cli_results, running_space

from personalized_rewardbench.data.schema import SUBSETS
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs import engine
from personalized_rewardbench.runs.engine import identity_digest, prepare_items, run_evaluation
from personalized_rewardbench.runs.leaderboard import leaderboard_rows, print_leaderboard, write_chart
from personalized_rewardbench.runs.results import BENCHMARK
from personalized_rewardbench.space.allowlist import load_allowlist
from personalized_rewardbench.space.board import chart_rows, leaderboard_tables
from personalized_rewardbench.space.context import SpaceContext, SpaceSettings
from personalized_rewardbench.space.gpu_budget import estimate_gpu_seconds
from personalized_rewardbench.space.pairs import stored_scores_frame
from personalized_rewardbench.space.scorer_cache import scorer_config
from personalized_rewardbench.space.store import ResultsStore
from personalized_rewardbench.space.views import (
    margin_frame,
    orders_right,
    subset_frame,
    summary_markdown,
    try_markdown,
    verdict_text,
    worst_pairs_frame,
)
from personalized_rewardbench.testing.tiny_models import build_tiny_causal_lm, build_tiny_reward_model

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
        "PRBENCH_RUNS_PER_HOUR": "1000",  # these tests start many runs from one address
    }
    with running_space(root, **env) as url:
        yield {"client": Client(url, verbose=False), "url": url, "root": root, "tiny": str(tiny), "env": env}


def _value(output):
    """A component's value from an endpoint's output (an update also carries visibility)."""
    return output.get("value", output) if isinstance(output, dict) and output.get("__type__") == "update" else output


def _evaluate(client: Client, model: str, profile_k: int, pairs=LIMIT, subsets=SUBSETS) -> tuple:
    return tuple(map(_value, client.predict(model, list(subsets), pairs, profile_k, api_name="/evaluate")))


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


def _board(client: Client, type_filter="all", section="demo-sample runs", search="", show_demo=True):
    """(benchmark, partial, demo) tables of /leaderboard with every column shown, and the headings."""
    from personalized_rewardbench.space.board import OPTIONAL

    out = client.predict(type_filter, "all", search, OPTIONAL, show_demo, section, "overall", api_name="/leaderboard")
    tables = [table.get("value", table) for table in (out[1], out[3], out[5])]  # updates carry visibility too
    return *tables, (out[0], out[2], out[4])


def test_leaderboard_lists_runs_and_keeps_demo_runs_apart(space):
    from personalized_rewardbench.space.board import LEADERBOARD_COLUMNS

    _evaluate(space["client"], "baseline:length", 0)
    benchmark, partial, demo, headings = _board(space["client"])
    assert benchmark["data"] == [] and partial["data"] == []  # the sample is never ranked as benchmark data
    assert "No benchmark runs yet" in headings[0] and "No partial runs yet" in headings[1]
    assert demo["headers"] == LEADERBOARD_COLUMNS
    column = {name: index for index, name in enumerate(LEADERBOARD_COLUMNS)}
    models = {row[column["model"]] for row in demo["data"]}
    assert "baseline:length" in models
    row = next(r for r in demo["data"] if r[column["model"]] == "baseline:length" and r[column["pairs"]] == 6)
    assert row[column["data"]] == "demo sample" and row[column["coverage"]] == f"first {LIMIT} per subset"
    assert row[column["rank"]] == ""  # demo-sample runs are never ranked
    assert f"local: {Path(space['tiny']).name}" in {r[column["model"]] for r in demo["data"]}  # no server path
    only_classifiers = _board(space["client"], type_filter="classifier")[2]
    assert only_classifiers["data"] and all(r[column["type"]] == "classifier" for r in only_classifiers["data"])
    searched = _board(space["client"], search="length")[2]
    assert {r[column["model"]] for r in searched["data"]} == {"baseline:length"}


def test_a_damaged_stored_run_is_left_off_with_a_note_and_logged(space):
    _evaluate(space["client"], "baseline:length", 0)
    damaged = space["root"] / "results" / "someone" / "broken-run" / "results.json"
    damaged.parent.mkdir(parents=True)
    damaged.write_text('{"model": "someone/broken", "accuracy": ')  # cut off mid-write
    try:
        _benchmark, _partial, demo, headings = _board(space["client"])
        assert "1 stored results file is left off the leaderboard (unreadable" in headings[0]
        assert str(space["root"]) not in " ".join(headings)  # the reason names a server file: logged only
        assert demo["data"] and "someone/broken" not in json.dumps(demo["data"])
        log = (space["root"] / "space.log").read_text()
        assert "leaderboard: skipped" in log and str(damaged) in log
    finally:
        damaged.unlink()
    assert "left off the leaderboard" not in _board(space["client"])[3][0]


def test_try_your_own_returns_two_scores(space):
    question = "Which sci-fi novel should I read next?"
    _summary, result = space["client"].predict(
        space["tiny"],
        question,
        "I loved Solaris.\nI read on the train.",
        "Try Roadside Picnic.",
        "Read Dune.",
        api_name="/try",
    )
    assert isinstance(result["score_a"], float) and isinstance(result["score_b"], float)
    assert result["preferred"] == (
        "A" if result["score_a"] > result["score_b"] else "B" if result["score_b"] > result["score_a"] else "tie"
    )
    summary, result = space["client"].predict(
        "baseline:length", question, "", "short", "a longer answer", api_name="/try"
    )
    assert (result["score_a"], result["score_b"], result["preferred"]) == (5.0, 15.0, "B")
    assert "prefers answer **B**" in summary


def test_pair_view_shows_key_to_humans_and_stored_scores(space):
    from personalized_rewardbench.data.eval_items import make_eval_item
    from personalized_rewardbench.scoring.judge_prompts import PAIRWISE_SYSTEM, pairwise_user_message
    from personalized_rewardbench.scoring.prompts import user_message
    from personalized_rewardbench.space.pairs import STORED_COLUMNS

    _evaluate(space["client"], "baseline:length", 0)
    model_view, answer_key, chosen, rejected, scores = map(
        _value, space["client"].predict("0_0_0", 2, "reward model (default template)", api_name="/pair")
    )
    sample = json.loads(
        (REPO / "personalized_rewardbench/data/sample/Art_and_Entertainment.jsonl").read_text().splitlines()[0]
    )
    assert sample["question"] in model_view and "Post 2 (Category:" in model_view and "Post 3" not in model_view
    assert sample["narrative"] not in model_view and sample["narrative"].split(".")[0].split()[0] in answer_key
    assert (chosen, rejected) == (sample["chosen"], sample["rejected"])
    column = {name: index for index, name in enumerate(STORED_COLUMNS)}
    length_row = next(r for r in scores["data"] if r[0] == "baseline:length")
    assert [length_row[column["chosen score"]], length_row[column["rejected score"]]] == [
        len(sample["chosen"]),
        len(sample["rejected"]),
    ]
    runs = [r[column["run"]] for r in scores["data"] if r[0] == "baseline:length"]
    assert len(runs) == len(set(runs))  # a full and a partial run of one model are told apart

    # the text is the prompt builder's own: the user turn of a reward model, the pairwise judge's messages
    item = make_eval_item(sample, SUBSETS[0], None, 0)
    view_k0 = _value(space["client"].predict("0_0_0", 0, "reward model (default template)", api_name="/pair")[0])
    assert user_message(item) in view_k0 and "no profile posts (profile-k = 0)" in view_k0 and "Top-0" not in view_k0
    judge_view = _value(space["client"].predict("0_0_0", 0, "pairwise judge", api_name="/pair")[0])
    assert PAIRWISE_SYSTEM in judge_view and pairwise_user_message(item, item.chosen, item.rejected) in judge_view
    other_subset = space["client"].predict("2_0_3", 0, "reward model (default template)", api_name="/pair")
    society = json.loads(
        (REPO / "personalized_rewardbench/data/sample/Society_and_Culture.jsonl").read_text().splitlines()[3]
    )
    assert society["question"] in other_subset[0]  # /pair takes the ids of every subset


def test_dataset_text_is_rendered_as_text():
    from personalized_rewardbench.space.pairs import answer_key_markdown

    row = {
        "narrative": "I like <img src=https://evil.example/x.png> and ![t](https://evil.example/t.png)",
        "rubric_aspects": [{"aspect": "<b>bold</b>", "reason": "[link](javascript:alert(1))", "evidence": "*e*"}],
    }
    text = answer_key_markdown(row)
    for special in "<>[]()!*":  # every Markdown/HTML character of the row is escaped
        assert (
            re.search(r"(?<!\\)" + re.escape(special), text.replace("**", "").replace("_(", "").replace(")_", ""))
            is None
        ), special
    assert "\\<img src=https://evil\\.example/x\\.png\\>" in text


def _run_key(space, model: str, profile_k: int) -> str:
    results = space["root"] / "results"
    for path in results.rglob("results.json"):
        payload = json.loads(path.read_text())
        if (
            payload["model"] == model
            and payload["protocol"]["profile_k"] == profile_k
            and payload["protocol"]["limit"] == LIMIT
            and len(payload["protocol"]["subsets"] or SUBSETS) == len(SUBSETS)
        ):
            return str(path.parent.relative_to(results))
    raise AssertionError(f"no run of {model} at k={profile_k}")


def _correct(space, key: str) -> dict[str, bool]:
    lines = (space["root"] / "results" / key / "scores.jsonl").read_text().splitlines()
    return {r["id"]: r["chosen_score"] > r["rejected_score"] for r in map(json.loads, lines)}


def test_compare_two_runs_through_the_api(space):
    from scipy.stats import binomtest

    client = space["client"]
    for model, k in (
        ("baseline:length", 0),
        ("baseline:random", 0),
        ("baseline:embedding", 0),
        ("baseline:embedding", 2),
    ):
        _evaluate(client, model, k)
    key_a, key_b = _run_key(space, "baseline:length", 0), _run_key(space, "baseline:random", 0)
    summary, subsets, disagreements = map(_value, client.predict(key_a, key_b, api_name="/compare"))
    a, b = _correct(space, key_a), _correct(space, key_b)
    a_only = sum(a[i] and not b[i] for i in a)
    b_only = sum(b[i] and not a[i] for i in a)
    p = 1.0 if a_only + b_only == 0 else binomtest(a_only, a_only + b_only, 0.5).pvalue
    assert f"p = **{p:.4g}**" in summary and f"A alone is right on {a_only}, B alone on {b_only}" in summary
    overall = subsets["data"][-1]
    assert overall[0] == "overall" and overall[1] == len(a) == LIMIT * len(SUBSETS)
    assert overall[4] == round(100 * (a_only - b_only) / len(a), 2)
    assert sorted(row[0] for row in disagreements["data"]) == sorted(i for i in a if a[i] != b[i])
    assert disagreements["headers"] == ["id", "subset", "right", "question"]  # no answer-order column for scores
    assert all(row[2] == ("A" if a[row[0]] else "B") for row in disagreements["data"])

    gain_summary = client.predict(
        _run_key(space, "baseline:embedding", 2), _run_key(space, "baseline:embedding", 0), api_name="/compare"
    )[0]
    assert "Profile gain of baseline:embedding" in gain_summary
    with pytest.raises(AppError, match="the same run"):
        client.predict(key_a, key_a, api_name="/compare")
    with pytest.raises(AppError, match="choose run A from the menu"):
        client.predict("../../etc", key_b, api_name="/compare")


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
    with pytest.raises(AppError, match=r"choose at least one subset"):
        client.predict("baseline:length", [], LIMIT, 0, api_name="/evaluate")


def test_out_of_range_numbers_are_brought_into_range_with_a_note(space):
    summary, per_subset, margins, worst, results = _evaluate(
        space["client"], "baseline:length", -5, pairs=999, subsets=[SUBSETS[0], SUBSETS[0]]
    )
    assert "pairs per subset: 999 is over the most, 8; using 8" in summary
    assert "profile-k: -5 is under the least, 0; using 0" in summary
    assert results["num_pairs"] == 8 and results["protocol"]["profile_k"] == 0
    assert results["protocol"]["subsets"] == [SUBSETS[0]]  # [Art, Art] is the run [Art]
    again = _evaluate(space["client"], "baseline:length", 0, pairs=8, subsets=[SUBSETS[0]])
    assert "found in the store" in again[0] and again[4]["created_at"] == results["created_at"]
    assert [row[0] for row in per_subset["data"]] == [SUBSETS[0], "overall (micro)", "macro (mean over subsets)"]


def test_an_engine_error_reaches_the_visitor_without_server_paths(space):
    client = space["client"]
    client.predict("baseline:random", list(SUBSETS), 1, 0, api_name="/evaluate")
    (run_json,) = [
        p for p in (space["root"] / "results").rglob("run.json") if "limit1" in p.parent.name and "random" in str(p)
    ]
    identity = json.loads(run_json.read_text())
    run_json.write_text(json.dumps({**identity, "model_revision": "tampered"}))  # the folder now holds "another" run
    (run_json.parent / "results.json").unlink()
    with pytest.raises(AppError) as refused:
        client.predict("baseline:random", list(SUBSETS), 1, 0, api_name="/evaluate")
    message = str(refused.value)
    assert "the run could not be completed" in message and "different model_revision" in message
    assert (
        str(space["root"]) not in message
        and "/results" not in message
        and "--output" not in message
        and "delete" not in message
    )
    assert "\n" not in message.strip() and "Traceback" not in message
    assert (
        str(run_json.parent) in (space["root"] / "space.log").read_text()
    )  # the maintainer still gets the whole story


def test_no_secret_or_traceback_reaches_pages_or_log(space):
    import urllib.request

    with urllib.request.urlopen(space["url"] + "/config") as response:
        config = response.read().decode()
    with urllib.request.urlopen(space["url"] + "/") as response:
        page = response.read().decode()
    log = (space["root"] / "space.log").read_text()
    for text in (config, page, log):
        assert SECRET not in text
    assert str(space["root"] / "results") not in config + page  # no server path on the page
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
    with pytest.raises(UserError, match="the model registry runs it with custom code") as refused:
        load_allowlist(custom_code)
    assert refused.value.where == str(custom_code) and "trust_remote_code: true" in refused.value.hint
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
    lines = [line for line in (SPACE_DIR / "requirements.txt").read_text().splitlines() if line and line[0] != "#"]
    assert all("==" in line for line in lines), [line for line in lines if "==" not in line]  # every one pinned
    assert {"scipy", "matplotlib"} <= set(pins)


def test_gpu_estimate_grows_with_pairs_and_size_and_refuses_big_runs(tmp_path):
    big = {"id": "Org/Big-RM", "type": "classifier", "size_b": 8.0, "max_length": 8192}
    space = _context(tmp_path, [big], gpu_max_seconds=36.0)  # loading alone: about 10 + 8 * 3 = 34 s
    model = space.allowlist.get("Org/Big-RM")
    data = prepare_items(scorer_config(model, data="sample", limit=4, output=tmp_path / "r"), log=lambda _m: None)
    few, many = estimate_gpu_seconds(model, data.items[:2]), estimate_gpu_seconds(model, data.items)
    assert few < many
    small = type(model)(**{**model.__dict__, "size_b": 0.6})
    assert estimate_gpu_seconds(small, data.items) < many
    (tmp_path / "b").mkdir()
    baseline = _context(tmp_path / "b", [{"id": "baseline:length", "type": "baseline"}])
    clamped = baseline.runs.plan("baseline:length", list(SUBSETS)[:1], 0.4, 1.5)
    assert clamped.config.limit == 1 and clamped.config.profile_k == 2
    assert clamped.notices == [
        "pairs per subset: 0.4 is under the least, 1; using 1",
        "profile-k: 1.5 is not a whole number; using 2",
    ]
    with pytest.raises(
        UserError,
        match=r"needs about \d+ s of GPU time, over this Space's limit of 36 s per run; ask for at most \d+ pairs",
    ) as refused:
        space.runs.plan("Org/Big-RM", list(SUBSETS), 8, 0)
    fitting = int(re.search(r"at most (\d+) pairs", str(refused.value)).group(1))
    assert 1 <= fitting < 8
    pairs = lambda n: (
        prepare_items(scorer_config(model, data="sample", limit=n, output=tmp_path / "r"), log=lambda _m: None).items
    )  # noqa: E731
    assert estimate_gpu_seconds(model, pairs(fitting)) <= 36 < estimate_gpu_seconds(model, pairs(fitting + 1))


def test_a_model_over_the_gpu_limit_even_for_one_pair_is_refused_plainly(tmp_path):
    huge = {"id": "Org/Huge-RM", "type": "classifier", "size_b": 70.0, "max_length": 8192}
    space = _context(tmp_path, [huge], gpu_max_seconds=120.0)  # loading alone: about 10 + 70 * 3 = 220 s
    for ask in (
        lambda: space.runs.plan("Org/Huge-RM", list(SUBSETS), 1, 0),
        lambda: space.tries.try_pair("Org/Huge-RM", "q?", "", "a", "b"),
    ):
        with pytest.raises(UserError) as refused:
            ask()
        message = str(refused.value)
        assert "Org/Huge-RM cannot run within this Space's GPU limit of 120 s per request" in message
        assert "at most" not in message and "shorten" not in message


class _FakeScheduler:
    instances: list[_FakeScheduler] = []

    def __init__(self, **kwargs):
        self.kwargs, self.triggers = kwargs, 0
        _FakeScheduler.instances.append(self)

    def trigger(self):
        from concurrent.futures import Future

        self.triggers += 1
        future: Future = Future()
        future.set_result(None)
        return future


def _fake_results(
    folder: Path, model: str, accuracy: float, limit: int | None = None, subsets=SUBSETS, demo: bool = False
) -> None:
    """A results.json as the engine writes it (only the fields the leaderboard reads)."""
    run = folder / model / f"run-{limit}-{len(subsets)}-{demo}"
    run.mkdir(parents=True)
    payload = {
        "benchmark": BENCHMARK,
        "model": model,
        "model_type": "classifier",
        "dataset": "/srv/private/data",
        "dataset_revision": "abc",
        "demo_sample": demo,
        "accuracy": accuracy,
        "ci95": [accuracy - 0.1, min(1.0, accuracy + 0.05)],
        "macro_accuracy": accuracy,
        "num_pairs": 10,
        "created_at": "2026-01-01T00:00:00+00:00",
        "protocol": {
            "profile_k": 0,
            "retriever": "none",
            "subsets": sorted(subsets),
            "limit": limit,
            "template": "default",
        },
        "ties": 0,
        "per_subset": {
            name: {
                "accuracy": accuracy,
                "num_pairs": 10,
                "ties": 0,
                "ci95": [accuracy - 0.1, min(1.0, accuracy + 0.05)],
            }
            for name in subsets
        },
    }
    (run / "results.json").write_text(json.dumps(payload))


def test_partial_runs_are_never_ranked_with_full_runs(tmp_path, capsys):
    folder = tmp_path / "results"
    _fake_results(folder, "full-low", 0.60)
    _fake_results(folder, "full-high", 0.70)
    _fake_results(folder, "limited", 0.90, limit=5)
    _fake_results(folder, "one-subset", 0.95, subsets=SUBSETS[:1])
    _fake_results(folder, "demo", 0.99, limit=2, demo=True)
    rows = leaderboard_rows(folder)
    assert [(r["model"], r["section"]) for r in rows] == [
        ("full-high", "benchmark"),
        ("full-low", "benchmark"),
        ("one-subset", "partial"),
        ("limited", "partial"),
        ("demo", "demo"),
    ]
    assert [r["coverage"] for r in rows] == ["full", "full", "Art", "first 5 per subset", "first 2 per subset"]
    print_leaderboard(rows)
    out = capsys.readouterr().out.splitlines()
    titles = [n for n, line in enumerate(out) if line.startswith("-- ")]
    assert [out[n] for n in titles] == [
        "-- benchmark runs (every pair of every subset; ranked) --",
        "-- partial runs (a pair limit or some subsets; not ranked with full runs) --",
        "-- demo-sample runs (not benchmark results) --",
    ]
    # no scores.jsonl: ranks fall back to the 95 % intervals, which overlap here (a shared rank)
    assert out[titles[0] + 1].split()[:2] == ["1", "full-high"] and out[titles[0] + 2].split()[:2] == ["1", "full-low"]
    assert (
        out[titles[1] + 1].split()[0] == "one-subset" and out[titles[2] + 1].split()[0] == "demo"
    )  # no rank outside the benchmark
    assert write_chart(rows, folder / "board.png").read_bytes()[:4] == b"\x89PNG"

    benchmark, partial, demo = leaderboard_tables(folder)
    assert list(benchmark["model"]) == ["full\\-high", "full\\-low"]  # not Hub ids: shown as plain text, no link
    assert list(benchmark["rank"]) == ["1=", "1="]
    assert [m.replace("\\", "") for m in partial["model"]] == ["one-subset", "limited"]
    benchmark = leaderboard_tables(folder, columns=["data"])[0]
    assert set(benchmark["data"]) == {"local folder data@abc"}  # no server path on the page
    assert list(chart_rows(folder, chart_section="benchmark runs")["run"]) == ["full-high | k=0", "full-low | k=0"]
    assert list(chart_rows(folder, chart_section="partial runs")["run"]) == [
        "one-subset | k=0 | Art",
        "limited | k=0 | first 5 per subset",
    ]
    assert list(chart_rows(folder, chart_section="demo-sample runs")["run"]) == ["demo | k=0 | first 2 per subset"]


@pytest.mark.parametrize(
    "env, message",
    [
        ({"PRBENCH_MODELS_FILE": "missing-models.yaml"}, "cannot read the allowlist missing-models.yaml"),
        ({"PRBENCH_SPACE_DATA": "hub:foo/bar", "HF_HUB_OFFLINE": "1"}, "hub:foo/bar: not in the local Hub cache"),
        ({"PRBENCH_QUEUE_SIZE": "abc"}, "PRBENCH_QUEUE_SIZE='abc' is not a number"),
        ({"PRBENCH_QUEUE_SIZE": "0"}, "PRBENCH_QUEUE_SIZE='0' must be a whole number of at least 1"),
        ({"PRBENCH_MAX_PAIRS": "2.5"}, "PRBENCH_MAX_PAIRS='2.5' must be a whole number of at least 1"),
        ({"PRBENCH_GPU_MAX_SECONDS": "nan"}, "PRBENCH_GPU_MAX_SECONDS='nan' must be a finite number"),
        ({"PRBENCH_RUNS_PER_HOUR": "-1"}, "PRBENCH_RUNS_PER_HOUR='-1' must be a finite number of at least 0"),
        ({"PRBENCH_RESULTS_DIR": "taken"}, "PRBENCH_RESULTS_DIR='taken' is a file; point it at a folder"),
        ({"PRBENCH_MAX_FILE_SIZE": "lots"}, "PRBENCH_MAX_FILE_SIZE='lots' is not a size"),
    ],
)
def test_a_configuration_error_ends_start_up_in_one_line(tmp_path, env, message):
    import os

    (tmp_path / "taken").write_text("a file, not a folder")
    started = subprocess.run(
        [sys.executable, str(APP)], cwd=tmp_path, env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )
    assert started.returncode == 2
    err, _hint = user_error(started.stderr, prog="space/app.py")
    assert message in err


def test_runs_per_visitor_are_limited_and_stored_runs_are_free(tmp_path):
    space = _context(
        tmp_path,
        [{"id": "baseline:length", "type": "baseline"}, {"id": "baseline:random", "type": "baseline"}],
        runs_per_hour=2,
    )
    space.start()
    space.runs.evaluate("baseline:length", list(SUBSETS), 1, 0, visitor="1.2.3.4")
    space.runs.evaluate("baseline:random", list(SUBSETS), 1, 0, visitor="1.2.3.4")
    _plan, again = space.runs.evaluate("baseline:length", list(SUBSETS), 1, 0, visitor="1.2.3.4")
    assert again["reused"]  # served from the store: not counted
    with pytest.raises(
        UserError, match=r"you started 2 runs in the last 60 minutes, this Space's limit; try again in 60"
    ):
        space.runs.evaluate("baseline:length", list(SUBSETS), 2, 0, visitor="1.2.3.4")
    space.runs.evaluate("baseline:length", list(SUBSETS), 2, 0, visitor="5.6.7.8")  # another visitor
    assert len(list(space.results_dir.rglob("results.json"))) == 3


def test_uploads_are_refused_over_the_size_limit(space):
    import urllib.error
    import urllib.request

    boundary = "prbench-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="big.bin"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + b"x" * 50_000
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        space["url"] + "/gradio_api/upload",
        data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code in (400, 413)
    assert not list(space["root"].rglob("big.bin"))


def test_results_store_commits_finished_runs_before_reporting(tmp_path, monkeypatch):
    import huggingface_hub

    restored = []
    monkeypatch.setattr(huggingface_hub, "CommitScheduler", _FakeScheduler)
    monkeypatch.setattr(
        huggingface_hub, "snapshot_download", lambda repo, **kw: restored.append((repo, kw["local_dir"]))
    )
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
    capped = {"id": str(tiny), "type": "classifier", "max_length": 1000}
    space = _context(tmp_path, [{"id": "baseline:length", "type": "baseline"}, capped])
    calls = []

    def gpu_runner(config, model_id, prepared, seconds):
        calls.append(seconds)
        return space.runs.execute(config, model_id, prepared)

    _plan, first = space.runs.evaluate(str(tiny), list(SUBSETS), 1, 0, gpu_runner=gpu_runner)
    _plan, again = space.runs.evaluate(str(tiny), list(SUBSETS), 1, 0, gpu_runner=gpu_runner)
    assert len(calls) == 1 and calls[0] >= 10
    assert not first["reused"] and again["reused"]
    assert again["results"]["accuracy"] == first["results"]["accuracy"] and again["records"] == first["records"]
    # the store finds the run in the engine's folder, whose name ends in the hash of the run's identity
    run_dir = Path(first["run_dir"])
    assert again["run_dir"] == first["run_dir"]
    assert run_dir.name.endswith("-" + identity_digest(json.loads((run_dir / "run.json").read_text())))
    assert first["results"]["protocol"]["max_length"] == 1000  # the allowlist's cap is applied and recorded
    assert space.scorers.loads == 1  # loaded once, reused for the lookup and the run
    result = space.tries.try_pair(
        str(tiny),
        "q?",
        "",
        "yes",
        "no",
        gpu_runner=lambda model_id, item, seconds: space.tries.score_item(model_id, item),
    )
    assert space.scorers.loads == 1 and result["preferred"] in ("A", "B", "tie")


def test_the_gpu_function_only_scores_items_prepared_outside_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PRBENCH_CACHE", str(tmp_path / "cache"))
    tiny = build_tiny_reward_model(tmp_path / "tiny-rm")
    space = _context(tmp_path, [{"id": str(tiny), "type": "classifier"}])
    space.start()
    space.data.retriever()  # built once, as the first explore or run would
    received = []

    def forbidden(*_args, **_kwargs):
        raise AssertionError("data loaded or ranker built again")

    def gpu_runner(config, model_id, prepared, seconds):
        received.append(prepared)
        monkeypatch.setattr(engine, "load_source", forbidden)
        monkeypatch.setattr("personalized_rewardbench.data.ranking_cache.make_retriever", forbidden)
        return space.runs.execute(config, model_id, prepared)

    monkeypatch.setattr("personalized_rewardbench.space.data.load_source", forbidden)
    monkeypatch.setattr("personalized_rewardbench.space.data.make_retriever", forbidden)
    plan, payload = space.runs.evaluate(str(tiny), list(SUBSETS), 2, 1, gpu_runner=gpu_runner)
    (prepared,) = received
    assert prepared.source.rows == {} and [item.id for item in prepared.items] == [item.id for item in plan.data.items]
    assert payload["results"]["protocol"]["retriever"] == "minilm" and payload["results"]["num_pairs"] == 2 * len(
        SUBSETS
    )
    monkeypatch.undo()
    # the same run through the CLI path (the engine loads the data itself) gives the same records
    cli_outcome = run_evaluation(replace(plan.config, output=tmp_path / "cli"), log=lambda _m: None)
    assert [(r["id"], r["chosen_score"]) for r in cli_outcome.records] == [
        (r["id"], r["chosen_score"]) for r in payload["records"]
    ]


def test_refresh_pulls_new_runs_from_the_results_repo_at_most_once_per_interval(tmp_path, monkeypatch):
    import huggingface_hub

    pulls = []

    def snapshot_download(repo, **kwargs):
        pulls.append(repo)
        if len(pulls) == 2:  # a run committed by another replica since start-up
            _fake_results(Path(kwargs["local_dir"]), "from-the-hub", 0.7)

    monkeypatch.setattr(huggingface_hub, "CommitScheduler", _FakeScheduler)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    models = [{"id": "baseline:length", "type": "baseline"}]
    space = _context(tmp_path, models, results_repo="me/results", token=SECRET, resync_seconds=3600)
    space.start()
    assert pulls == ["me/results"] and leaderboard_rows(space.results_dir) == []
    assert space.refresh() is None and pulls == ["me/results"]  # not due yet: no network call
    space.store.resync_seconds = 0
    assert space.refresh() is None and len(pulls) == 2
    assert [row["model"] for row in leaderboard_rows(space.results_dir)] == ["from-the-hub"]

    def offline(repo, **kwargs):
        raise OSError("unreachable")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    assert "cannot restore stored results from me/results (OSError)" in space.refresh()
    (tmp_path / "local").mkdir()
    local = _context(tmp_path / "local", models)
    local.start()
    assert local.refresh() is None  # no results repo: nothing to pull


def test_pairwise_judge_views_show_both_verdicts(tmp_path, monkeypatch):
    monkeypatch.setenv("PRBENCH_CACHE", str(tmp_path / "cache"))
    judge = build_tiny_causal_lm(tmp_path / "tiny-judge")
    space = _context(tmp_path, [{"id": str(judge), "type": "judge-pairwise", "dtype": "float32", "max_length": 1024}])
    space.start()
    plan, payload = space.runs.evaluate(str(judge), list(SUBSETS), 1, 0)
    results, records = payload["results"], payload["records"]
    pairs = len(SUBSETS)
    assert results["num_pairs"] == pairs and results.get("num_verdicts") == 2 * pairs
    # the per-order counts the views show add up to the reported accuracy (over 2N verdicts)
    assert sum(orders_right(r) for r in records) / (2 * pairs) == pytest.approx(results["accuracy"])
    summary = summary_markdown(results, False, [])
    assert f"accuracy over {2 * pairs} verdicts" in summary and f"{pairs} pairs, each judged twice" in summary
    assert "chosen shown first" in summary
    assert ("at the pair level" if results.get("ci95_unit") == "pairs" else "verdicts as independent") in summary
    table = subset_frame(results)
    assert list(table.columns) == ["subset", "pairs", "verdicts", "no verdict", "accuracy (%)", "95% CI"]
    assert list(table["verdicts"])[:pairs] == [2] * pairs
    margins, _width, label = margin_frame(records)
    assert len(margins) == 2 * pairs and label.startswith("Judge margins")
    assert sorted(margins["margin"]) == sorted(r[f"margin_chosen_{o}"] for r in records for o in ("first", "second"))
    worst = worst_pairs_frame(records, plan.data.items)
    wrong = [r for r in records if orders_right(r) < 2]
    assert len(worst) == len(wrong) and "margin" not in worst.columns
    for _, row in worst.iterrows():
        record = next(r for r in records if r["id"] == row["id"])
        assert (
            row["chosen shown first"] == verdict_text(record, "first")
            and row["orders right"] == f"{orders_right(record)} of 2"
        )

    first = records[0]
    stored = stored_scores_frame(space.results_dir, space.source(), first["id"])
    (judge_row,) = stored.to_dict("records")
    assert judge_row["correct"] == f"{orders_right(first)} of 2 orders"
    assert judge_row["chosen shown second"] == verdict_text(first, "second") and pd_missing(judge_row["chosen score"])

    tried = space.tries.try_pair(str(judge), "Which book next?", "I loved Solaris.", "Roadside Picnic.", "Dune.")
    assert tried["score_a"] is None and [o["order"] for o in tried["orders"]] == ["A shown first", "B shown first"]
    for order in tried["orders"]:
        assert order["prefers"] in ("A", "B", None) and isinstance(order["margin_for_a"], float)
    text = try_markdown(tried)
    assert "0.0000" not in text and "| A shown first |" in text and "| B shown first |" in text
    assert f"{tried['orders'][0]['margin_for_a']:+.4f}" in text


def pd_missing(value) -> bool:
    import pandas as pd

    return value is None or pd.isna(value)
