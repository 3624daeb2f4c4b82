"""The Space's settings (from the environment) and the checks on what a visitor types or picks.

Environment (all optional):

- ``PRBENCH_SPACE_DATA``: data source spec (default ``sample``; on a Hub Space the upstream dataset);
- ``PRBENCH_RESULTS_DIR``: results folder (default ``results``);
- ``PRBENCH_EXTRA_MODELS``: local model folders, separated by ``os.pathsep``, allowlisted as classifiers;
- ``PRBENCH_MODELS_FILE``: the allowlist (default: ``models.yaml`` beside the app);
- ``PRBENCH_RESULTS_REPO`` (+ ``HF_TOKEN``): Hub dataset the results folder is mirrored to;
- ``PRBENCH_RESYNC_SECONDS``: least time between two pulls of that dataset on Refresh (default 60);
- ``PRBENCH_GPU_MAX_SECONDS`` (default 120), ``PRBENCH_MAX_PAIRS`` (per subset, default 200);
- ``PRBENCH_PRELOAD``: ``1`` loads every allowlisted model at start-up (default on ZeroGPU).

>>> SpaceSettings.from_env(Path("space"), {"PRBENCH_MAX_PAIRS": "20"}).max_pairs
20
>>> whole_number(3.0, "pairs per subset", 1, 8)
3
>>> in_range(999, "pairs per subset", 1, 8)
(8, 'pairs per subset: 999 is over the most, 8; using 8')
"""

from __future__ import annotations

import os
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

    @classmethod
    def from_env(cls, app_dir: Path, environ: Mapping[str, str] | None = None) -> SpaceSettings:
        env = os.environ if environ is None else environ
        on_spaces = bool(env.get("SPACE_ID"))
        zero_gpu = env.get("SPACES_ZERO_GPU", "").lower() in ("1", "true")
        extra = [Path(p) for p in env.get("PRBENCH_EXTRA_MODELS", "").split(os.pathsep) if p.strip()]
        return cls(
            data=env.get("PRBENCH_SPACE_DATA") or (f"hub:{UPSTREAM_REPO}" if on_spaces else "sample"),
            results_dir=Path(env.get("PRBENCH_RESULTS_DIR") or "results"),
            models_file=Path(env.get("PRBENCH_MODELS_FILE") or app_dir / "models.yaml"),
            extra_models=extra,
            results_repo=env.get("PRBENCH_RESULTS_REPO") or None,
            token=env.get("HF_TOKEN") or None,
            resync_seconds=_number(env, "PRBENCH_RESYNC_SECONDS", 60.0),
            gpu_max_seconds=_number(env, "PRBENCH_GPU_MAX_SECONDS", 120.0),
            max_pairs=int(_number(env, "PRBENCH_MAX_PAIRS", 200)),
            preload=env.get("PRBENCH_PRELOAD", "1" if zero_gpu else "0") == "1",
        )


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        return float(env.get(name) or default)
    except ValueError:
        raise UserError(f"{name}={env.get(name)!r} is not a number") from None


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
