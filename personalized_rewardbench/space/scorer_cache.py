"""Allowlisted scorers, loaded once per process and reused by every run, store lookup and try-your-own.

Scorers come from the same factory as `prbench evaluate` (`scorer_factory.make_scorer`), configured
exactly as the allowlist says, so a Space run and a CLI run of the same model are the same run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.scorer_factory import make_scorer
from personalized_rewardbench.scoring.base import Scorer
from personalized_rewardbench.space.allowlist import AllowedModel


def scorer_config(model: AllowedModel, **run: Any) -> RunConfig:
    """The RunConfig that loads `model` exactly as the allowlist says (plus run settings)."""
    return RunConfig(
        model=model.id,
        model_type="auto" if model.is_baseline else model.type,
        revision=model.revision,
        dtype=model.dtype,
        trust_remote_code=model.trust_remote_code,
        max_length=model.max_length or None,  # recorded in the run's protocol, so runs stay comparable
        progress=False,
        **run,
    )


class ScorerCache:
    """Scorers loaded once per process, keyed by model settings; one user of a scorer at a time."""

    def __init__(self, loader: Callable[[RunConfig], Scorer] = make_scorer):
        self._loader = loader
        self._scorers: dict[tuple, Scorer] = {}
        self._locks: dict[tuple, threading.Lock] = {}
        self._guard = threading.Lock()
        self.loads = 0

    @staticmethod
    def key(model: AllowedModel) -> tuple:
        return (model.id, model.revision, model.type, model.dtype, model.max_length, model.trust_remote_code)

    def _load(self, model: AllowedModel) -> Scorer:
        scorer = self._loader(scorer_config(model))
        self.loads += 1
        return scorer

    @contextmanager
    def use(self, model: AllowedModel) -> Iterator[Scorer]:
        """The loaded scorer for `model` (loading it on first use), held exclusively while in use."""
        key = self.key(model)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._scorers:
                self._scorers[key] = self._load(model)
            yield self._scorers[key]
