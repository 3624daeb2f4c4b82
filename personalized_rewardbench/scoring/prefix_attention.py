"""Suffix attention over a shared prefix without repeating the prefix (the "split" suffix pass).

The plain suffix pass (`prefix_states.suffix_cache`) hands every layer a copy of its group's prefix keys/values
for each suffix row and lets attention apply a [rows, 1, suffix, prefix + suffix] mask. With N suffixes per
prefix that copies the prefix N times per layer (twice more for grouped-query heads) and keeps SDPA on its
masked path. The split pass computes the same attention in two parts and merges them exactly:

- over the prefix: all suffix queries of a group, as one row, against that group's real prefix columns (no
  padding, no mask, no copy per suffix);
- over the suffix itself: each row against its own keys with the causal kernel;
- merged by each part's log-sum-exp: `out = (e^lse1 out1 + e^lse2 out2) / (e^lse1 + e^lse2)`.

Where it runs (`split_supported`): a CPU model whose attention is transformers' `sdpa` (PyTorch's CPU flash kernel
returns the log-sum-exp), with no sliding-window layers, scoring right-padded suffixes (a causal row never sees
padding after it). Elsewhere, and for any model whose attention modules do not read the attention interface, the
plain pass runs; the classifier's check before its first shared batch compares the split pass with full scoring
and keeps the plain pass when they differ.

How it reaches the model: while any split forward runs on a model (`split_forward`, counted per model, so
nested or concurrent ones keep it), the model's configs name the attention implementation `ATTENTION`,
registered with transformers' attention and mask interfaces. Both delegate to `sdpa` unless the calling thread
is inside a split forward, so another thread's ordinary forward on the same model is unaffected; the model's
reported attention implementation stays `sdpa` (`reported_implementation`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import torch

ATTENTION = "prbench_split_prefix"
#: Attention arguments the split pass does not implement: a model that passes one keeps the plain pass.
_UNSUPPORTED = ("position_bias", "softcap", "sliding_window", "s_aux", "sinks")


@dataclass(frozen=True)
class SplitPrefix:
    """What the split attention needs besides the suffix's own states: each group's prefix states (per layer
    (keys, values) over its real columns, [1, kv heads, length, dim]) and its number of suffix rows."""

    states: Sequence[Sequence[tuple[torch.Tensor, torch.Tensor]]]
    counts: Sequence[int]


_ACTIVE: ContextVar[SplitPrefix | None] = ContextVar("prbench_split_prefix", default=None)


def split_supported(model, device) -> bool:
    """Whether `model` may run the split suffix pass: a CPU model on transformers' sdpa attention whose cache has
    no sliding-window layers (the caller has checked `shared_prefix_support`)."""
    from personalized_rewardbench.scoring.shared_prefix import shared_prefix_support

    if torch.device(device).type != "cpu" or not hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu"):
        return False
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    return not shared_prefix_support(model).sliding


_switch_lock = threading.Lock()
_switched: dict[int, tuple[int, list]] = {}  # id(model) -> (split forwards running on it, the configs switched)


@contextmanager
def split_forward(model, prefix: SplitPrefix) -> Iterator[None]:
    """Run the forward inside this block with the split attention (the suffix cache returns the suffix's own
    keys/values only); the model's configs go back to sdpa when the last split forward on it ends."""
    _register()
    with _switch_lock:
        running, configs = _switched.get(id(model), (0, []))
        if not running:
            configs = list({id(config): config for config in _configs(model)}.values())
            for config in configs:
                config._attn_implementation_internal = ATTENTION
        _switched[id(model)] = (running + 1, configs)
    token = _ACTIVE.set(prefix)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
        with _switch_lock:
            running, configs = _switched.pop(id(model))
            if running > 1:
                _switched[id(model)] = (running - 1, configs)
            else:
                for config in configs:
                    config._attn_implementation_internal = "sdpa"


def _configs(model) -> Iterator:
    """Every config object the model's modules read their attention implementation from (on sdpa)."""
    for module in model.modules():
        config = getattr(module, "config", None)
        if getattr(config, "_attn_implementation_internal", None) == "sdpa":
            yield config


def reported_implementation(name: str | None) -> str | None:
    """The attention implementation to report for a config's `name`: the split attention is sdpa's."""
    return "sdpa" if name == ATTENTION else name


_registered = False


def _register() -> None:
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(ATTENTION, _attention)
    AttentionMaskInterface.register(ATTENTION, _mask)
    _registered = True


def _mask(*args, **kwargs):
    """No mask inside a split forward (the split attention needs none); sdpa's own mask elsewhere."""
    if _ACTIVE.get() is not None:
        return None
    from transformers.masking_utils import sdpa_mask

    return sdpa_mask(*args, **kwargs)


def _attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """transformers' attention-function signature: [rows, heads, suffix, dim] query and the suffix's own
    [rows, kv heads, suffix, dim] keys/values -> ([rows, suffix, heads, dim], None)."""
    prefix = _ACTIVE.get()
    if prefix is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    unsupported = sorted(name for name in _UNSUPPORTED if kwargs.get(name) is not None)
    if attention_mask is not None:  # `_mask` gives none here: the model built its own, which this pass cannot apply
        unsupported.append("the model's own attention mask")
    if kwargs.get("is_causal") is False:
        unsupported.append("bidirectional attention")
    if unsupported or dropout:
        raise ValueError(f"the split suffix pass cannot apply {', '.join(unsupported) or 'dropout'}")
    out = split_attention(query, key, value, prefix, module.layer_idx, scaling)
    return out.transpose(1, 2).contiguous(), None


def split_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, prefix: SplitPrefix, layer: int, scale
) -> torch.Tensor:
    """Attention of every suffix row over its group's prefix and, causally, over itself: [rows, heads, suffix, dim]."""
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    rows, heads, length, dim = query.shape
    repeat = heads // key.shape[1]
    own, own_lse = flash(query, _heads(key, repeat), _heads(value, repeat), 0.0, True, scale=scale)
    outs, lses, start = [], [], 0
    for states, count in zip(prefix.states, prefix.counts):
        # the group's suffix queries as one row of count x length queries
        joined = query[start : start + count].transpose(0, 1).reshape(1, heads, count * length, dim)
        keys, values = states[layer]
        out, lse = flash(joined, _heads(keys, repeat), _heads(values, repeat), 0.0, False, scale=scale)
        outs.append(out.reshape(heads, count, length, dim).transpose(0, 1))
        lses.append(lse.reshape(heads, count, length).transpose(0, 1))
        start += count
    over_prefix, prefix_lse = torch.cat(outs), torch.cat(lses)
    top = torch.maximum(prefix_lse, own_lse)
    weight_prefix, weight_own = (prefix_lse - top).exp(), (own_lse - top).exp()
    merged = over_prefix.float() * weight_prefix[..., None] + own.float() * weight_own[..., None]
    return (merged / (weight_prefix + weight_own)[..., None]).to(query.dtype)


def _heads(states: torch.Tensor, repeat: int) -> torch.Tensor:
    """Grouped-query key/value heads repeated to the query heads."""
    return states if repeat == 1 else states.repeat_interleave(repeat, dim=1)
