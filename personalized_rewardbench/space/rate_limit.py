"""A per-visitor limit on new runs: each run adds a leaderboard row, so even free baselines can flood the board.

A visitor is the first address of `X-Forwarded-For` (what the Hub's proxy sets) or the client's address.
Runs served from the store cost nothing and are not counted. A sliding window: at most `limit` new runs
in any `window_seconds`; the refusal says when the next one is possible.

>>> clock = iter([0.0, 1.0, 2.0, 3700.0]).__next__
>>> limiter = RateLimiter(limit=2, window_seconds=3600, clock=clock)
>>> limiter.take("1.2.3.4"); limiter.take("1.2.3.4")
>>> try:
...     limiter.take("1.2.3.4")
... except UserError as error:
...     print(error)
you started 2 runs in the last 60 minutes, this Space's limit; try again in 60 minutes
>>> limiter.take("1.2.3.4")  # an hour later
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

from personalized_rewardbench.errors import UserError


def visitor_id(headers: Mapping[str, str] | None, host: str | None) -> str:
    """Who is asking: the first X-Forwarded-For address, else the client's host."""
    forwarded = (headers or {}).get("x-forwarded-for", "")
    return forwarded.split(",")[0].strip() or host or "unknown"


class RateLimiter:
    """At most `limit` new runs per visitor in any `window_seconds` (limit 0: no limit)."""

    def __init__(self, limit: int, window_seconds: float = 3600.0, clock: Callable[[], float] = time.monotonic):
        self.limit, self.window, self._clock = limit, window_seconds, clock
        self._starts: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def take(self, visitor: str) -> None:
        """Count one new run for `visitor`, or refuse it (UserError) when the window is full."""
        if self.limit <= 0:
            return
        now = self._clock()
        with self._lock:
            starts = self._starts.setdefault(visitor, deque())
            while starts and now - starts[0] >= self.window:
                starts.popleft()
            if len(starts) >= self.limit:
                wait = math.ceil((self.window - (now - starts[0])) / 60)
                raise UserError(
                    f"you started {self.limit} runs in the last {self.window / 60:g} minutes, this Space's limit; "
                    f"try again in {wait} minute{'s' if wait != 1 else ''}"
                )
            starts.append(now)
