"""Key/value states of recently run prefixes, kept for later shared-prefix batches (least recently used first out,
bounded in tokens).

Within one scoring call the shared-prefix mechanism runs each prompt once. A reward server's calls are formed by
arrival time, so one GRPO group's completions often land in two consecutive calls, and without this cache the
second call runs the ≈ 3,000-token prompt again. The cache is keyed by the prefix's exact token ids; it belongs
to one scorer (one model, dtype and device), so a hit is the same computation's result, equal to a fresh pass up
to float rounding. The reward server turns it on (`--prefix-cache-tokens`); evaluate and the TRL reward, whose
calls hold whole groups, do not need it.

>>> import torch
>>> cache = PrefixCache(max_tokens=5)
>>> states = lambda n: [(torch.zeros(1, 1, n, 2), torch.zeros(1, 1, n, 2))]
>>> kept = cache.put([1, 2, 3], states(3)), cache.put([4, 5], states(2))
>>> cache.get([1, 2, 3]) is kept[0], cache.tokens
(True, 5)
>>> _ = cache.put([6, 7], states(2))  # over 5 tokens: the least recently used prefix ([4, 5]) goes
>>> cache.get([4, 5]) is None, cache.tokens, cache.figures()["hits"]
(True, 5, 1)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch

#: One prefix's states: per layer (keys, values), each [1, kv heads, prefix length, head dim].
LayerStates = list[tuple[torch.Tensor, torch.Tensor]]


class PrefixCache:
    """Prefix token ids -> their per-layer key/value states, at most `max_tokens` prefix tokens in all."""

    def __init__(self, max_tokens: int):
        if max_tokens < 1:
            raise ValueError("max_tokens must be positive")
        self.max_tokens = max_tokens
        self.tokens = 0
        self.hits = self.misses = 0
        self._entries: OrderedDict[tuple[int, ...], LayerStates] = OrderedDict()

    def get(self, prefix: Sequence[int]) -> LayerStates | None:
        """The states of `prefix` (now the most recently used), or None."""
        key = tuple(prefix)
        states = self._entries.get(key)
        if states is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return states

    def put(self, prefix: Sequence[int], states: LayerStates) -> LayerStates | None:
        """Keep own copies of `states` (a slice of a batch would keep the whole batch alive) and return them; None
        for a prefix longer than the whole cache, which is not kept."""
        key = tuple(prefix)
        if key in self._entries:
            return self._entries[key]
        if len(key) > self.max_tokens:
            return None
        kept = self._entries[key] = [(keys.clone(), values.clone()) for keys, values in states]
        self.tokens += len(key)
        while self.tokens > self.max_tokens:
            evicted, _states = self._entries.popitem(last=False)
            self.tokens -= len(evicted)
        return kept

    @contextmanager
    def uncounted(self) -> Iterator[PrefixCache]:
        """Lookups inside leave the hit and miss counts as they were: a group's later forwards finding the prefix
        its first forward kept are not new lookups."""
        counts = self.hits, self.misses
        try:
            yield self
        finally:
            self.hits, self.misses = counts

    def clear(self) -> None:
        self._entries.clear()
        self.tokens = 0

    def figures(self) -> dict[str, int]:
        """What the server reports in /info: size, limit, hits and misses so far."""
        return {
            "prefixes": len(self._entries),
            "tokens": self.tokens,
            "max_tokens": self.max_tokens,
            "hits": self.hits,
            "misses": self.misses,
        }
