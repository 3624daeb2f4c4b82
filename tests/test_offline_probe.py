"""Issue 11, class 8: with the Hub unreachable and HF_HUB_OFFLINE unset, the tools fail as fast as offline.

The "Hub" is a port on 127.0.0.1 (never any other address): a closed port (connection refused) or a
listening socket that never answers (a firewall that drops packets). Each command runs in a fresh
process, as a user would run it; its time is compared with the same failure under HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from error_lines import one_error

from personalized_rewardbench.runs.hub_probe import PROBE_TIMEOUT, hub_reachable, needs_hub


@pytest.fixture
def closed_port() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def silent_port() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)  # the kernel completes the handshake; nobody ever answers
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.fixture
def answering_port() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_probe_tells_an_answering_endpoint_from_closed_and_silent_ones(closed_port, silent_port, answering_port):
    assert hub_reachable(answering_port, timeout=5)  # any HTTP answer (here 501) counts
    started = time.monotonic()
    assert not hub_reachable(closed_port, timeout=5)
    assert time.monotonic() - started < 2
    started = time.monotonic()
    assert not hub_reachable(silent_port, timeout=0.5)
    assert 0.4 < time.monotonic() - started < 3


def test_only_runs_that_read_the_hub_probe_it(tmp_path):
    assert not needs_hub("sample", ["baseline:length"], "contriever", 0)
    assert not needs_hub(str(tmp_path), [str(tmp_path)], "bm25", 5)
    assert not needs_hub("sample", ["./my-model"], "minilm", 5)
    assert needs_hub("sample", ["baseline:length"], "contriever", 2)
    assert needs_hub("hub:me/data", ["baseline:length"], "bm25", 0)
    assert needs_hub("sample", ["someorg/some-rm"], "bm25", 0)


def _run(tmp_path: Path, endpoint: str | None, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
    }
    env.update(HF_HOME=str(tmp_path / "hf"), PRBENCH_CACHE=str(tmp_path / "cache"))
    if endpoint is None:
        env["HF_HUB_OFFLINE"] = "1"
    else:
        env["HF_ENDPOINT"] = endpoint
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "personalized_rewardbench", *args], env=env, capture_output=True, text=True, timeout=300
    )
    return result, time.monotonic() - started


MODEL_ID = ["evaluate", "--model", "someorg/some-rm", "--data", "sample", "--limit", "1", "--no-progress"]


@pytest.fixture(scope="module")
def offline_seconds(tmp_path_factory) -> float:
    """How long the model-id failure takes with HF_HUB_OFFLINE=1 (process start included)."""
    tmp_path = tmp_path_factory.mktemp("offline")
    result, seconds = _run(tmp_path, None, *MODEL_ID, "--output", str(tmp_path / "out"))
    assert result.returncode == 2 and one_error(result.stderr), result.stderr
    return seconds


def _assert_one_line(result: subprocess.CompletedProcess, *expected: str) -> None:
    err = result.stderr.strip()
    assert result.returncode == 2, err
    assert one_error(err) and "Traceback" not in err and err.startswith("prbench: error: "), err
    assert all(text in err for text in expected), err


@pytest.mark.parametrize("port", ["closed", "silent"])
def test_a_hub_model_id_fails_in_one_line_as_fast_as_offline(tmp_path, offline_seconds, port, request):
    endpoint = request.getfixturevalue(f"{port}_port")
    result, seconds = _run(tmp_path, endpoint, *MODEL_ID, "--output", str(tmp_path / "out"))
    _assert_one_line(result, "someorg/some-rm")
    assert f"the Hub ({endpoint}) did not answer" in result.stdout
    assert seconds < offline_seconds + PROBE_TIMEOUT + 30, (seconds, offline_seconds)
    assert not (tmp_path / "out").exists()


def test_a_hub_data_source_fails_in_one_line_as_fast_as_offline(tmp_path, offline_seconds, closed_port):
    args = ["evaluate", "--model", "baseline:length", "--data", "hub:someorg/data", "--output", str(tmp_path / "o")]
    result, seconds = _run(tmp_path, closed_port, *args)
    _assert_one_line(result, "hub:someorg/data", "not in the local Hub cache")
    assert seconds < offline_seconds + PROBE_TIMEOUT + 30, (seconds, offline_seconds)


def test_a_release_from_the_hub_fails_in_one_line_as_fast_as_offline(tmp_path, offline_seconds, closed_port):
    args = ["release", "build", "--source", "hub:someorg/data", "--version", "0.1.0", "--out", str(tmp_path / "r")]
    result, seconds = _run(tmp_path, closed_port, *args)
    _assert_one_line(result, "hub:someorg/data")
    assert seconds < offline_seconds + PROBE_TIMEOUT + 30, (seconds, offline_seconds)
    assert not (tmp_path / "r").exists()


def test_contriever_falls_back_to_minilm_as_fast_as_offline(tmp_path, silent_port):
    args = ["evaluate", "--model", "baseline:length", "--data", "sample", "--limit", "1", "--profile-k", "2"]
    args += ["--retriever", "contriever", "--no-progress"]
    offline, offline_seconds = _run(tmp_path / "a", None, *args, "--output", str(tmp_path / "a" / "o"))
    result, seconds = _run(tmp_path / "b", silent_port, *args, "--output", str(tmp_path / "b" / "o"))
    assert offline.returncode == result.returncode == 0, result.stderr
    assert "did not answer within" in result.stdout and "using minilm instead" in result.stdout
    assert seconds < offline_seconds + PROBE_TIMEOUT + 15, (seconds, offline_seconds)
