"""GPU time a Space request needs, and the refusals when it is over the per-run limit.

On ZeroGPU the quota is charged on the requested duration, so the Space asks for an estimate:
seconds = fixed + size_b * (load + tokens * per-token cost * type factor), tokens being both answers'
inputs (estimated from characters, capped at the model's max length). A request over the limit is
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


def _pair_tokens(model: AllowedModel, item: EvalItem) -> int:
    """Tokens of both inputs of a pair (the longer answer counted twice), capped at the model's max length."""
    cap = model.max_length or resolve_spec(model.id).max_length
    characters = len(user_message(item)) + max(len(item.chosen), len(item.rejected))
    return 2 * min(cap, int(characters / CHARS_PER_TOKEN) + MIN_TOKENS)


def _seconds(model: AllowedModel, tokens: int) -> int:
    work = model.size_b * (LOAD_SECONDS_PER_B + tokens * SECONDS_PER_TOKEN_PER_B * TYPE_FACTOR[model.type])
    return math.ceil(FIXED_SECONDS + work)


def estimate_gpu_seconds(model: AllowedModel, items: Sequence[EvalItem]) -> int:
    """GPU seconds to score `items` with `model` (pairs x tokens x model size); 0 for baselines."""
    if model.is_baseline:
        return 0
    return _seconds(model, sum(_pair_tokens(model, item) for item in items))


def smallest_request_seconds(model: AllowedModel) -> int:
    """GPU seconds of the cheapest possible request: loading the model and one minimal pair."""
    return 0 if model.is_baseline else _seconds(model, 2 * MIN_TOKENS)


def _cannot_run(model: AllowedModel, cap: float) -> UserError:
    return UserError(
        f"{model.id} cannot run within this Space's GPU limit of {cap:g} s per request "
        f"(loading it and scoring a single short pair needs about {smallest_request_seconds(model)} s); "
        "choose a smaller model"
    )


def check_run_budget(model: AllowedModel, items: Sequence[EvalItem], limit: int, cap: float) -> int:
    """The seconds to request for `items` (the first `limit` pairs of each subset), or a refusal.

    The refusal names the largest number of pairs per subset whose estimate fits `cap`."""
    seconds = estimate_gpu_seconds(model, items)
    if seconds <= cap:
        return seconds
    if smallest_request_seconds(model) > cap:
        raise _cannot_run(model, cap)
    tokens_at = [0] * limit  # tokens of the pairs at each position within their subset
    position: dict[str, int] = {}
    for item in items:
        index = position.get(item.subset, 0)
        position[item.subset] = index + 1
        tokens_at[min(index, limit - 1)] += _pair_tokens(model, item)
    fitting, tokens = 0, 0
    for count in range(1, limit):
        tokens += tokens_at[count - 1]
        if _seconds(model, tokens) > cap:
            break
        fitting = count
    if fitting == 0:
        raise UserError(
            f"even one pair per subset needs about {_seconds(model, tokens_at[0])} s of GPU time, over this Space's "
            f"limit of {cap:g} s per run; choose fewer subsets or a smaller profile-k"
        )
    raise UserError(
        f"this run needs about {seconds} s of GPU time, over this Space's limit of {cap:g} s per run; "
        f"ask for at most {fitting} pairs per subset (or fewer subsets, or a smaller profile-k)"
    )


def check_pair_budget(model: AllowedModel, item: EvalItem, cap: float) -> int:
    """The seconds to request for one visitor pair, or a refusal (shorten the texts, or the model is too big)."""
    seconds = estimate_gpu_seconds(model, [item])
    if seconds <= cap:
        return seconds
    if smallest_request_seconds(model) > cap:
        raise _cannot_run(model, cap)
    raise UserError(
        f"scoring this pair needs about {seconds} s of GPU time, over the limit of {cap:g} s; shorten the texts"
    )
