"""The tree passes ruff (configuration in pyproject.toml: line length 120)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _ruff() -> str:
    beside = Path(sys.executable).with_name("ruff")
    found = str(beside) if beside.exists() else shutil.which("ruff")
    if not found:
        pytest.skip("ruff is not installed (requirements.txt pins it)")
    return found


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]])
def test_ruff_passes(command):
    result = subprocess.run([_ruff(), *command, "."], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
