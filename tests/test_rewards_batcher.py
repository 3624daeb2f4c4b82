"""The micro-batcher with real threads: batching under the token budget, bounded queue, failure isolation."""

from __future__ import annotations

import threading

import pytest

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.rewards.batcher import MicroBatcher, QueueFull


class GatedScorer:
    """Doubles numbers; the first call waits for `gate`, so later requests pile up meanwhile."""

    def __init__(self):
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls: list[list[int]] = []

    def __call__(self, requests: list[list[int]]) -> list[list[int]]:
        self.entered.set()
        self.gate.wait(10)
        entries = [entry for request in requests for entry in request]
        self.calls.append(entries)
        if any(entry < 0 for entry in entries):
            raise UserError("negative entry")
        if any(entry == 13 for entry in entries):
            raise RuntimeError("unlucky")
        return [[2 * entry for entry in request] for request in requests]


def _started(scorer, **options) -> MicroBatcher:
    batcher = MicroBatcher(scorer, **{"budget_tokens": 100, "max_wait_s": 0.02, "max_queue": 8, **options})
    batcher.start()
    return batcher


def test_waiting_requests_form_one_batch_within_the_budget():
    scorer = GatedScorer()
    batcher = _started(scorer)
    try:
        first = batcher.submit_nowait([1], cost=10)
        assert scorer.entered.wait(5)  # the worker is busy with the first request
        later = [batcher.submit_nowait([n, n + 100], cost=30) for n in (2, 3, 4, 5)]
        scorer.gate.set()
        assert first.result(5) == [2]
        assert [f.result(5) for f in later] == [[4, 204], [6, 206], [8, 208], [10, 210]]
    finally:
        batcher.stop()
    # 4 x 30 tokens exceed the budget of 100: three requests in one call, the fourth in the next
    assert scorer.calls == [[1], [2, 102, 3, 103, 4, 104], [5, 105]]
    assert batcher.stats.largest_batch == 3 and batcher.stats.requests == 5


def test_full_queue_is_refused_at_once():
    scorer = GatedScorer()
    batcher = _started(scorer, max_queue=2)
    try:
        batcher.submit_nowait([1], cost=1)
        assert scorer.entered.wait(5)
        batcher.submit_nowait([2], cost=1)
        batcher.submit_nowait([3], cost=1)
        with pytest.raises(QueueFull):
            batcher.submit_nowait([4], cost=1)
    finally:
        scorer.gate.set()
        batcher.stop()


def test_a_bad_request_fails_alone_and_internal_errors_reach_every_request():
    scorer = GatedScorer()
    batcher = _started(scorer)
    try:
        blocker = batcher.submit_nowait([0], cost=1)
        assert scorer.entered.wait(5)
        good, bad, other = (batcher.submit_nowait(e, cost=1) for e in ([1], [-1], [2]))
        scorer.gate.set()
        assert blocker.result(5) == [0]
        assert good.result(5) == [2] and other.result(5) == [4]
        with pytest.raises(UserError, match="negative"):
            bad.result(5)
        broken = batcher.submit_nowait([13], cost=1)
        with pytest.raises(RuntimeError, match="unlucky"):
            broken.result(5)
        assert batcher.submit_nowait([7], cost=1).result(5) == [14]  # the worker survives
    finally:
        batcher.stop()


def test_a_shared_prompt_counts_once_against_the_budget():
    scorer = GatedScorer()
    batcher = _started(scorer)
    try:
        batcher.submit_nowait([0], cost=1)
        assert scorer.entered.wait(5)
        # each request: 10 answer tokens + a 60-token prompt; four on one prompt fit 100 tokens (60 + 4 x 10)
        same = [batcher.submit_nowait([n], cost=10, shared={"prompt A": 60}) for n in (1, 2, 3, 4)]
        other = batcher.submit_nowait([5], cost=10, shared={"prompt B": 60})
        scorer.gate.set()
        assert [f.result(5) for f in same] == [[2], [4], [6], [8]] and other.result(5) == [10]
    finally:
        batcher.stop()
    assert scorer.calls == [[0], [1, 2, 3, 4], [5]]
