"""Issue 11, class 5: one run folder, one writer; full disks; runs that fail before scoring.

- a second run of a folder another run is writing stops with one line naming that run's pid;
- a finished run leaves no partial log, no lock file and no temp file, and a later run removes
  `.NAME.tmp-PID` files that an interrupted atomic write left;
- a write that fails for lack of space names the file (real ENOSPC from /dev/full, real EFBIG from
  RLIMIT_FSIZE in a child process), and the same command finishes the run once there is room;
- a run that fails before its first score leaves no folder behind.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from error_lines import one_error
from transformers import LlamaForSequenceClassification

from personalized_rewardbench.cli import main
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.run_lock import RunLock
from personalized_rewardbench.runs.score_log import write_json_atomic, write_jsonl_atomic
from personalized_rewardbench.testing.tiny_models import build_tiny_reward_model, llama_config, make_tokenizer

BASELINE = ["--model", "baseline:length", "--data", "sample", "--limit", "2"]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "personalized_rewardbench", "evaluate", "--no-progress", *args]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PRBENCH_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert one_error(err) and "Traceback" not in err and err.startswith("prbench: error: "), err
    return err


@pytest.fixture(scope="module")
def slow_rm(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("models") / "slow-rm"
    tokenizer = make_tokenizer()
    config = llama_config(tokenizer, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_labels=1)
    LlamaForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_second_run_of_a_busy_folder_names_the_holder_and_the_first_finishes_clean(slow_rm, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["--model", str(slow_rm), "--data", "sample", "--profile-k", "10", "--retriever", "bm25"]
    first = subprocess.Popen(
        _cli(*args, "--batch-tokens", "1024", "--output", str(out)),
        env=_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and first.poll() is None and not list(out.rglob("scores.partial/rank-0.jsonl")):
        time.sleep(0.01)
    assert first.poll() is None, "the first run ended before the second started; make the model slower"
    [lock] = list(out.rglob(".lock"))
    assert lock.read_text().strip() == str(first.pid)

    again = ["evaluate", *args, "--batch-tokens", "1024", "--output", str(out), "--no-progress"]
    code = main([*again, "--cache-dir", str(tmp_path / "c")])
    err = _one_line(capsys)
    assert code == 2 and f"{lock.parent} is in use by another prbench run (pid {first.pid})" in err

    assert first.wait(timeout=300) == 0, first.stderr.read().decode()
    assert _files(lock.parent) == ["results.json", "run.json", "scores.jsonl"]  # no partials, no lock
    assert len((lock.parent / "scores.jsonl").read_text().splitlines()) == 24
    assert main(["evaluate", *args, "--batch-tokens", "1024", "--output", str(out), "--no-progress"]) == 0
    assert "already complete" in capsys.readouterr().out


def test_a_waiting_lock_gets_the_folder_once_the_holder_leaves(tmp_path):
    run_dir = tmp_path / "out" / "model" / "run"
    holder = RunLock(run_dir)
    holder.acquire(wait=False)
    with pytest.raises(UserError, match=rf"in use by another prbench run \(pid {os.getpid()}\)"):
        RunLock(run_dir).acquire(wait=False)
    got: list[float] = []
    waiter = RunLock(run_dir)
    thread = threading.Thread(target=lambda: (waiter.acquire(wait=True), got.append(time.monotonic())))
    thread.start()
    time.sleep(0.3)
    assert not got
    released = time.monotonic()
    holder.release(remove_if_only=())  # the holder even removes the (empty) folder: the waiter recreates it
    thread.join(timeout=10)
    assert got and got[0] >= released
    assert (run_dir / ".lock").read_text().strip() == str(os.getpid())
    waiter.release()  # a run folder it wrote into stays
    assert run_dir.is_dir() and not (run_dir / ".lock").exists()
    third = RunLock(run_dir)
    third.acquire(wait=False)
    third.release(remove_if_only=())  # a folder this lock did not create is never removed
    assert run_dir.is_dir()


def test_a_finished_run_removes_stale_temp_files_and_partial_logs(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["evaluate", *BASELINE, "--output", str(out), "--no-progress"]) == 0
    [run_dir] = [p.parent for p in out.rglob("results.json")]
    clean = (run_dir / "scores.jsonl").read_bytes()
    for name in (".scores.jsonl.tmp-99999", ".results.json.tmp-4242", ".run.json.tmp-1"):
        (run_dir / name).write_text("half a fil")
    (run_dir / "scores.partial").mkdir()
    (run_dir / "scores.partial" / "rank-0.jsonl").write_bytes(clean[:50])  # left by a crash after the outputs
    (run_dir / ".lock").write_text("12345\n")  # left by a killed run: the kernel lock is gone with it
    assert main(["evaluate", *BASELINE, "--output", str(out), "--no-progress"]) == 0
    assert _files(run_dir) == ["results.json", "run.json", "scores.jsonl"]
    (run_dir / "results.json").unlink()  # an unfinished run with stale temp files: finished and cleaned
    (run_dir / ".scores.jsonl.tmp-77").write_text("x")
    assert main(["evaluate", *BASELINE, "--output", str(out), "--no-progress"]) == 0
    assert _files(run_dir) == ["results.json", "run.json", "scores.jsonl"]
    assert (run_dir / "scores.jsonl").read_bytes() == clean


@pytest.mark.parametrize("writer", ["json", "jsonl"])
def test_an_atomic_write_to_a_full_disk_names_the_file_and_leaves_nothing(tmp_path, writer):
    target = tmp_path / ("results.json" if writer == "json" else "scores.jsonl")
    target.write_text("the old content\n")
    temporary = tmp_path / f".{target.name}.tmp-{os.getpid()}"
    temporary.symlink_to("/dev/full")  # every write to it fails with ENOSPC, as on a full disk
    with pytest.raises(UserError) as caught:
        if writer == "json":
            write_json_atomic(target, {"accuracy": 0.5, "padding": "x" * 10_000})
        else:
            write_jsonl_atomic(target, [{"id": str(i), "pad": "x" * 100} for i in range(200)])
    assert str(caught.value) == f"{target}: cannot write (No space left on device)"
    assert target.read_text() == "the old content\n"
    assert _files(tmp_path) == [target.name]
    assert os.path.exists("/dev/full")


def test_a_full_disk_while_logging_scores_names_the_log_and_the_rerun_finishes(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["evaluate", *BASELINE, "--output", str(out), "--no-progress"]) == 0
    [run_dir] = [p.parent for p in out.rglob("results.json")]
    clean = (run_dir / "scores.jsonl").read_bytes()
    (run_dir / "results.json").unlink()
    (run_dir / "scores.jsonl").unlink()
    log = run_dir / "scores.partial" / "rank-0.jsonl"
    log.parent.mkdir()
    log.symlink_to("/dev/full")
    assert main(["evaluate", *BASELINE, "--output", str(out), "--no-progress"]) == 2
    assert _one_line(capsys) == f"prbench: error: {log}: cannot write (No space left on device)"
    assert _files(run_dir) == ["run.json", "scores.partial/rank-0.jsonl"]  # no lock, no temp file
    log.unlink()  # room again
    assert main(["evaluate", *BASELINE, "--output", str(out), "--no-progress"]) == 0
    assert (run_dir / "scores.jsonl").read_bytes() == clean
    assert _files(run_dir) == ["results.json", "run.json", "scores.jsonl"]


def _file_size_limit(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_file_size_limit_hit_on_results_json_names_it_and_a_rerun_finishes(tmp_path):
    out = tmp_path / "out"
    env = _env(tmp_path)
    clean = subprocess.run(_cli(*BASELINE, "--output", str(tmp_path / "clean")), env=env, capture_output=True)
    assert clean.returncode == 0
    [clean_dir] = [p.parent for p in (tmp_path / "clean").rglob("results.json")]
    limit = (clean_dir / "scores.jsonl").stat().st_size + 16  # results.json is larger: its write fails
    assert (clean_dir / "results.json").stat().st_size > limit > (clean_dir / "run.json").stat().st_size
    failed = subprocess.run(
        _cli(*BASELINE, "--output", str(out)), env=env, capture_output=True, preexec_fn=_file_size_limit(limit)
    )
    err = failed.stderr.decode().strip()
    [run_dir] = [p.parent for p in out.rglob("run.json")]
    assert failed.returncode == 2 and one_error(err)
    assert err == f"prbench: error: {run_dir / 'results.json'}: cannot write (File too large)"
    assert _files(run_dir) == ["run.json", "scores.jsonl", "scores.partial/rank-0.jsonl"]
    again = subprocess.run(_cli(*BASELINE, "--output", str(out)), env=env, capture_output=True)
    assert again.returncode == 0, again.stderr.decode()
    assert (run_dir / "scores.jsonl").read_bytes() == (clean_dir / "scores.jsonl").read_bytes()
    assert _files(run_dir) == ["results.json", "run.json", "scores.jsonl"]


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory) -> Path:
    return build_tiny_reward_model(tmp_path_factory.mktemp("models") / "tiny-rm")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-length", "16"], "over the max length of 16 tokens"),
        (["--max-length", "16", "--profile-k", "3", "--retriever", "bm25"], "over the max length of 16 tokens"),
        (["--max-length", "16", "--subset", "Society_and_Culture"], "over the max length of 16 tokens"),
        (["--max-length", "16", "--no-shared-prefix"], "over the max length of 16 tokens"),
    ],
)
def test_a_run_that_fails_before_scoring_leaves_no_folder(tiny_rm, tmp_path, capsys, args, message):
    out = tmp_path / "out"
    code = main(["evaluate", "--model", str(tiny_rm), "--data", "sample", "--output", str(out), "--no-progress", *args])
    assert code == 2 and message in _one_line(capsys)
    assert not out.exists()


def test_a_failed_run_keeps_a_folder_it_did_not_create_and_scores_it_made(tiny_rm, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    base = ["evaluate", "--model", str(tiny_rm), "--data", "sample", "--output", str(out), "--no-progress"]
    assert main([*base, "--max-length", "16"]) == 2
    capsys.readouterr()
    assert _files(out) == ["mine.txt"]
    assert main([*base, "--limit", "1"]) == 0
    [run_dir] = [p.parent for p in out.rglob("results.json")]
    assert json.loads((run_dir / "results.json").read_text())["num_pairs"] == 3
