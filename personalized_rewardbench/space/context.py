"""The Space's state in one object: settings, allowlist, results store, data and scorers, and its services.

`space/app.py` is a thin gr.Blocks face over `SpaceContext`. The jobs live in their own modules:
`space_settings` (environment, input caps), `scorer_cache` (models loaded once), `gpu_budget`
(GPU-time estimates and refusals), `space_data` (rows and profile ranking), `space_runs` (evaluate),
`space_try` (try your own), `space_store` (results folder and its Hub mirror). Every score comes from
the same scorers and engine as the CLI, so a run started here writes the CLI's results.json.

>>> # space = SpaceContext(SpaceSettings.from_env(Path("space"))); space.start()
"""

from __future__ import annotations

import logging
from pathlib import Path

from personalized_rewardbench.data.sources import Source
from personalized_rewardbench.space.allowlist import Allowlist, load_allowlist
from personalized_rewardbench.space.data import SpaceData
from personalized_rewardbench.space.errors import public_message
from personalized_rewardbench.space.runs import RunService
from personalized_rewardbench.space.scorer_cache import ScorerCache
from personalized_rewardbench.space.settings import SpaceSettings
from personalized_rewardbench.space.store import ResultsStore
from personalized_rewardbench.space.try_own import TryService

__all__ = ["SpaceContext", "SpaceSettings"]
logger = logging.getLogger(__name__)


class SpaceContext:
    """Everything a Space process holds; `runs`, `tries` and `data` serve the visitor's requests."""

    def __init__(self, settings: SpaceSettings):
        self.settings = settings
        self.allowlist: Allowlist = load_allowlist(settings.models_file, settings.extra_models)
        self.store = ResultsStore(
            settings.results_dir, settings.results_repo, settings.token, resync_seconds=settings.resync_seconds
        )
        self.scorers = ScorerCache()
        self.data = SpaceData(settings.data)
        self.runs = RunService(settings, self.allowlist, self.scorers, self.data, self.store)
        self.tries = TryService(self.allowlist, self.scorers, settings.gpu_max_seconds, self.runs.preload)
        self.notices: list[str] = []

    def start(self) -> None:
        """Restore stored results, load the data source and (when asked) every allowlisted model."""
        self.notices += self.store.start()
        self.data.source()
        if self.settings.preload:
            for model in self.allowlist.models.values():
                try:
                    with self.scorers.use(model):
                        pass
                except Exception as error:  # one broken model must not keep the Space from starting
                    reason = str(error).splitlines()[0] if str(error) else type(error).__name__
                    logger.warning("allowlisted model %s is unavailable: %s", model.id, reason)
                    self.allowlist.mark_unavailable(model.id, public_message(reason))
                    self.notices.append(f"{model.id} could not be loaded and is unavailable: {public_message(reason)}")

    def source(self) -> Source:
        return self.data.source()

    @property
    def results_dir(self) -> Path:
        return self.settings.results_dir

    def pair_limit(self) -> int:
        """Most pairs per subset a visitor can ask for."""
        return self.data.pair_limit(self.settings.max_pairs)

    def refresh(self) -> str | None:
        """Pull runs added to the Hub results repo since the last pull (rate-limited); a notice on failure."""
        return self.store.pull()
