"""Micro-batching for the reward server: requests that arrive together are scored in one call.

One worker thread owns the model. It takes the oldest waiting request, then keeps taking requests for at
most `max_wait_s` (bounded wait) while their token cost stays under `budget_tokens` (a prompt shared by
several requests counts once: they are scored on one shared prompt); the batch is
scored in one `score_fn` call, which returns every request's own results. The queue is bounded:
`submit` raises `QueueFull` at once instead of letting latency grow without limit.

When a batch fails with a `UserError` (a request the model cannot score, e.g. an answer longer than the
max length), its requests are scored one by one, so only the request at fault gets the error.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from personalized_rewardbench.errors import UserError

Entry = TypeVar("Entry")
Result = TypeVar("Result")


class QueueFull(Exception):
    """The bounded queue holds `max_queue` requests already."""


@dataclass
class _Request(Generic[Entry]):
    entries: Sequence[Entry]
    cost: int  # tokens of its own (the answers)
    shared: Mapping[Hashable, int]  # tokens of parts a batch holds once however many requests have them (prompts)
    future: Future = field(default_factory=Future)

    def added_cost(self, seen: set[Hashable]) -> int:
        """Tokens this request adds to a batch that already holds the shared parts `seen`."""
        return self.cost + sum(tokens for key, tokens in self.shared.items() if key not in seen)


@dataclass
class BatcherStats:
    batches: int = 0
    requests: int = 0
    entries: int = 0
    largest_batch: int = 0  # requests in the largest batch


class MicroBatcher(Generic[Entry, Result]):
    """Collects concurrent requests into batches for `score_fn(requests) -> results`: one list of results per
    request (its entries' results, in order)."""

    def __init__(
        self,
        score_fn: Callable[[list[list[Entry]]], list[list[Result]]],
        *,
        budget_tokens: int,
        max_wait_s: float = 0.01,
        max_queue: int = 256,
    ):
        if budget_tokens < 1 or max_wait_s < 0 or max_queue < 1:
            raise ValueError("budget_tokens and max_queue must be positive, max_wait_s not negative")
        self.score_fn = score_fn
        self.budget_tokens = budget_tokens
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self.stats = BatcherStats()
        self._queue: queue.Queue[_Request | None] = queue.Queue(maxsize=max_queue)
        self._held: _Request | None = None  # taken from the queue, did not fit: starts the next batch
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="reward-batcher", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout)
            self._thread = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- submitting -------------------------------------------------------------------------------
    def submit_nowait(
        self, entries: Sequence[Entry], cost: int, shared: Mapping[Hashable, int] | None = None
    ) -> Future:
        """Queue one request; its future gets the results of `entries`. Raises `QueueFull`.

        `cost`: the request's own tokens; `shared`: tokens of parts (by key) that a batch counts once."""
        if not self.alive:
            raise RuntimeError("the reward batcher is not running")
        request = _Request(list(entries), max(1, cost), dict(shared or {}))
        try:
            self._queue.put_nowait(request)
        except queue.Full:
            raise QueueFull(f"{self.max_queue} requests are waiting already") from None
        return request.future

    async def submit(
        self, entries: Sequence[Entry], cost: int, shared: Mapping[Hashable, int] | None = None
    ) -> list[Result]:
        """Queue one request and wait for its results (from async code)."""
        return await asyncio.wrap_future(self.submit_nowait(entries, cost, shared))

    # -- the worker -------------------------------------------------------------------------------
    def _next(self, timeout: float | None) -> _Request | None:
        if self._held is not None:
            request, self._held = self._held, None
            return request
        return self._queue.get(timeout=timeout) if timeout is None or timeout > 0 else self._queue.get_nowait()

    def _collect(self, first: _Request) -> list[_Request]:
        seen: set[Hashable] = set()
        batch, tokens = [first], first.added_cost(seen)
        seen.update(first.shared)
        deadline = time.monotonic() + self.max_wait_s
        while tokens < self.budget_tokens:
            try:
                request = self._next(deadline - time.monotonic())
            except queue.Empty:
                break
            if request is None:  # stop: put the sentinel back for the main loop
                self._queue.put(None)
                break
            added = request.added_cost(seen)
            if tokens + added > self.budget_tokens:
                self._held = request
                break
            batch.append(request)
            tokens += added
            seen.update(request.shared)
        return batch

    def _run(self) -> None:
        while True:
            first = self._next(None)
            if first is None:
                return
            batch = self._collect(first)
            self._score(batch)

    def _score(self, batch: list[_Request]) -> None:
        batch = [r for r in batch if r.future.set_running_or_notify_cancel()]  # drop requests whose client left
        if not batch:
            return
        self.stats.batches += 1
        self.stats.requests += len(batch)
        self.stats.entries += sum(len(r.entries) for r in batch)
        self.stats.largest_batch = max(self.stats.largest_batch, len(batch))
        try:
            results = self._call([list(request.entries) for request in batch])
        except UserError as error:
            if len(batch) == 1:
                batch[0].future.set_exception(error)
                return
            for request in batch:  # find the request at fault; the others still get their scores
                self._score_alone(request)
            return
        except Exception as error:  # noqa: BLE001 - every waiting request must hear about the failure
            for request in batch:
                request.future.set_exception(error)
            return
        for request, result in zip(batch, results):
            request.future.set_result(result)

    def _score_alone(self, request: _Request) -> None:
        try:
            request.future.set_result(self._call([list(request.entries)])[0])
        except Exception as error:  # noqa: BLE001
            request.future.set_exception(error)

    def _call(self, requests: list[list[Entry]]) -> list[list[Any]]:
        results = self.score_fn(requests)
        if [len(r) for r in results] != [len(r) for r in requests]:
            raise RuntimeError("the scorer did not return one result per entry of every request")
        return results
