"""Where the Space keeps finished runs: a local results folder, mirrored to a Hub dataset when configured.

The folder has the CLI's layout (`<model>/<run>/results.json` + `scores.jsonl` + `run.json`), so the
leaderboard reads it with `results.find_results`, exactly like `prbench leaderboard`.

With a Hub results repo (and a token), the store restores the repo's runs into the folder at start-up
and keeps it in sync with huggingface_hub's `CommitScheduler`. After each finished run `persist()`
triggers a commit and waits for it, so a run reported finished survives a restart of the Space.
`pull()` fetches runs added to the repo since (by another replica or an uploaded CLI run); the
leaderboard's Refresh calls it, at most once per `resync_seconds`.
The token is handed to huggingface_hub and never printed, logged or shown.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from personalized_rewardbench.space.views import HUB_URL

logger = logging.getLogger(__name__)

#: Only finished-run files travel to the Hub (never partial score logs or temp files).
SYNCED_FILES = ["*results.json", "*scores.jsonl", "*run.json"]
IGNORED_FILES = ["*scores.partial*", "*.tmp-*"]


class ResultsStore:
    """A results folder, optionally synced with the Hub dataset `repo_id`."""

    def __init__(
        self,
        folder: Path,
        repo_id: str | None = None,
        token: str | None = None,
        every_minutes: float = 10.0,
        resync_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.folder = Path(folder)
        self.repo_id = repo_id or None
        self._token = token  # never logged
        self.every_minutes = every_minutes
        self.resync_seconds = resync_seconds
        self._clock = clock
        self._pulled_at: float | None = None
        self._pull_lock = threading.Lock()
        self._scheduler = None

    def __repr__(self) -> str:
        return f"ResultsStore(folder={str(self.folder)!r}, repo_id={self.repo_id!r})"

    @property
    def syncs_to_hub(self) -> bool:
        return self._scheduler is not None

    def describe(self) -> str:
        """Where results are kept, in words a visitor may read (no server path)."""
        where = "this Space's results folder"
        if self.syncs_to_hub:
            return f"{where}, mirrored to the Hub dataset [{self.repo_id}]({HUB_URL}/datasets/{self.repo_id})"
        return where

    def start(self) -> list[str]:
        """Create the folder; with a Hub repo, restore its runs and start the scheduler. Returns notices."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if not self.repo_id:
            return []
        if not self._token:
            return [f"results repo {self.repo_id} is set but no token is available: results stay on this Space's disk"]
        notices = self._restore()
        try:
            from huggingface_hub import CommitScheduler

            self._scheduler = CommitScheduler(
                repo_id=self.repo_id,
                repo_type="dataset",
                folder_path=self.folder,
                every=self.every_minutes,
                token=self._token,
                allow_patterns=SYNCED_FILES,
                ignore_patterns=IGNORED_FILES,
            )
        except Exception as error:  # the Space still works with local results
            notices.append(
                f"cannot sync results to {self.repo_id} ({type(error).__name__}); results stay on this Space's disk"
            )
        for notice in notices:
            logger.warning(notice)
        return notices

    def _restore(self) -> list[str]:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import RepositoryNotFoundError

        self._pulled_at = self._clock()
        try:
            snapshot_download(
                self.repo_id, repo_type="dataset", local_dir=self.folder, allow_patterns=SYNCED_FILES, token=self._token
            )
        except RepositoryNotFoundError:
            return []  # a new results repo: the scheduler creates it
        except Exception as error:
            return [
                f"cannot restore stored results from {self.repo_id} ({type(error).__name__}); "
                "showing local results only"
            ]
        return []

    def pull(self) -> str | None:
        """Fetch runs added to the Hub repo since the last pull, at most once per `resync_seconds`.

        Returns a notice when the pull failed; None when it worked, was not due, or there is no repo."""
        if not (self.repo_id and self._token):
            return None
        with self._pull_lock:
            now = self._clock()
            if self._pulled_at is not None and now - self._pulled_at < self.resync_seconds:
                return None
            notices = self._restore()
        for notice in notices:
            logger.warning(notice)
        return notices[0] if notices else None

    def persist(self, timeout: float = 120.0) -> str | None:
        """Commit finished runs to the Hub now and wait; returns a notice when that did not happen."""
        if self._scheduler is None:
            return None
        try:
            self._scheduler.trigger().result(timeout=timeout)
        except FutureTimeout:
            return (
                f"the results upload to {self.repo_id} is still running; "
                "it is saved locally and will be committed shortly"
            )
        except Exception as error:
            logger.warning("results upload to %s failed: %s", self.repo_id, type(error).__name__)
            return (
                f"saved locally, but the upload to {self.repo_id} failed ({type(error).__name__}); "
                f"it is retried every {self.every_minutes:g} minutes"
            )
        return None
