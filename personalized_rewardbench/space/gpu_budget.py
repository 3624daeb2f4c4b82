"""GPU time a Space request needs, and the refusals when it is over the per-run limit.

On ZeroGPU the quota is charged on the requested duration, so the Space asks for an estimate:
seconds = max(floor, fixed + size_b * (load + tokens * per-token cost * type factor)) + preload, tokens
being both answers' inputs (estimated from characters, capped at the model's max length). The floor and
`preload` (copying every preloaded model into a fresh worker, `preload_seconds`) cover what a fresh
ZeroGPU worker does before scoring: fork, CUDA init and the model copy. The estimate is recorded in
the run's results.json (`runtime.gpu_seconds_requested`) so it can be tuned from real runs. A request over the limit is
refused before anything runs, with the largest number of pairs per subset that fits — or, when not
even one pair fits, with the plain fact that the model cannot run within this Space's limit.

>>> from personalized_rewardbench.space.allowlist import AllowedModel
>>> estimate_gpu_seconds(AllowedModel("baseline:length", "baseline"), [])
0
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.prompts import user_message
from personalized_rewardbench.scoring.registry import resolve_spec
from personalized_rewardbench.space.allowlist import AllowedModel

FIXED_SECONDS = 10.0
LOAD_SECONDS_PER_B = 3.0
SECONDS_PER_TOKEN_PER_B = 4e-5  # bf16 forward at ~25 % of a ZeroGPU slice, with margin
CHARS_PER_TOKEN = 3.0  # conservative (English averages ~4)
MIN_TOKENS = 32  # chat-template overhead of one input
# judge-pairwise reads both answers in both orders; judge-score reads each answer once (logits mode)
TYPE_FACTOR = {"classifier": 1.0, "judge-pairwise": 2.0, "judge-score": 1.5, "baseline": 0.0}
FLOOR_SECONDS = 20.0  # a fresh worker: fork and CUDA init, whatever the request
COPY_GB_PER_SECOND = 2.0  # preloaded weights copied into a fresh worker (conservative)
BYTES_PER_PARAM = {"float32": 4, "auto": 2, "bfloat16": 2, "float16": 2}


def preload_seconds(models: Sequence[AllowedModel]) -> float:
    """Seconds a fresh ZeroGPU worker spends copying the weights of the preloaded `models`.

    >>> preload_seconds([AllowedModel("a/b", "classifier", size_b=1.0), AllowedModel("c/d", "classifier", size_b=1.5)])
    2.5
    """
    gigabytes = sum(m.size_b * BYTES_PER_PARAM.get(m.dtype, 2) for m in models if not m.is_baseline)
    return gigabytes / COPY_GB_PER_SECOND


def _pair_tokens(model: AllowedModel, item: EvalItem) -> int:
    """Tokens of both inputs of a pair (the longer answer counted twice), capped at the model's max length."""
    cap = model.max_length or resolve_spec(model.id).max_length
    characters = len(user_message(item)) + max(len(item.chosen), len(item.rejected))
    return 2 * min(cap, int(characters / CHARS_PER_TOKEN) + MIN_TOKENS)


def _seconds(model: AllowedModel, tokens: int, preload: float = 0.0) -> int:
    work = model.size_b * (LOAD_SECONDS_PER_B + tokens * SECONDS_PER_TOKEN_PER_B * TYPE_FACTOR[model.type])
    return math.ceil(max(FLOOR_SECONDS, FIXED_SECONDS + work) + preload)


def estimate_gpu_seconds(model: AllowedModel, items: Sequence[EvalItem], preload: float = 0.0) -> int:
    """GPU seconds to score `items` with `model` (pairs x tokens x model size, at least the floor, plus the
    preloaded models' copy time `preload`); 0 for baselines."""
    if model.is_baseline:
        return 0
    return _seconds(model, sum(_pair_tokens(model, item) for item in items), preload)


def smallest_request_seconds(model: AllowedModel, preload: float = 0.0) -> int:
    """GPU seconds of the cheapest possible request: loading the model and one minimal pair."""
    return 0 if model.is_baseline else _seconds(model, 2 * MIN_TOKENS, preload)


def _cannot_run(model: AllowedModel, cap: float, preload: float = 0.0) -> UserError:
    return UserError(
        f"{model.id} cannot run within this Space's GPU limit of {cap:g} s per request "
        f"(loading it and scoring a single short pair needs about {smallest_request_seconds(model, preload)} s); "
        "choose a smaller model"
    )


def check_run_budget(
    model: AllowedModel, items: Sequence[EvalItem], limit: int, cap: float, preload: float = 0.0
) -> int:
    """The seconds to request for `items` (the first `limit` pairs of each subset), or a refusal.

    The refusal names the largest number of pairs per subset whose estimate fits `cap`."""
    seconds = estimate_gpu_seconds(model, items, preload)
    if seconds <= cap:
        return seconds
    if smallest_request_seconds(model, preload) > cap:
        raise _cannot_run(model, cap, preload)
    tokens_at = [0] * limit  # tokens of the pairs at each position within their subset
    position: dict[str, int] = {}
    for item in items:
        index = position.get(item.subset, 0)
        position[item.subset] = index + 1
        tokens_at[min(index, limit - 1)] += _pair_tokens(model, item)
    fitting, tokens = 0, 0
    for count in range(1, limit):
        tokens += tokens_at[count - 1]
        if _seconds(model, tokens, preload) > cap:
            break
        fitting = count
    if fitting == 0:
        raise UserError(
            f"even one pair per subset needs about {_seconds(model, tokens_at[0], preload)} s of GPU time, "
            f"over this Space's limit of {cap:g} s per run; choose fewer subsets or a smaller profile-k"
        )
    raise UserError(
        f"this run needs about {seconds} s of GPU time, over this Space's limit of {cap:g} s per run; "
        f"ask for at most {fitting} pairs per subset (or fewer subsets, or a smaller profile-k)"
    )


def check_pair_budget(model: AllowedModel, item: EvalItem, cap: float, preload: float = 0.0) -> int:
    """The seconds to request for one visitor pair, or a refusal (shorten the texts, or the model is too big)."""
    seconds = estimate_gpu_seconds(model, [item], preload)
    if seconds <= cap:
        return seconds
    if smallest_request_seconds(model, preload) > cap:
        raise _cannot_run(model, cap, preload)
    raise UserError(
        f"scoring this pair needs about {seconds} s of GPU time, over the limit of {cap:g} s; shorten the texts"
    )
