"""A plain install works anywhere: build the wheel, install it into a fresh venv, run it from a temp folder.

The fresh venv gets the pinned dependencies cheaply: a .pth file points at the site-packages of the venv
running the tests (derived from `sys.prefix`, so `<repo>/.venv` in CI). Paths a .pth file adds are not
scanned for further .pth files, so the checkout's editable finder stays inactive there; PYTHONPATH is
dropped and the commands run outside the checkout, so only the wheel's copy of the package can answer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from personalized_rewardbench.accuracy import pointwise_accuracy
from personalized_rewardbench.cli import main

ROOT = Path(__file__).resolve().parents[1]
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "results", "runs")


def _copy_source(dest: Path) -> None:
    """The checkout's files (tracked and untracked, not ignored) without build leftovers or venvs."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "-co", "--exclude-standard"], capture_output=True, check=False
    )
    if listed.returncode != 0:  # not a git checkout (e.g. an unpacked sdist)
        shutil.copytree(ROOT, dest, ignore=_NOT_SOURCE)
        return
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv folder, environment) with the freshly built wheel installed and the pinned deps reachable."""
    work = tmp_path_factory.mktemp("wheel")
    source, wheels, venv = work / "source", work / "wheels", work / "venv"
    source.mkdir()
    _copy_source(source)
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), "."],
        source,
        dict(os.environ),
    )
    (wheel,) = wheels.glob("personalized_rewardbench-*.whl")
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], work, dict(os.environ))
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)], work, {})
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # installed first, then the pinned deps: pip never sees the checkout's (editable) distribution
    (Path(purelib) / "_prbench_pinned_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH" and not key.startswith("PRBENCH_")}
    env.update(HF_HOME=str(work / "hf-home"), PRBENCH_CACHE=str(work / "cache"), HF_HUB_OFFLINE="1")
    where = _run([str(python), "-c", "import personalized_rewardbench as p; print(p.__file__)"], work, env)
    assert where.stdout.strip().startswith(purelib), where.stdout  # the wheel's copy, not the checkout
    return venv, env


def test_evaluate_from_the_wheel_gives_the_checkout_numbers(installed, tmp_path):
    venv, env = installed
    done = _run([str(venv / "bin" / "prbench"), "evaluate", "--no-progress"], tmp_path, env)
    assert "demo sample" in done.stdout
    (wheel_results,) = (tmp_path / "results").rglob("results.json")

    assert main(["evaluate", "--no-progress", "--output", str(tmp_path / "checkout")]) == 0
    (checkout_results,) = (tmp_path / "checkout").rglob("results.json")
    ours, theirs = json.loads(wheel_results.read_text()), json.loads(checkout_results.read_text())
    for key in ("accuracy", "macro_accuracy", "ci95", "num_pairs", "per_subset", "model", "protocol"):
        assert ours[key] == theirs[key], key
    assert ours["num_pairs"] == 24 and 0 < ours["accuracy"] < 1
    scores = "scores.jsonl"
    assert (wheel_results.parent / scores).read_bytes() == (checkout_results.parent / scores).read_bytes()


def test_release_build_from_the_wheel_matches_the_checkout(installed, tmp_path):
    venv, env = installed
    _run(
        [str(venv / "bin" / "prbench"), "release", "build", "--source", "sample", "--version", "1.0.0", "--out", "rel"],
        tmp_path,
        env,
    )
    assert main(["release", "build", "--source", "sample", "--version", "1.0.0", "--out", str(tmp_path / "ref")]) == 0
    built = sorted(path.relative_to(tmp_path / "rel") for path in (tmp_path / "rel").rglob("*") if path.is_file())
    assert built == sorted(
        path.relative_to(tmp_path / "ref") for path in (tmp_path / "ref").rglob("*") if path.is_file()
    )
    for path in built:
        if path.suffix in (".md", ".py"):  # card and builder: copied from the wheel's bundle, byte for byte
            assert (tmp_path / "rel" / path).read_bytes() == (tmp_path / "ref" / path).read_bytes(), path
    assert json.loads((tmp_path / "rel" / "release.json").read_text())["version"] == "1.0.0"


def test_evaluate_load_of_the_shipped_metric(installed, tmp_path):
    venv, env = installed
    chosen, rejected = [2.0, 1.0, 0.5, 3.0], [1.0, 1.0, 0.7, -1.0]
    script = (
        "import json, evaluate\n"
        "from personalized_rewardbench.resources import metric_dir\n"
        "metric = evaluate.load(str(metric_dir()))\n"
        f"print(json.dumps([str(metric_dir()), metric.compute(chosen_scores={chosen}, rejected_scores={rejected})]))\n"
    )
    done = _run([str(venv / "bin" / "python"), "-c", script], tmp_path, env)
    where, figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(where).parts[-3:] == ("_bundled", "metric", "personalized_accuracy") and str(venv) in where
    assert figures["accuracy"] == 0.5 and figures == json.loads(json.dumps(pointwise_accuracy(chosen, rejected)))
