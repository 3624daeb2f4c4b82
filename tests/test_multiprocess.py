"""Multi-process runs: `accelerate launch` with 2 CPU processes (gloo) writes what one process writes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from personalized_rewardbench.runs.distributed import single_launch_notice
from personalized_rewardbench.testing.tiny_models import build_tiny_reward_model

pytest.importorskip("accelerate")


def _accelerate() -> str:
    local = Path(sys.executable).parent / "accelerate"
    found = str(local) if local.is_file() else shutil.which("accelerate")
    if found is None:
        pytest.skip("the accelerate command is not installed")
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run_dir(out: Path) -> Path:
    [results] = list(out.rglob("results.json"))
    return results.parent


def test_two_processes_write_what_one_process_writes(tmp_path):
    model = build_tiny_reward_model(tmp_path / "tiny-rm")
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf-home"),
        "PRBENCH_CACHE": str(tmp_path / "cache"),
        "TOKENIZERS_PARALLELISM": "false",
        # the launcher gives each process one thread; the one-process run gets the same, since bitwise-equal
        # floats across thread counts are not something torch promises (the batches are the same either way)
        "OMP_NUM_THREADS": "1",
    }
    evaluate = [
        "-m", "personalized_rewardbench", "evaluate", "--model", str(model), "--data", "sample", "--limit", "3",
        "--profile-k", "2", "--retriever", "bm25", "--batch-tokens", "700", "--device", "cpu", "--no-progress",
    ]  # fmt: skip
    # accelerate's --cpu starts one process without MPI; --multi_gpu starts N torch.distributed processes,
    # and on a machine without CUDA they use gloo on the CPU
    launch = [
        _accelerate(), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(_free_port()),
    ]  # fmt: skip
    multi = subprocess.run(
        [*launch, *evaluate, "--output", str(tmp_path / "two")], env=env, capture_output=True, text=True, timeout=240
    )
    assert multi.returncode == 0, multi.stderr[-3000:]
    single = subprocess.run(
        [sys.executable, *evaluate, "--output", str(tmp_path / "one")],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert single.returncode == 0, single.stderr[-3000:]

    one, two = _run_dir(tmp_path / "one"), _run_dir(tmp_path / "two")
    assert (two / "scores.jsonl").read_text() == (one / "scores.jsonl").read_text()
    assert len((one / "scores.jsonl").read_text().splitlines()) == 9
    results_one, results_two = (json.loads((d / "results.json").read_text()) for d in (one, two))
    strip = lambda r: {k: v for k, v in r.items() if k not in ("runtime", "created_at")}  # noqa: E731
    assert strip(results_two) == strip(results_one)
    runtime = results_two["runtime"]
    assert runtime["processes"] == 2 and results_one["runtime"]["processes"] == 1
    assert runtime["batches"] >= 4 and runtime["pairs_scored"] == 9  # the whole run, all ranks together
    assert runtime["padding_fraction"] == results_one["runtime"]["padding_fraction"]  # a figure of the whole plan
    assert not (two / "scores.partial").exists()
    assert multi.stdout.count("results.json") == 1  # only rank 0 reports


def test_a_launch_that_started_one_process_is_noticed(tmp_path):
    env = {
        **os.environ,
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_HUB_OFFLINE": "1",
        "PRBENCH_CACHE": str(tmp_path / "cache"),
    }
    env.pop("WORLD_SIZE", None)
    launch = [
        _accelerate(),
        "launch",
        "--cpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
    ]
    done = subprocess.run(
        [*launch, "--main_process_port", str(_free_port()), "-m", "personalized_rewardbench", "evaluate",
         "--model", "baseline:length", "--data", "sample", "--limit", "1", "--output", str(tmp_path / "out"),
         "--no-progress"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "accelerate started one process" in done.stderr and "--multi_gpu --num_processes N" in done.stderr
    assert single_launch_notice({"ACCELERATE_USE_CPU": "False", "MASTER_ADDR": "127.0.0.1", "WORLD_SIZE": "2"}) is None
    assert single_launch_notice({}) is None
