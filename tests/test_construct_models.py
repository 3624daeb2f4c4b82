"""`prbench construct` on real tiny models: end to end, through an OpenAI-compatible server, and after kill -9.

Tiny random models write gibberish, so the judge never gives well-formed ratings: the pairs that pass
the text rules are dropped as `judge_unparsable` (never defaulted). What these tests hold is the
machinery: seeds, prompts, token counts, every record, resume and the server backend.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from chat_server import make_app, serving
from construct_fixtures import write_lamp_qa_folder
from transformers import AutoTokenizer, LlamaForCausalLM

from personalized_rewardbench.cli import main
from personalized_rewardbench.construct.verify import VerifyConfig, rule_check
from personalized_rewardbench.data.sources import load_source
from personalized_rewardbench.downstream.generation import Sampling, TransformersGenerator, sample_seed
from personalized_rewardbench.downstream.rubric_judge import parse_ratings
from personalized_rewardbench.testing.tiny_models import build_tiny_causal_lm, llama_config, make_tokenizer

#: A wide length band, so that some gibberish pairs pass the text rules and reach the judge.
WIDE = ["--min-length-ratio", "0.2", "--max-length-ratio", "5"]


@pytest.fixture(scope="module")
def lm(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("lm") / "lm", seed=5)


@pytest.fixture(scope="module")
def lamp(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("lamp")
    write_lamp_qa_folder(folder, split="train", limit=2)
    return folder


def _args(source: Path, out: Path, generator: str, *extra: str) -> list[str]:
    return [
        "construct", "--source", str(source), "--split", "train", "--generator", generator, "--out", str(out),
        "--profile-k", "2", "--retriever", "bm25", "--max-new-tokens", "16", "--judge-max-new-tokens", "8",
        "--device", "cpu", "--dtype", "float32", "--no-progress", *WIDE, *extra,
    ]  # fmt: skip


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def local_run(lm, lamp, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local") / "out"
    assert main(_args(lamp, out, str(lm), "--cache-dir", str(out.parent / "cache"))) == 0
    return out


def test_tiny_generator_and_judge_end_to_end(local_run, lm, lamp, capsys):
    summary = json.loads((local_run / "construct.json").read_text())
    generations, verdicts = _lines(local_run / "generations.jsonl"), _lines(local_run / "verdicts.jsonl")
    judgments = _lines(local_run / "judgments.jsonl")
    assert [g["id"] for g in generations] == [v["id"] for v in verdicts] == [
        "0_0_0", "0_0_1", "1_0_0", "1_0_1", "2_0_0", "2_0_1",
    ]  # fmt: skip
    assert all(g["chosen"] and g["rejected"] and g["chosen"] != g["rejected"] for g in generations)
    # token counts are the model's own tokenizer's
    tokenizer = AutoTokenizer.from_pretrained(lm)
    count = lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    assert all(g["tokens"] == [count(g["chosen"]), count(g["rejected"])] for g in generations)
    assert summary["cost"]["unit"] == {"generated": "tokens", "judged": "tokens"}
    assert summary["cost"]["generated"] == sum(sum(g["tokens"]) for g in generations)
    assert summary["cost"]["judged"] == sum(sum(j["tokens"]) for j in judgments) > 0
    # the text rules, recomputed from the stored answers, decide which pairs the judge saw
    rows = {
        row["id"]: row for rows in load_source(str(lamp), split="train", paired=False).rows.values() for row in rows
    }
    rules = VerifyConfig(min_length_ratio=0.2, max_length_ratio=5)
    survivors = []
    for g, verdict in zip(generations, verdicts):
        shown = [rows[g["id"]]["question"], *(p["text"] for p in rows[g["id"]]["profile"])]
        failed, _ = rule_check(g["chosen"], g["rejected"], rows[g["id"]], shown, rules)
        assert verdict["reasons"][: len(failed)] == failed
        if not failed:
            survivors.append(g["id"])
    assert survivors and sorted(j["item_id"] for j in judgments) == sorted(survivors * 2)
    # judge outputs are parsed by the rubric judge's parser; gibberish is unparsable, never defaulted
    assert all(j["ratings"] == parse_ratings(j["output"], 3) for j in judgments)
    for verdict in verdicts:
        if verdict["id"] in survivors:
            assert verdict["reasons"] == ["judge_unparsable"] and verdict["margin"] is None
    assert summary["counts"]["kept"] == 0 and summary["counts"]["items"] == 6
    assert summary["generator"] == {
        "model": str(lm),
        "revision": summary["generator"]["revision"],
        "backend": "transformers",
    }
    assert summary["judge"]["model"] == str(lm) and summary["sampling"]["temperature"] == 0.7

    # a rerun of the same command loads everything and rewrites nothing
    before = {p: p.read_bytes() for p in local_run.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(_args(lamp, local_run, str(lm), "--cache-dir", str(local_run.parent / "cache"))) == 0
    assert "kept 0 of 6 items" in capsys.readouterr().out
    assert {p: p.read_bytes() for p in local_run.rglob("*") if p.is_file()} == before


def test_generator_and_judge_behind_an_openai_compatible_server(local_run, lm, lamp, tmp_path):
    model = TransformersGenerator(str(lm), device="cpu", dtype="float32")
    requests: list[dict] = []

    def respond(messages, body):
        sampling = Sampling(temperature=body["temperature"], top_p=body["top_p"], max_new_tokens=body["max_tokens"])
        return model.generate([messages], [body["seed"]], sampling)[0]

    with serving(make_app(respond, requests)) as url:
        assert (
            main(
                _args(
                    lamp,
                    tmp_path / "served",
                    str(lm),
                    "--base-url",
                    url,
                    "--concurrency",
                    "2",
                    "--cache-dir",
                    str(tmp_path),
                )
            )
            == 0
        )
    generations = _lines(tmp_path / "served" / "generations.jsonl")
    sampled = [body for body in requests if body["temperature"] > 0]
    judged = [body for body in requests if body["temperature"] == 0]
    assert {body["seed"] for body in sampled} == {sample_seed(42, g["id"], j) for g in generations for j in (0, 1)}
    assert len(sampled) == 12 and {body["max_tokens"] for body in sampled} == {16}
    assert len(judged) == len(_lines(tmp_path / "served" / "judgments.jsonl")) > 0
    assert {body["max_tokens"] for body in judged} == {8}
    assert all("Ratings: [r1, r2, ...]" in body["messages"][0]["content"] for body in judged)
    # the same model and seeds behind the server give the pairs of the local run
    local = _lines(local_run / "generations.jsonl")
    assert [(g["chosen"], g["rejected"]) for g in generations] == [(g["chosen"], g["rejected"]) for g in local]
    summary = json.loads((tmp_path / "served" / "construct.json").read_text())
    assert summary["generator"]["backend"] == "server" and summary["generator"]["revision"] == f"server:{url}"
    assert summary["cost"]["unit"]["generated"] == "tokens"  # the served name is a folder with a tokenizer


def _slow_lm(folder: Path) -> Path:
    tokenizer = make_tokenizer()
    config = llama_config(tokenizer, hidden_size=256, intermediate_size=512, num_hidden_layers=4)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_kill_9_mid_construction_then_rerun_equals_an_uninterrupted_run(tmp_path):
    lm = _slow_lm(tmp_path / "lm")
    write_lamp_qa_folder(tmp_path / "lamp", split="train", limit=4)
    env = {**os.environ, "PRBENCH_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}

    def command(out: Path) -> list[str]:
        args = _args(tmp_path / "lamp", out, str(lm), "--batch-size", "1", "--max-new-tokens", "24")
        return [sys.executable, "-m", "personalized_rewardbench", *args]

    subprocess.run(command(tmp_path / "clean"), env=env, check=True, capture_output=True)
    process = subprocess.Popen(
        command(tmp_path / "killed"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    partial = tmp_path / "killed" / "generations.partial" / "rank-0.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if partial.is_file() and len(partial.read_bytes().splitlines()) >= 2:
            break
        time.sleep(0.005)
    assert process.poll() is None, "the run finished before it could be killed; make the test model slower"
    process.send_signal(signal.SIGKILL)
    process.wait()
    lines_at_kill = len(partial.read_bytes().splitlines())
    assert 2 <= lines_at_kill < 12 and not (tmp_path / "killed" / "construct.json").exists()

    done = subprocess.run(command(tmp_path / "killed"), env=env, check=True, capture_output=True, text=True)
    assert "kept 0 of 12 items" in done.stdout
    clean = sorted(p.relative_to(tmp_path / "clean") for p in (tmp_path / "clean").rglob("*") if p.is_file())
    killed = sorted(p.relative_to(tmp_path / "killed") for p in (tmp_path / "killed").rglob("*") if p.is_file())
    assert clean == killed and Path("generations.jsonl") in clean and Path("judgments.jsonl") in clean
    for path in clean:
        assert (tmp_path / "killed" / path).read_bytes() == (tmp_path / "clean" / path).read_bytes(), path
