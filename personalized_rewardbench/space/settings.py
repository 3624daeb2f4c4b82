"""The Space's settings (from the environment) and the checks on what a visitor types or picks.

Environment (all optional):

- ``PRBENCH_SPACE_DATA``: data source spec (default ``sample``; on a Hub Space the upstream dataset);
- ``PRBENCH_RESULTS_DIR``: results folder (default ``results``);
- ``PRBENCH_EXTRA_MODELS``: local model folders, separated by ``os.pathsep``, allowlisted as classifiers;
- ``PRBENCH_MODELS_FILE``: the allowlist (default: ``models.yaml`` beside the app);
- ``PRBENCH_RESULTS_REPO`` (+ ``HF_TOKEN``): Hub dataset the results folder is mirrored to;
- ``PRBENCH_RESYNC_SECONDS``: least time between two pulls of that dataset on Refresh (default 60);
- ``PRBENCH_GPU_MAX_SECONDS`` (default 120), ``PRBENCH_MAX_PAIRS`` (per subset, default 200);
- ``PRBENCH_PRELOAD``: ``1`` loads every allowlisted model at start-up (always on ZeroGPU, where a model
  loaded later, in a request's thread, would miss ZeroGPU's CUDA interception);
- ``PRBENCH_QUEUE_SIZE`` (default 20): requests waiting in gradio's queue;
- ``PRBENCH_RUNS_PER_HOUR`` (default 10; 0 = no limit): new runs one visitor may start per hour;
- ``PRBENCH_MAX_FILE_SIZE`` (default ``10kb``): gradio's upload limit (the Space takes no files).

A malformed setting ends start-up with one line naming it (UserError).

>>> SpaceSettings.from_env(Path("space"), {"PRBENCH_MAX_PAIRS": "20"}).max_pairs
20
>>> whole_number(3.0, "pairs per subset", 1, 8)
3
>>> in_range(999, "pairs per subset", 1, 8)
(8, 'pairs per subset: 999 is over the most, 8; using 8')
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from personalized_rewardbench.data.sources import UPSTREAM_REPO
from personalized_rewardbench.errors import UserError

# Input caps (characters) for try-your-own; benchmark rows come from the data source.
MAX_QUESTION_CHARS = 4000
MAX_ANSWER_CHARS = 8000
MAX_POSTS = 10
MAX_POST_CHARS = 2000
MAX_PROFILE_K = 10


@dataclass
class SpaceSettings:
    """Everything the environment decides; the token is kept out of repr and logs."""

    data: str = "sample"
    results_dir: Path = Path("results")
    models_file: Path = Path("space/models.yaml")
    extra_models: list[Path] = field(default_factory=list)
    results_repo: str | None = None
    token: str | None = field(default=None, repr=False)
    resync_seconds: float = 60.0
    gpu_max_seconds: float = 120.0
    max_pairs: int = 200
    preload: bool = False
    zero_gpu: bool = False
    queue_size: int = 20
    runs_per_hour: int = 10
    max_file_size: str = "10kb"

    @classmethod
    def from_env(cls, app_dir: Path, environ: Mapping[str, str] | None = None) -> SpaceSettings:
        env = os.environ if environ is None else environ
        on_spaces = bool(env.get("SPACE_ID"))
        zero_gpu = env.get("SPACES_ZERO_GPU", "").lower() in ("1", "true")
        extra = [Path(p) for p in env.get("PRBENCH_EXTRA_MODELS", "").split(os.pathsep) if p.strip()]
        results_dir = Path(env.get("PRBENCH_RESULTS_DIR") or "results")
        if results_dir.exists() and not results_dir.is_dir():
            raise UserError(f"PRBENCH_RESULTS_DIR={str(results_dir)!r} is a file; point it at a folder")
        max_file_size = env.get("PRBENCH_MAX_FILE_SIZE") or "10kb"
        if not re.fullmatch(r"\d+\s*(b|kb|mb|gb)?", max_file_size.strip().lower()):
            raise UserError(f"PRBENCH_MAX_FILE_SIZE={max_file_size!r} is not a size such as 10kb or 5mb")
        return cls(
            data=env.get("PRBENCH_SPACE_DATA") or (f"hub:{UPSTREAM_REPO}" if on_spaces else "sample"),
            results_dir=results_dir,
            models_file=Path(env.get("PRBENCH_MODELS_FILE") or app_dir / "models.yaml"),
            extra_models=extra,
            results_repo=env.get("PRBENCH_RESULTS_REPO") or None,
            token=env.get("HF_TOKEN") or None,
            resync_seconds=_number(env, "PRBENCH_RESYNC_SECONDS", 60.0),
            gpu_max_seconds=_number(env, "PRBENCH_GPU_MAX_SECONDS", 120.0),
            max_pairs=_whole(env, "PRBENCH_MAX_PAIRS", 200, low=1),
            # on ZeroGPU models must load at start-up, in the main process, whatever PRBENCH_PRELOAD says
            preload=zero_gpu or env.get("PRBENCH_PRELOAD", "0") == "1",
            zero_gpu=zero_gpu,
            queue_size=_whole(env, "PRBENCH_QUEUE_SIZE", 20, low=1),
            runs_per_hour=_whole(env, "PRBENCH_RUNS_PER_HOUR", 10, low=0),
            max_file_size=max_file_size.strip().lower(),
        )


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        number = float(env.get(name) or default)
    except ValueError:
        raise UserError(f"{name}={env.get(name)!r} is not a number") from None
    if not math.isfinite(number) or number < 0:
        raise UserError(f"{name}={env.get(name)!r} must be a finite number of at least 0")
    return number


def _whole(env: Mapping[str, str], name: str, default: int, low: int) -> int:
    number = _number(env, name, default)
    if not number.is_integer() or number < low:
        raise UserError(f"{name}={env.get(name)!r} must be a whole number of at least {low}")
    return int(number)


def whole_number(value: Any, name: str, low: int, high: int) -> int:
    """A whole number from a UI value (sliders may send floats), checked against [low, high]."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{name} must be a number, got {value!r}") from None
    if not number.is_integer() or not low <= number <= high:
        raise UserError(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return int(number)


def in_range(value: Any, name: str, low: int, high: int) -> tuple[int, str | None]:
    """A whole number from a visitor's value, brought into [low, high] and rounded, with a note saying what changed.

    Text that is not a number is refused (UserError). Every other value is used: out-of-range values are
    clamped and fractions rounded (half up), and the note says so."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{name} must be a number from {low} to {high}, got {value!r}") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise UserError(f"{name} must be a number from {low} to {high}, got {value!r}")
    shown = f"{number:g}"
    if number > high:
        return high, f"{name}: {shown} is over the most, {high}; using {high}"
    if number < low:
        return low, f"{name}: {shown} is under the least, {low}; using {low}"
    whole = int(number + 0.5) if not number.is_integer() else int(number)
    if whole != number:
        return whole, f"{name}: {shown} is not a whole number; using {whole}"
    return whole, None
