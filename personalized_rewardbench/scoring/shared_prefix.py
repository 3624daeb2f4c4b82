"""Shared-prefix scoring: run the part of a pair's inputs that chosen and rejected share once, keep its
KV cache, and score both answers from it.

A pair's two inputs are the same chat up to the answer, so a decoder-only reward model computes the
same hidden states for that common prefix twice. Here the base model runs the prefixes of a batch of
pairs once (right-padded, with an attention mask), the cache is repeated for the two answers, and the
answers (the suffixes) run on top of it with the positions they have in the full input. The score
head is applied to the hidden state of the token the model's own forward pools — the last token that
is not the pad token — so the scores equal full scoring up to float rounding.

Which pairs may share (`pair_layout`): the prompt (the chat up to the start of the answer) must be a
token-for-token prefix of both full inputs — chat templates and tokenizers can merge across the
boundary, and then that pair is scored in full. The shared part is the longest common prefix of the
two inputs (it always holds for a causal model), cut so that each suffix keeps its pooled token.

Which models may share (`shared_prefix_support`): `*ForSequenceClassification` classes built on
transformers' generic last-token head (Llama, Qwen2/3, Mistral, Gemma, Phi-3, ...) whose KV cache is
plain full-attention or sliding-window layers. Encoders and custom heads are scored in full.

>>> common_prefix_length([1, 2, 3, 4], [1, 2, 5])
2
>>> shared_prefix_batches([(10, 2), (9, 3), (4, 1)], budget=32)
[[1, 0], [2]]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

#: Prefix lengths within this many tokens count as equal when batches are formed (see `shared_prefix_batches`).
_PREFIX_STEP = 16


@dataclass(frozen=True)
class PairLayout:
    """How one pair is scored: `prefix` > 0 tokens shared, or 0 (full scoring) with the `reason`."""

    prefix: int
    reason: str = ""


def common_prefix_length(first: Sequence[int], second: Sequence[int]) -> int:
    """Number of leading token ids `first` and `second` have in common."""
    count = 0
    for a, b in zip(first, second):
        if a != b:
            break
        count += 1
    return count


def pooled_index(ids: Sequence[int], pad_token_id: int | None) -> int:
    """Index the model's own forward pools: the last token that is not the pad token (-1: none)."""
    if pad_token_id is None:
        return len(ids) - 1
    for index in range(len(ids) - 1, -1, -1):
        if ids[index] != pad_token_id:
            return index
    return -1


def group_layout(prompt: Sequence[int], inputs: Sequence[Sequence[int]], pad_token_id: int | None) -> PairLayout:
    """Shared-prefix length for the full inputs of one prompt's answers, or 0 with the reason they must be scored
    in full: the prompt must be a token prefix of every input; the shared part is their longest common prefix, cut
    so that each suffix keeps its pooled token."""
    size = len(prompt)
    if not prompt or any(list(ids[:size]) != list(prompt) for ids in inputs):
        return PairLayout(
            0,
            "the prompt's tokens are not a prefix of the full input: the template or tokenizer merges across the answer boundary",
        )
    first = inputs[0]
    shared = min(
        [common_prefix_length(first, other) for other in inputs[1:]]
        + [pooled_index(ids, pad_token_id) for ids in inputs]
    )
    if shared < 1:
        return PairLayout(0, "no shared prefix before the pooled token")
    return PairLayout(shared)


def pair_layout(
    prompt: Sequence[int], chosen: Sequence[int], rejected: Sequence[int], pad_token_id: int | None
) -> PairLayout:
    """Shared-prefix length for one pair, or 0 with the reason it must be scored in full (see `group_layout`)."""
    return group_layout(prompt, [chosen, rejected], pad_token_id)


def shared_prefix_support(model) -> tuple[bool, str, int | None]:
    """(supported, reason when not, longest padded prefix + suffix allowed or None for no limit)."""
    from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer
    from transformers.modeling_layers import GenericForSequenceClassification

    name = type(model).__name__
    config = model.config
    if config.is_encoder_decoder or not isinstance(model, GenericForSequenceClassification):
        return False, f"{name} is not a decoder-only model with the generic last-token score head", None
    if not isinstance(getattr(model, "score", None), torch.nn.Linear) or model.base_model is model:
        return False, f"{name} has no separate base model and linear `score` head", None
    if not getattr(config.get_text_config(), "is_causal", True):
        return False, f"{name} is configured with bidirectional attention", None
    try:
        layers = DynamicCache(config=config).layers
    except Exception as error:  # noqa: BLE001 - any failure means: do not share
        return False, f"cannot build a KV cache for {name} ({type(error).__name__})", None
    limit: int | None = None
    for layer in layers:
        if type(layer) is DynamicSlidingWindowLayer:
            limit = min(limit or layer.sliding_window, layer.sliding_window)
        elif type(layer) is not DynamicLayer:
            return False, f"{name} uses {type(layer).__name__} cache layers", None
    return True, "", None if limit is None else limit - 1


def shared_prefix_batches(
    shapes: Sequence[tuple[int, ...]], budget: int, max_batch: int = 256, max_length: int | None = None
) -> list[list[int]]:
    """Group (prefix length, longest suffix length[, suffix count = 2]) shapes so that
    `batch size x longest prefix + suffix rows x longest suffix <= budget` (each prefix runs once, each suffix
    on top of it) and, with `max_length`, `longest prefix + longest suffix <= max_length`.
    A group over the budget on its own gets a batch of its own.

    Groups are sorted by prefix length in steps of `_PREFIX_STEP` tokens, then by suffix length, both
    longest first: sorting by prefix alone leaves the suffixes' padding to chance (a fifth of all
    positions at profile-k 0), sorting by both this way keeps padding to a few per cent.
    """
    order = sorted(range(len(shapes)), key=lambda i: (-(shapes[i][0] // _PREFIX_STEP), -shapes[i][1], -shapes[i][0], i))
    batches: list[list[int]] = []
    current: list[int] = []
    prefix = suffix = rows = 0
    for index in order:
        count = _count(shapes[index])
        p, s = max(prefix, shapes[index][0]), max(suffix, shapes[index][1])
        too_big = (len(current) + 1) * p + (rows + count) * s > budget or (
            max_length is not None and p + s > max_length
        )
        if current and (too_big or len(current) >= max_batch):
            batches.append(current)
            current, p, s, rows = [], shapes[index][0], shapes[index][1], 0
        current.append(index)
        prefix, suffix, rows = p, s, rows + count
    if current:
        batches.append(current)
    return batches


def _count(shape: tuple[int, ...]) -> int:
    return shape[2] if len(shape) > 2 else 2


def shared_prefix_cost(shapes: Sequence[tuple[int, ...]]) -> int:
    """Token positions one shared-prefix batch computes: the padded prefixes once, each padded suffix once."""
    return len(shapes) * max(s[0] for s in shapes) + sum(map(_count, shapes)) * max(s[1] for s in shapes)


def _right_pad(rows: Sequence[Sequence[int]], width: int, pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for row, tokens in enumerate(rows):
        ids[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        mask[row, : len(tokens)] = 1
    return ids, mask


def _suffix_cache(prefix_cache, counts: torch.Tensor):
    """A cache for the suffix pass: each layer hands out its prefix keys/values once -- every prefix row repeated
    once per suffix of its group, followed by the suffixes' own -- and then lets them go, so no layer holds
    prefix + suffix states after its attention has run."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    class PrefixOnceLayer(DynamicLayer):
        def __init__(self, keys: torch.Tensor, values: torch.Tensor, is_sliding: bool):
            super().__init__()
            self.lazy_initialization(keys, values)
            self.keys, self.values, self.is_sliding, self.length = keys, values, is_sliding, keys.shape[-2]

        def update(self, key_states, value_states, *args, **kwargs):
            keys, values = _repeat_then(self.keys, key_states, counts), _repeat_then(self.values, value_states, counts)
            self.keys = self.values = None
            return keys, values

        def get_seq_length(self) -> int:
            return self.length

    cache = DynamicCache()
    cache.layers = [PrefixOnceLayer(layer.keys, layer.values, layer.is_sliding) for layer in prefix_cache.layers]
    return cache


def _repeat_then(prefix: torch.Tensor, suffix: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """[groups, heads, P, dim] + [rows, heads, S, dim] -> [rows, heads, P + S, dim], each group's prefix repeated
    `counts[group]` times (rows = counts.sum())."""
    length = prefix.shape[-2]
    out = prefix.new_empty((suffix.shape[0], prefix.shape[1], length + suffix.shape[-2], prefix.shape[-1]))
    out[:, :, :length] = prefix.repeat_interleave(counts.to(prefix.device), dim=0)
    out[:, :, length:] = suffix
    return out


@torch.inference_mode()
def shared_prefix_logits(
    model,
    groups: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]],
    pad_token_id: int,
    device: torch.device | str,
) -> torch.Tensor:
    """Pooled logits, one row per suffix in order (group 0's suffixes, then group 1's, ...), for
    (prefix, suffixes) groups: a pair is (prefix, (chosen suffix, rejected suffix)), Best-of-N has N suffixes.

    Each suffix must be non-empty and hold its input's pooled token (see `group_layout`).
    """
    from transformers.cache_utils import DynamicCache

    base = model.base_model
    prefixes = [prefix for prefix, _ in groups]
    suffixes = [suffix for _, group in groups for suffix in group]
    counts = torch.tensor([len(group) for _, group in groups], dtype=torch.long)
    prefix_ids, prefix_mask = _right_pad(prefixes, max(map(len, prefixes)), pad_token_id)
    positions = torch.arange(prefix_ids.shape[1]).expand_as(prefix_ids)
    prefix_cache = DynamicCache(config=model.config)
    base(
        input_ids=prefix_ids.to(device),
        attention_mask=prefix_mask.to(device),
        position_ids=positions.to(device),
        past_key_values=prefix_cache,
        use_cache=True,
    )
    cache = _suffix_cache(prefix_cache, counts)
    del prefix_cache

    suffix_ids, suffix_mask = _right_pad(suffixes, max(map(len, suffixes)), pad_token_id)
    starts = torch.tensor([len(prefix) for prefix in prefixes], dtype=torch.long).repeat_interleave(counts)
    suffix_positions = starts[:, None] + torch.arange(suffix_ids.shape[1])[None, :]
    attention = torch.cat([prefix_mask.repeat_interleave(counts, dim=0), suffix_mask], dim=1)
    hidden = base(
        input_ids=suffix_ids.to(device),
        attention_mask=attention.to(device),
        position_ids=suffix_positions.to(device),
        past_key_values=cache,
        use_cache=True,
    ).last_hidden_state
    last = torch.tensor([pooled_index(suffix, pad_token_id) for suffix in suffixes], device=hidden.device)
    pooled = hidden[torch.arange(len(suffixes), device=hidden.device), last]
    return model.score(pooled)
