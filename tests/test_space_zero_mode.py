"""Zero-mode smoke test (issue 15): the Space with SPACES_ZERO_GPU=true against a local fake device API.

The real `spaces` package (0.51.3) drives every GPU call: /schedule with the Space's estimate, a forked worker
that calls /allow with its own pid, the arguments and the payload pickled across the fork, /release when the
result is back. `zero_gpu_app.py` stubs only the CUDA start and the device choice (no GPU here), so the tiny
reward model runs on the CPU inside the worker. Baselines need no GPU and never ask for one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fake_zero_api import FakeZeroApi
from gradio_client import Client
from space_server import REPO, cli_results, running_space
from spaces.zero.config import get_config

from personalized_rewardbench.data.schema import SUBSETS
from personalized_rewardbench.space.gpu_budget import FLOOR_SECONDS
from personalized_rewardbench.testing.tiny_models import build_tiny_reward_model

ZERO_APP = Path(__file__).resolve().parent / "zero_gpu_app.py"
CGROUP = "/zero-smoke-test"
PAIRS, PROFILE_K = 2, 1


def _value(output):
    return output.get("value", output) if isinstance(output, dict) and output.get("__type__") == "update" else output


def _baselines_allowlist(path: Path) -> Path:
    models = yaml.safe_load((REPO / "space" / "models.yaml").read_text())["models"]
    path.write_text(yaml.safe_dump({"models": [m for m in models if m["type"] == "baseline"]}))
    return path


def _parent_pid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.fixture(scope="module")
def zero_space(tmp_path_factory):
    root = tmp_path_factory.mktemp("zero-space")
    tiny = build_tiny_reward_model(root / "tiny-rm")
    (root / "cgroup").write_text(f"5:devices:{CGROUP}\n0::/\n")
    env = {
        "SPACES_ZERO_GPU": "true",
        "ZEROGPU_OFFLOAD_DIR": str(root / "zerogpu-tensors"),
        "ZEROGPU_PROC_SELF_CGROUP_PATH": str(root / "cgroup"),
        "HOME": str(root / "home"),  # spaces keeps its worker clean-up links under ~/.zerogpu
        "HF_HUB_OFFLINE": "1",
        "PRBENCH_MODELS_FILE": str(_baselines_allowlist(root / "models.yaml")),
        "PRBENCH_EXTRA_MODELS": str(tiny),
        "PRBENCH_RESULTS_DIR": str(root / "results"),
        "PRBENCH_CACHE": str(root / "cache"),
        "PRBENCH_RUNS_PER_HOUR": "1000",
    }
    with FakeZeroApi() as api:
        with running_space(root, script=ZERO_APP, SPACES_ZERO_DEVICE_API_URL=api.url, **env) as url:
            yield {"api": api, "client": Client(url, verbose=False), "root": root, "tiny": str(tiny), "env": env}


def test_zero_mode_run_and_try_your_own_go_through_schedule_fork_pickle_release(zero_space, tmp_path, monkeypatch):
    api, client, tiny = zero_space["api"], zero_space["client"], zero_space["tiny"]
    assert api.paths() == ["/startup-report"]  # at launch: the GPU functions are registered

    # a baseline is scored in the Space's own process: no GPU is asked for
    client.predict("baseline:length", list(SUBSETS), PAIRS, 0, api_name="/evaluate")
    assert api.paths() == ["/startup-report"]

    # the tiny reward model: /schedule, then /allow from a forked worker, then /release
    outputs = client.predict(tiny, list(SUBSETS), PAIRS, PROFILE_K, api_name="/evaluate")
    results = _value(outputs[4])
    assert api.paths() == ["/startup-report", "/schedule", "/allow", "/release"]
    schedule, allow, release = api.calls[1:]
    requested = results["runtime"]["gpu_seconds_requested"]
    factor = get_config()["duration_factor"]  # spaces scales the request by the host GPU's factor (1.0 here)
    assert schedule["params"]["durationSeconds"] == str(round(requested * factor))
    assert schedule["params"]["cgroupPath"] == CGROUP
    assert allow["params"]["allowToken"] == release["params"]["allowToken"] == "token-1"
    assert release["params"]["fail"] == "false"
    worker = int(allow["params"]["pid"])
    space_pid = _parent_pid(worker)  # the idle worker stays alive for the next call
    assert ZERO_APP.name in _cmdline(space_pid) and worker != space_pid

    # the payload came back through the pickle intact: the same figures as `prbench evaluate`
    monkeypatch.setenv("PRBENCH_CACHE", zero_space["env"]["PRBENCH_CACHE"])
    expected = cli_results(tmp_path / "cli", tiny, PAIRS, PROFILE_K)
    assert results["accuracy"] == expected["accuracy"]
    assert results["per_subset"] == expected["per_subset"]
    assert results["num_pairs"] == PAIRS * len(SUBSETS)
    (stored,) = [
        p for p in (zero_space["root"] / "results").rglob("results.json") if json.loads(p.read_text())["model"] == tiny
    ]
    assert json.loads(stored.read_text())["runtime"]["gpu_seconds_requested"] == requested

    # try your own: another @spaces.GPU function, so spaces forks it a worker of its own (workers are per function)
    _summary, scored = client.predict(
        tiny, "Which novel next?", "I loved Solaris.", "Try Roadside Picnic.", "Read Dune.", api_name="/try"
    )
    assert api.paths()[4:] == ["/schedule", "/allow", "/release"]
    schedule, allow, release = api.calls[4:]
    assert int(schedule["params"]["durationSeconds"]) >= FLOOR_SECONDS
    assert allow["params"]["allowToken"] == release["params"]["allowToken"] == "token-2"
    assert release["params"]["fail"] == "false"
    second_worker = int(allow["params"]["pid"])
    assert second_worker != worker and _parent_pid(second_worker) == space_pid
    assert isinstance(scored["score_a"], float) and isinstance(scored["score_b"], float)
    a, b = scored["score_a"], scored["score_b"]
    assert scored["preferred"] == ("A" if a > b else "B" if b > a else "tie")

    # the run the worker made is on the Space's leaderboard (the main process reads what the worker wrote)
    from personalized_rewardbench.space.board import LEADERBOARD_COLUMNS, OPTIONAL

    board = client.predict("all", "all", "", OPTIONAL, True, "demo-sample runs", "overall", api_name="/leaderboard")
    demo = _value(board[5])
    models = {row[LEADERBOARD_COLUMNS.index("model")] for row in demo["data"]}
    assert f"local: {Path(tiny).name}" in models and "baseline:length" in models
    assert (
        api.paths().count("/startup-report") == 1 and "Traceback" not in (zero_space["root"] / "space.log").read_text()
    )
