"""A real crash in each Best-of-N step: `bon generate`, `bon score` and `bon judge` killed with SIGKILL
mid-run, then the same command finishes the job with output identical to an uninterrupted run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from transformers import LlamaForCausalLM, LlamaForSequenceClassification

from personalized_rewardbench.testing.tiny_models import llama_config, make_tokenizer

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _slow_model(folder: Path, head) -> Path:
    tokenizer = make_tokenizer()
    extra = {"num_labels": 1} if head is LlamaForSequenceClassification else {}
    head(llama_config(tokenizer, hidden_size=256, intermediate_size=512, num_hidden_layers=4, **extra)).save_pretrained(
        folder
    )
    tokenizer.save_pretrained(folder)
    return folder


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "personalized_rewardbench", *args, "--no-progress"]


def _generate(policy: Path, output: Path) -> list[str]:
    return _cli(
        "bon", "generate", "--policy", str(policy), "--n", "2", "--profile-k", "2", "--data", "sample",
        "--limit", "4", "--retriever", "bm25", "--max-new-tokens", "10", "--batch-size", "2", "--device", "cpu",
        "--cache-dir", str(output.parent / "cache"), "--output", str(output),
    )  # fmt: skip


def _kill_when(command: list[str], partial_glob: str, root: Path) -> Path:
    """Start `command`, SIGKILL it once its partial log under `root` holds 2 records; return that log."""
    process = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    found: list[Path] = []
    while time.monotonic() < deadline and process.poll() is None:
        found = list(root.glob(partial_glob))
        if found and len(found[0].read_bytes().splitlines()) >= 2:
            break
        time.sleep(0.005)
    assert process.poll() is None, "the step finished before it could be killed; make the test model slower"
    process.send_signal(signal.SIGKILL)
    process.wait()
    return found[0]


def _copy_candidates(source: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    for name in ("run.json", "candidates.jsonl"):
        shutil.copy(source / name, target / name)
    return target


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("slow")
    return {
        "lm": _slow_model(root / "lm", LlamaForCausalLM),
        "rm": _slow_model(root / "rm", LlamaForSequenceClassification),
    }


@pytest.fixture(scope="module")
def clean_candidates(models, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("clean") / "cands"
    subprocess.run(_generate(models["lm"], output), env=ENV, check=True, capture_output=True)
    return output


def test_generate_killed_then_rerun_equals_an_uninterrupted_run(models, clean_candidates, tmp_path):
    killed = tmp_path / "cands"
    log = _kill_when(_generate(models["lm"], killed), "candidates.partial/rank-0.jsonl", killed)
    assert not (killed / "candidates.jsonl").exists() and 2 <= len(log.read_bytes().splitlines()) < 12
    subprocess.run(_generate(models["lm"], killed), env=ENV, check=True, capture_output=True)
    assert (killed / "candidates.jsonl").read_bytes() == (clean_candidates / "candidates.jsonl").read_bytes()
    assert not (killed / "candidates.partial").exists()


def test_score_killed_then_rerun_equals_an_uninterrupted_run(models, clean_candidates, tmp_path):
    def command(folder: Path) -> list[str]:
        return _cli(
            "bon", "score", "--model", str(models["rm"]), "--candidates", str(folder), "--profile-k", "2",
            "--retriever", "bm25", "--groups-per-batch", "1", "--device", "cpu",
            "--cache-dir", str(tmp_path / "cache"),
        )  # fmt: skip

    clean, killed = (
        _copy_candidates(clean_candidates, tmp_path / "a"),
        _copy_candidates(clean_candidates, tmp_path / "b"),
    )
    subprocess.run(command(clean), env=ENV, check=True, capture_output=True)
    log = _kill_when(command(killed), "scores/*/scores.partial/rank-0.jsonl", killed)
    assert 2 <= len(log.read_bytes().splitlines()) < 12
    subprocess.run(command(killed), env=ENV, check=True, capture_output=True)
    [clean_scores] = clean.glob("scores/*/scores.jsonl")
    [killed_scores] = killed.glob("scores/*/scores.jsonl")
    assert clean_scores.parent.name == killed_scores.parent.name
    assert killed_scores.read_bytes() == clean_scores.read_bytes()
    assert len(killed_scores.read_text().splitlines()) == 12


def test_judge_killed_then_rerun_equals_an_uninterrupted_run(models, clean_candidates, tmp_path):
    def command(folder: Path) -> list[str]:
        return _cli(
            "bon", "judge", "--judge", str(models["lm"]), "--candidates", str(folder), "--batch-size", "1",
            "--max-new-tokens", "6", "--device", "cpu",
        )  # fmt: skip

    clean, killed = (
        _copy_candidates(clean_candidates, tmp_path / "a"),
        _copy_candidates(clean_candidates, tmp_path / "b"),
    )
    subprocess.run(command(clean), env=ENV, check=True, capture_output=True)
    log = _kill_when(command(killed), "judge/*/judgments.partial/rank-0.jsonl", killed)
    assert 2 <= len(log.read_bytes().splitlines()) < 24
    done = subprocess.run(command(killed), env=ENV, check=True, capture_output=True, text=True)
    [clean_judged] = clean.glob("judge/*/judgments.jsonl")
    [killed_judged] = killed.glob("judge/*/judgments.jsonl")
    assert killed_judged.read_bytes() == clean_judged.read_bytes()
    unique = {json.loads(line)["id"] for line in killed_judged.read_text().splitlines()}
    assert len(unique) == len(killed_judged.read_text().splitlines())
    judged_in_rerun = int(done.stdout.split("(")[1].split(" in this run")[0])
    assert judged_in_rerun < len(unique)  # the rerun judged only what the killed run had not
