"""Start `python space/app.py` on 127.0.0.1 for the Space tests, and run the CLI the same way a user would."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
APP = REPO / "space" / "app.py"
STARTUP_SECONDS = 150


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def running_space(workdir: Path, script: Path = APP, **env: str):
    """Yield the URL of a Space (`script`, by default space/app.py) started in `workdir` with `env` added;
    its log is `workdir/space.log`. The Space runs in a process group of its own, and the whole group is
    stopped at the end: on ZeroGPU the Space forks GPU workers that would outlive it."""
    port = free_port()
    environment = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1", **env}
    log_path = workdir / "space.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, str(script)],
            cwd=workdir,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the Space exited with {process.returncode}:\n{log_path.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(url + "/", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the Space did not answer within {STARTUP_SECONDS} s:\n{log_path.read_text()[-4000:]}"
                )
            time.sleep(0.5)
        yield url
    finally:
        _stop_group(process)


def _stop_group(process: subprocess.Popen) -> None:
    """SIGTERM to the process and what it forked, SIGKILL to whatever is left after 20 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        if sig == signal.SIGTERM:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
    process.wait()


def cli_results(output: Path, model: str, limit: int, profile_k: int) -> dict:
    """Run `prbench evaluate` on the sample in this process; return its results.json."""
    from personalized_rewardbench.cli import main

    args = ["evaluate", "--model", model, "--data", "sample", "--limit", str(limit), "--profile-k", str(profile_k)]
    assert main([*args, "--output", str(output), "--no-progress"]) == 0
    (path,) = output.rglob("results.json")
    return json.loads(path.read_text(encoding="utf-8"))
