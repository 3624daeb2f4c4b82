"""The prefixes' key/value states for a shared-prefix suffix pass: run once (`run_prefixes`), taken from or kept
in a `PrefixCache` (`prefix_states`), padded into one batch layer by layer (`stacked`), and handed to the suffix
forward once per layer (`suffix_cache`, repeated per suffix by `repeat_then` on the plain pass)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from personalized_rewardbench.scoring.padding import needed_mask, pad_rows, positions, real_columns
from personalized_rewardbench.scoring.prefix_cache import LayerStates, PrefixCache


def run_prefixes(model, prefixes: Sequence[Sequence[int]], pad: int, device, side: str, right_padding_free: bool):
    """One base-model pass over the padded `prefixes`: per layer its (keys, values), and the prefix mask."""
    from transformers.cache_utils import DynamicCache

    ids, prefix_mask = pad_rows(prefixes, pad, side)
    cache = DynamicCache()  # full layers: sliding ones keep every prefix column; the mask applies the window
    mask = needed_mask(prefix_mask, right_padding_free and side == "right")
    model.base_model(
        input_ids=ids.to(device),
        attention_mask=None if mask is None else mask.to(device),
        position_ids=positions(prefix_mask, side).to(device),
        past_key_values=cache,
        use_cache=True,
    )
    return [(layer.keys, layer.values) for layer in cache.layers], prefix_mask


def prefix_states(model, prefixes, pad: int, device, side: str, right_padding_free: bool, cache: PrefixCache | None):
    """(each prefix's per-layer (keys, values) over its real columns, the padded batch or None).

    Prefixes `cache` holds are not run; the others run once each (a prefix twice in `prefixes` runs once) and
    are kept in it. When every prefix ran, each once, the padded batch itself is returned too: a plain suffix pass
    uses it as it is."""
    states: list[LayerStates | None] = [None if cache is None else cache.get(prefix) for prefix in prefixes]
    fresh: dict[tuple[int, ...], list[int]] = {}
    for n, found in enumerate(states):
        if found is None:
            fresh.setdefault(tuple(prefixes[n]), []).append(n)
    if not fresh:
        return states, None  # type: ignore[return-value]
    layers, mask = run_prefixes(model, list(fresh), pad, device, side, right_padding_free)
    for row, (prefix, where) in enumerate(fresh.items()):
        columns = real_columns(len(prefix), mask.shape[1], side)
        own = [(keys[row : row + 1, :, columns], values[row : row + 1, :, columns]) for keys, values in layers]
        kept = cache.put(prefix, own) if cache is not None else None
        for n in where:
            states[n] = kept or own
    every_one_once = len(fresh) == len(prefixes)
    return states, (layers, mask) if every_one_once else None  # type: ignore[return-value]


def stacked(states: Sequence[LayerStates], side: str):
    """Per-prefix states padded (with zeros, masked) into one batch: per layer a function that builds it when the
    suffix pass reaches that layer (one layer's copy at a time), and the prefix mask."""
    lengths = [group[0][0].shape[-2] for group in states]
    width = max(lengths)
    prefix_mask = torch.zeros((len(states), width), dtype=torch.long)
    for row, length in enumerate(lengths):
        prefix_mask[row, real_columns(length, width, side)] = 1

    def build(layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = states[0][layer]
        shape = (len(states), keys.shape[1], width, keys.shape[-1])
        stacked_keys, stacked_values = keys.new_zeros(shape), values.new_zeros(shape)
        for row, group in enumerate(states):
            columns = real_columns(lengths[row], width, side)
            stacked_keys[row, :, columns], stacked_values[row, :, columns] = group[layer][0][0], group[layer][1][0]
        return stacked_keys, stacked_values

    return [lambda layer=layer: build(layer) for layer in range(len(states[0]))], prefix_mask


def suffix_cache(layers: Sequence, width: int, counts: torch.Tensor):
    """A cache for the suffix pass: each layer hands out its prefix keys/values once -- every prefix row repeated
    once per suffix of its group, followed by the suffixes' own -- and then lets them go. A layer's prefix states
    are (keys, values), a function that builds them when the layer runs, or None: the split pass, which reads them
    from its `SplitPrefix`, so the layer hands out the suffixes' own only.

    Only what a forward with position ids given reads is kept: `get_seq_length` is the padded prefix width (for
    every row) and the layers hold no keys/values of their own; the cache is not for generation or cropping."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    class PrefixOnceLayer(DynamicLayer):
        def __init__(self, states):
            super().__init__()
            self.states, self.is_sliding, self.length, self.is_initialized = states, False, width, True

        def update(self, key_states, value_states, *args, **kwargs):
            states, self.states = self.states, None
            if states is None:
                return key_states, value_states
            keys, values = states() if callable(states) else states
            return repeat_then(keys, key_states, counts), repeat_then(values, value_states, counts)

        def get_seq_length(self) -> int:
            return self.length

    cache = DynamicCache()
    cache.layers = [PrefixOnceLayer(states) for states in layers]
    return cache


def repeat_then(prefix: torch.Tensor, suffix: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """[groups, heads, P, dim] + [rows, heads, S, dim] -> [rows, heads, P + S, dim], each group's prefix repeated
    `counts[group]` times (rows = counts.sum())."""
    length = prefix.shape[-2]
    out = prefix.new_empty((suffix.shape[0], prefix.shape[1], length + suffix.shape[-2], prefix.shape[-1]))
    out[:, :, :length] = prefix.repeat_interleave(counts.to(prefix.device), dim=0)
    out[:, :, length:] = suffix
    return out
