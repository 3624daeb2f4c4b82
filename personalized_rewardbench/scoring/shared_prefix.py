"""The one shared-prefix mechanism: run the tokens that several inputs share once, keep their KV cache, and run
every input's own rest (its suffix) on top of it -- for classifier reward models (a pair's two answers, or N
Best-of-N / RL answers, after one prompt) and for LLM judges (a pair's two orders, an item's rated answers).

How (`prefix_pass`): the base model runs a batch of prefixes once with a plain `DynamicCache`; a suffix cache
then hands every layer its prefix keys/values once, each prefix row repeated for every suffix of its group
(any number per group), followed by the suffixes' own, and lets them go (no layer holds prefix + suffix states
after its attention has run). Suffixes get the position ids they have in the full input, so the outputs equal
full forwards up to float rounding. Readers: `pooled_logits` (a sequence-classification head on the hidden
state of the pooled token: the last that is not the pad token) and `last_logits` (a causal LM's next-token
logits after each suffix's last `last` positions).

Split suffix pass (`prefix_attention`, classifiers on a CPU with sdpa attention): instead of the repeated
prefix and a mask, each layer attends to a group's prefix once for all its suffixes and merges that with the
suffixes' own causal attention by log-sum-exp (1.3-1.4x faster shared-prefix batches of 8 suffixes of 300
tokens on a 2,800-token prefix; the same scores up to float rounding).

Padding (`padding_sides`). Where every layer attends to the whole past, the side rows are padded on only moves
float rounding, and each reader keeps the side it has always used (classifier: prefixes and suffixes on the
right; judges: both on the left), so scores of the plain pass stay byte-identical to earlier runs. A
sliding-window layer counts its window in cache columns, so padding *between* a row's prefix and its suffix
would shift the window: with any sliding layer, prefixes are padded on the left and suffixes on the right,
every row's real tokens are contiguous columns, and the window counts exactly the distances the full input
has (a judge then reads its logits at per-row positions, transformers' 2D `logits_to_keep`).

Prefix cache (`cache`, a `PrefixCache`): prefixes run in an earlier batch are not run again; their states are
padded into the batch (plain pass) or read as they are (split pass). The states' plumbing is `prefix_states`,
row padding and position ids are `padding`.

Masks (`needed_mask`). A causal decoder never looks ahead, so right padding changes nothing a real token sees:
on a classifier that passes `right_padding_is_free` (the decoder-only check above, then once on a real input:
a padded row without its mask must score what it scores alone) a right-padded forward goes without its mask,
and attention runs its causal kernel instead of materialising a [rows, 1, width, width] mask (up to 1.6x faster
on 3,000-token rows on a CPU; the same scores up to float rounding, byte-identical in our CPU runs). A batch
without padding never needs its mask. Judges keep their masks.

Which inputs may share: the shared part must be a token prefix of every input (`group_layout` for a prompt
and its answers -- chat templates and tokenizers can merge across the answer boundary, and then the group is
scored in full; `shared_prefix_length` for a judge's prompts).

Which models may share (`shared_prefix_support`, one check for both): decoder-only, causal attention, a KV
cache of plain full-attention or sliding-window layers (not recurrent / linear-attention ones); classifiers
need transformers' generic last-token head with a linear `score`, judges a causal LM head. Before a model's
first shared batch, its scorer compares a short real slice both ways (`agree`, one tolerance table), and
shares nothing when they differ.

>>> common_prefix_length([1, 2, 3, 4], [1, 2, 5])
2
>>> shared_prefix_length([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]])
2
>>> shared_prefix_batches([(10, 2), (9, 3), (4, 1)], budget=32)
[[1, 0], [2]]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from personalized_rewardbench.scoring.base import row_forwards
from personalized_rewardbench.scoring.padding import needed_mask, pad_rows, positions
from personalized_rewardbench.scoring.prefix_attention import SplitPrefix, split_forward
from personalized_rewardbench.scoring.prefix_cache import PrefixCache
from personalized_rewardbench.scoring.prefix_states import prefix_states, run_prefixes, stacked, suffix_cache

#: Prefix lengths within this many tokens count as equal when batches are formed (see `shared_prefix_batches`).
_PREFIX_STEP = 16
#: Shared-prefix outputs may differ from full ones by float rounding only; the check before scoring allows this.
CHECK_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-8}
CHECK_TOLERANCE_HALF = 5e-2
DISABLED = "disabled by --no-shared-prefix"


@dataclass(frozen=True)
class PairLayout:
    """How one group of inputs is scored: `prefix` > 0 tokens shared, or 0 (full scoring) with the `reason`."""

    prefix: int
    reason: str = ""


@dataclass(frozen=True)
class Support:
    """Whether a model may share prefixes (`reason` when not) and whether it has sliding-window layers."""

    supported: bool
    reason: str = ""
    sliding: bool = False


# -- which inputs share -----------------------------------------------------------------------------
def common_prefix_length(first: Sequence[int], second: Sequence[int]) -> int:
    """Number of leading token ids `first` and `second` have in common."""
    count = 0
    for a, b in zip(first, second):
        if a != b:
            break
        count += 1
    return count


def shared_prefix_length(sequences: Sequence[Sequence[int]], keep: int = 1) -> int:
    """Length of the longest common prefix of `sequences`, at most `keep` tokens short of the shortest.

    >>> shared_prefix_length([[7, 8], [7, 8]]), shared_prefix_length([[7, 8, 9], [7, 8, 9]], keep=2)
    (1, 1)
    """
    limit = max(0, min(map(len, sequences)) - keep)
    return min([limit, *(common_prefix_length(sequences[0], other) for other in sequences[1:])])


def pooled_index(ids: Sequence[int], pad_token_id: int | None) -> int:
    """Index the model's own forward pools: the last token that is not the pad token (-1: none)."""
    if pad_token_id is None:
        return len(ids) - 1
    for index in range(len(ids) - 1, -1, -1):
        if ids[index] != pad_token_id:
            return index
    return -1


def group_layout(
    prompt: Sequence[int], inputs: Sequence[Sequence[int]], pad_token_id: int | None, prompt_only: bool = False
) -> PairLayout:
    """Shared-prefix length for the full inputs of one prompt's answers, or 0 with the reason they must be scored
    in full: the prompt must be a token prefix of every input; the shared part is their longest common prefix, cut
    so that each suffix keeps its pooled token. `prompt_only`: the prompt at most (a prefix cache finds the same
    prompt again whatever answers come with it)."""
    size = len(prompt)
    if not prompt or any(list(ids[:size]) != list(prompt) for ids in inputs):
        return PairLayout(
            0,
            "the prompt's tokens are not a prefix of the full input: "
            "the template or tokenizer merges across the answer boundary",
        )
    common = [common_prefix_length(inputs[0], other) for other in inputs[1:]]
    shared = min(common + [pooled_index(ids, pad_token_id) for ids in inputs] + ([size] if prompt_only else []))
    if shared < 1:
        return PairLayout(0, "no shared prefix before the pooled token")
    return PairLayout(shared)


# -- which models share -----------------------------------------------------------------------------
def shared_prefix_support(model) -> Support:
    """One check for classifiers (`*ForSequenceClassification`) and judges (`*ForCausalLM`)."""
    from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer
    from transformers.modeling_layers import GenericForSequenceClassification

    name = type(model).__name__
    config = model.config
    if getattr(model, "get_output_embeddings", lambda: None)() is not None and hasattr(model, "lm_head"):
        if not type(model)._supports_default_dynamic_cache():
            return Support(
                False, "the model's cache is not a plain DynamicCache (recurrent or linear-attention layers)"
            )
    elif config.is_encoder_decoder or not isinstance(model, GenericForSequenceClassification):
        return Support(False, f"{name} is not a decoder-only model with the generic last-token score head")
    elif not isinstance(getattr(model, "score", None), torch.nn.Linear) or model.base_model is model:
        return Support(False, f"{name} has no separate base model and linear `score` head")
    if config.is_encoder_decoder or not getattr(config.get_text_config(), "is_causal", True):
        return Support(False, f"{name} is configured with bidirectional attention")
    try:
        layers = DynamicCache(config=config).layers
    except Exception as error:  # noqa: BLE001 - any failure means: do not share
        return Support(
            False, f"the model's cache is not a plain DynamicCache (cannot build one: {type(error).__name__})"
        )
    kinds = {type(layer) for layer in layers}
    if not kinds <= {DynamicLayer, DynamicSlidingWindowLayer}:
        other = sorted(kind.__name__ for kind in kinds - {DynamicLayer, DynamicSlidingWindowLayer})
        return Support(False, f"the model's cache is not a plain DynamicCache ({name} uses {', '.join(other)})")
    return Support(True, sliding=DynamicSlidingWindowLayer in kinds)


def agree(shared: torch.Tensor, full: torch.Tensor, dtype: torch.dtype) -> tuple[bool, float]:
    """(whether shared-prefix and full outputs agree within the dtype's tolerance, the largest difference)."""
    tolerance = CHECK_TOLERANCE.get(dtype, CHECK_TOLERANCE_HALF)
    worst = float((shared.float() - full.float()).abs().max())
    return worst <= tolerance * max(1.0, float(full.float().abs().max())), worst


def check_failed_note(worst: float) -> str:
    return f"shared-prefix scores differed from full scores by {worst:.2g} in the check before scoring"


# -- batching ---------------------------------------------------------------------------------------
def shared_prefix_batches(shapes: Sequence[tuple[int, ...]], budget: int, max_batch: int = 256) -> list[list[int]]:
    """Group (prefix length, longest suffix length[, suffix count = 2]) shapes so that
    `batch size x longest prefix + suffix rows x longest suffix <= budget` (each prefix runs once, each suffix
    on top of it). A group over the budget on its own gets a batch of its own.

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
        too_big = (len(current) + 1) * p + (rows + count) * s > budget
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


# -- the forward passes -----------------------------------------------------------------------------
Group = tuple[Sequence[int], Sequence[Sequence[int]]]  # (prefix, suffixes)


def padding_sides(model, reader: str) -> tuple[str, str]:
    """(prefix side, suffix side): "left"/"right" contiguous rows with sliding layers, else the reader's own."""
    if shared_prefix_support(model).sliding:
        return "left", "right"
    return ("right", "right") if reader == "pooled" else ("left", "left")


@torch.inference_mode()
def right_padding_is_free(model, sample: Sequence[int], pad_token_id: int, device, dtype: torch.dtype) -> bool | None:
    """Whether the sequence classifier `model` may score right-padded rows without their mask; None when
    `sample` is too short to tell (under 36 tokens: ask again with a longer input).

    Only a model `shared_prefix_support` accepts (decoder-only, causal, transformers' generic head that pools
    the last token that is not the pad token), and only if, on a real input, a short row padded to several
    times its length scores without its mask what it scores alone. Any failure keeps the mask."""
    if not shared_prefix_support(model).supported:
        return False
    long = list(sample[:96])
    short = long[:12]
    if len(long) < 3 * len(short):
        return None
    try:
        ids, _mask = pad_rows([long, short], pad_token_id, "right")
        unmasked = model(input_ids=ids.to(device), use_cache=False).logits.float()
        alone = torch.cat(
            [model(input_ids=torch.tensor([row], device=device), use_cache=False).logits for row in (long, short)]
        ).float()
    except Exception:  # noqa: BLE001 - a model that cannot run without a mask keeps it
        return False
    # relative to the logits themselves, however small: padding that a model sees must not hide in the tolerance
    tolerance = CHECK_TOLERANCE.get(dtype, CHECK_TOLERANCE_HALF)
    return bool((unmasked - alone).abs().max() <= tolerance * alone.abs().max())


@dataclass(frozen=True)
class SuffixPass:
    """The inputs of the suffix forward (`kwargs`) and the padded suffixes' lengths and side."""

    kwargs: dict[str, Any]
    lengths: list[int]
    side: str
    width: int
    split: SplitPrefix | None = None  # the split attention's prefix (`prefix_attention`), or None: plain pass


def prefix_pass(
    model,
    groups: Sequence[Group],
    pad: int,
    device,
    sides: tuple[str, str],
    right_padding_free: bool = False,
    split: bool = False,
    cache: PrefixCache | None = None,
) -> SuffixPass:
    """Run every group's prefix once through the base model; return the suffix pass that continues from it.

    `right_padding_free`: the model passed `right_padding_is_free`, so right-padded rows need no mask.
    `split`: right-padded suffixes on a model `prefix_attention.split_supported` accepts: the suffix pass
    attends to each prefix once per group instead of repeating it per suffix. `cache`: prefixes it holds
    are not run again, and the ones run here are kept in it."""
    prefix_side, suffix_side = sides
    prefixes = [prefix for prefix, _ in groups]
    suffixes = [suffix for _, group in groups for suffix in group]
    counts = torch.tensor([len(group) for _, group in groups], dtype=torch.long)
    split = split and suffix_side == "right"
    if cache is None and not split:  # the batch's padded states serve the suffix pass as they are
        layers, prefix_mask = run_prefixes(model, prefixes, pad, device, prefix_side, right_padding_free)
    else:
        states, batch = prefix_states(model, prefixes, pad, device, prefix_side, right_padding_free, cache)
        if not split:
            layers, prefix_mask = batch if batch is not None else stacked(states, prefix_side)
    suffix_ids, suffix_mask = pad_rows(suffixes, pad, suffix_side)
    starts = torch.tensor([len(prefix) for prefix in prefixes], dtype=torch.long).repeat_interleave(counts)
    if split:  # the split attention reads each prefix's real columns: no mask at all
        split_prefix, mask = SplitPrefix(states, counts.tolist()), None
        past = suffix_cache([None] * len(states[0]), max(map(len, prefixes)), counts)
    else:
        split_prefix = None
        full_mask = torch.cat([prefix_mask.repeat_interleave(counts, dim=0), suffix_mask], dim=1)
        # padding after a prefix sits between it and its suffix: only unpadded prefixes let right padding go unmasked
        free = right_padding_free and suffix_side == "right" and bool(prefix_mask.all())
        mask = needed_mask(full_mask, free)
        past = suffix_cache(layers, prefix_mask.shape[1], counts)
    kwargs = {
        "input_ids": suffix_ids.to(device),
        "attention_mask": None if mask is None else mask.to(device),
        "position_ids": positions(suffix_mask, suffix_side, starts).to(device),
        "past_key_values": past,
        "use_cache": True,
    }
    lengths = [len(suffix) for suffix in suffixes]
    return SuffixPass(kwargs, lengths, suffix_side, suffix_ids.shape[1], split_prefix)


@torch.inference_mode()
def pooled_logits(
    model,
    groups: Sequence[Group],
    pad_token_id: int,
    device,
    right_padding_free: bool = False,
    split: bool = False,
    cache: PrefixCache | None = None,
    budget: int | None = None,
) -> torch.Tensor:
    """A classifier's logits, one row per suffix in order (group 0's suffixes, then group 1's, ...), for
    (prefix, suffixes) groups: a pair is (prefix, (chosen suffix, rejected suffix)), Best-of-N has N suffixes.

    Each suffix must be non-empty and hold its input's pooled token (see `group_layout`).
    `right_padding_free`: the model passed `right_padding_is_free`; `split`: the suffix pass uses the split
    attention (`prefix_attention`; only where `split_supported`); `cache`: prefixes kept from earlier batches.
    `budget`: a lone group whose suffixes take more token positions runs them in forwards within it
    (`row_forwards`), its prefix once: kept in `cache`, or in a cache of its own while they run when `cache` is
    None or smaller than the prefix. `cache` counts the group as one lookup either way.
    """
    if budget is not None and len(groups) == 1:
        chunks = row_forwards([len(suffix) for suffix in groups[0][1]], budget)
        if len(chunks) > 1:
            return _chunked_group_logits(
                model, groups[0], chunks, pad_token_id, device, right_padding_free, split, cache
            )
    suffixes = [suffix for _, group in groups for suffix in group]
    sides = padding_sides(model, "pooled")
    run = prefix_pass(model, groups, pad_token_id, device, sides, right_padding_free, split, cache)
    if run.split is None:
        hidden = model.base_model(**run.kwargs).last_hidden_state
    else:
        with split_forward(model, run.split):
            hidden = model.base_model(**run.kwargs).last_hidden_state
    last = torch.tensor([pooled_index(suffix, pad_token_id) for suffix in suffixes], device=hidden.device)
    return model.score(hidden[torch.arange(len(suffixes), device=hidden.device), last])


def _chunked_group_logits(
    model, group: Group, chunks: list[list[int]], pad_token_id: int, device, right_padding_free, split, cache
) -> torch.Tensor:
    """`pooled_logits` of one group whose suffixes run in `chunks` (lists of suffix indices), in suffix order."""
    prefix, suffixes = group
    keeps = cache is not None and cache.max_tokens >= len(prefix)
    if cache is not None and not keeps:
        cache.get(prefix)  # the caller's cache records its one lookup: a miss, as a prompt it cannot keep
    store = cache if keeps else PrefixCache(len(prefix))

    def rows_logits(rows: list[int]) -> torch.Tensor:
        chunk = [(prefix, [suffixes[i] for i in rows])]
        return pooled_logits(model, chunk, pad_token_id, device, right_padding_free, split, store)

    parts = [rows_logits(chunks[0])]  # the group's one lookup; the prompt is kept for the chunks after it
    with store.uncounted():
        parts += [rows_logits(rows) for rows in chunks[1:]]
    order = torch.tensor([i for rows in chunks for i in rows])
    logits = torch.cat(parts)
    return logits[torch.argsort(order).to(logits.device)]


@torch.inference_mode()
def last_logits(model, groups: Sequence[Group], pad_token_id: int, device, last: int = 1) -> torch.Tensor:
    """A causal LM's float32 next-token logits after each suffix's last `last` positions: [suffixes, last, vocab],
    suffixes in order. Each suffix must hold at least `last` tokens."""
    run = prefix_pass(model, groups, pad_token_id, device, padding_sides(model, "last"))
    if run.side == "left":  # every row ends in the last column
        return model(**run.kwargs, logits_to_keep=last).logits[:, -last:].float()
    ends = torch.tensor(run.lengths)[:, None] - last + torch.arange(last)[None, :]
    return model(**run.kwargs, logits_to_keep=ends.to(device)).logits.float()
