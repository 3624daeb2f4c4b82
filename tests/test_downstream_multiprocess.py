"""`bon generate` and `bon score` under `accelerate launch`, 2 CPU processes (gloo): what one process writes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_multiprocess import _accelerate, _free_port

from personalized_rewardbench.testing.tiny_models import build_tiny_causal_lm, build_tiny_reward_model

pytest.importorskip("accelerate")


def test_two_processes_generate_and_score_what_one_process_does(tmp_path):
    policy = build_tiny_causal_lm(tmp_path / "lm", seed=4)
    rm = build_tiny_reward_model(tmp_path / "rm", seed=1)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PRBENCH_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    launch = [
        _accelerate(), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(_free_port()),
    ]  # fmt: skip
    generate = [
        "-m", "personalized_rewardbench", "bon", "generate", "--policy", str(policy), "--n", "3", "--profile-k", "2",
        "--data", "sample", "--limit", "2", "--retriever", "bm25", "--max-new-tokens", "8", "--batch-size", "3",
        "--device", "cpu", "--no-progress",
    ]  # fmt: skip
    outputs = {}
    for name, prefix in (("two", launch), ("one", [sys.executable])):
        done = subprocess.run(
            [*prefix, *generate, "--output", str(tmp_path / name)], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        outputs[name] = done.stdout
    assert (tmp_path / "two" / "candidates.jsonl").read_bytes() == (tmp_path / "one" / "candidates.jsonl").read_bytes()
    assert len((tmp_path / "one" / "candidates.jsonl").read_text().splitlines()) == 6
    assert outputs["two"].count("candidates.jsonl") == 1  # only rank 0 reports
    assert not (tmp_path / "two" / "candidates.partial").exists()

    score = ["-m", "personalized_rewardbench", "bon", "score", "--model", str(rm), "--groups-per-batch", "1"]
    score += ["--device", "cpu", "--no-progress"]
    for name, prefix in (("two", [*launch[:-1], str(_free_port())]), ("one", [sys.executable])):
        done = subprocess.run(
            [*prefix, *score, "--candidates", str(tmp_path / name)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    [two] = (tmp_path / "two").glob("scores/*/scores.jsonl")
    [one] = (tmp_path / "one").glob("scores/*/scores.jsonl")
    assert two.read_bytes() == one.read_bytes() and len(one.read_text().splitlines()) == 6
    assert not any(Path(two.parent).glob("*.partial"))
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)
