"""A real crash: `prbench evaluate` killed with SIGKILL mid-run, then the same command finishes the job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from transformers import LlamaForSequenceClassification

from personalized_rewardbench.testing.tiny_models import llama_config, make_tokenizer


def _slow_enough_model(folder: Path) -> Path:
    tokenizer = make_tokenizer()
    config = llama_config(tokenizer, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_labels=1)
    LlamaForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _command(model: Path, output: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "personalized_rewardbench",
        "evaluate",
        "--model",
        str(model),
        "--data",
        "sample",
        "--profile-k",
        "10",
        "--retriever",
        "bm25",
        "--batch-tokens",
        "1024",
        "--output",
        str(output),
        "--no-progress",
    ]


def test_kill_9_then_rerun_equals_an_uninterrupted_run(tmp_path):
    model = _slow_enough_model(tmp_path / "rm")
    env = {**os.environ, "PRBENCH_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    subprocess.run(_command(model, tmp_path / "clean"), env=env, check=True, capture_output=True)

    process = subprocess.Popen(
        _command(model, tmp_path / "killed"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    partial: list[Path] = []
    while time.monotonic() < deadline and process.poll() is None:
        partial = list((tmp_path / "killed").rglob("scores.partial/rank-0.jsonl"))
        if partial and len(partial[0].read_text().splitlines()) >= 2:
            break
        time.sleep(0.005)
    assert process.poll() is None, "the run finished before it could be killed; make the test model slower"
    process.send_signal(signal.SIGKILL)
    process.wait()
    lines_at_kill = len(partial[0].read_bytes().splitlines())
    [run_dir] = [p.parent.parent for p in partial]
    assert not (run_dir / "results.json").exists() and 2 <= lines_at_kill < 24
    # The kill tears the last line only by chance: tear it for certain, mid-record, as a kill mid-write does.
    data = partial[0].read_bytes()
    whole = data[: data.rfind(b"\n") + 1]
    partial[0].write_bytes(whole + whole.splitlines(keepends=True)[-1][:37])
    assert not partial[0].read_bytes().endswith(b"\n")

    subprocess.run(_command(model, tmp_path / "killed"), env=env, check=True, capture_output=True)
    [clean_dir] = [p.parent for p in (tmp_path / "clean").rglob("results.json")]
    assert (run_dir / "scores.jsonl").read_text() == (clean_dir / "scores.jsonl").read_text()
    ids = [json.loads(line)["id"] for line in (run_dir / "scores.jsonl").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 24
    strip = lambda path: {k: v for k, v in json.loads(path.read_text()).items() if k not in ("runtime", "created_at")}  # noqa: E731
    assert strip(run_dir / "results.json") == strip(clean_dir / "results.json")
    assert json.loads((run_dir / "results.json").read_text())["runtime"]["pairs_scored"] < 24


def test_a_torn_last_line_is_cut_at_every_byte_position(tmp_path):
    """Deterministic torn-line repair: a log cut anywhere inside its last record (mid-number, mid-key,
    inside a multi-byte character) loads as the records before it, and the file is cut back to them."""
    from personalized_rewardbench.runs.score_log import ScoreLog

    records = [
        {"id": "0_0_0", "subset": "Art_and_Entertainment", "chosen_score": 0.25, "rejected_score": -1.5},
        {"id": "0_0_1", "subset": "Art_and_Entertainment", "chosen_score": 1e-7, "rejected_score": 2.0, "note": "é—✓"},
    ]
    path = tmp_path / "rank-0.jsonl"
    ScoreLog(path).append(records)
    data = path.read_bytes()
    first_end = data.index(b"\n") + 1
    for cut in range(first_end, len(data)):  # every length that tears the second record (or drops its newline)
        path.write_bytes(data[:cut])
        log = ScoreLog(path)
        assert log.load() == {"0_0_0": records[0]}, cut
        assert path.read_bytes() == data[:first_end], cut
        assert log.notices == []  # a torn tail is the normal result of a kill: repaired silently
    path.write_bytes(data)
    assert ScoreLog(path).load() == {r["id"]: r for r in records}
