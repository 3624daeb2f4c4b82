"""verl reward functions that ask a running reward server (`prbench serve-reward`) for personalized scores.

verl configuration (prompt data from `prbench reward-data --format verl`, whose `extra_info` carries
the question and the ranked posts)::

    custom_reward_function.path=<this file>
    custom_reward_function.name=compute_score_batch      # with reward_model.reward_manager=batch
    +custom_reward_function.reward_kwargs.url=http://127.0.0.1:8000

or `custom_reward_function.name=compute_score` with the default (per-sample) reward manager. Without a
`url` keyword the server is `$PRBENCH_REWARD_URL`, else http://127.0.0.1:8000.

A failed call is retried (connection errors, 5xx, 503 busy) a bounded number of times with backoff, then
`RewardServerError` is raised: a reward is never made up. A 4xx answer (a request the server refuses)
is raised at once. This module uses only the standard library, so verl's workers can load it by path.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_RETRIES = 3  # attempts after the first
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_BACKOFF_S = 1.0


class RewardServerError(RuntimeError):
    """The reward server gave no scores (unreachable after the retries, or it refused the request)."""


def _item(solution_str: str, extra_info: Mapping[str, Any] | None) -> dict[str, Any]:
    if not extra_info or not isinstance(extra_info.get("question"), str):
        raise RewardServerError(
            "extra_info has no 'question': write the prompt data with `prbench reward-data --format verl`"
        )
    item: dict[str, Any] = {"question": extra_info["question"], "response": solution_str}
    for key in ("posts", "profile"):
        if extra_info.get(key) is not None:
            item[key] = [dict(post) if isinstance(post, Mapping) else post for post in extra_info[key]]
    if isinstance(extra_info.get("id"), str):
        item["id"] = extra_info["id"]
    return item


def _post(url: str, items: list[dict[str, Any]], timeout: float) -> dict[str, Any]:
    request = urllib.request.Request(
        url.rstrip("/") + "/score",
        data=json.dumps(items).encode("utf-8"),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def score_items(
    items: list[dict[str, Any]],
    *,
    url: str | None = None,
    retries: int = DEFAULT_RETRIES,
    timeout: float = DEFAULT_TIMEOUT_S,
    backoff: float = DEFAULT_BACKOFF_S,
) -> list[float]:
    """POST `items` to the server's /score; retries `retries` times, then raises `RewardServerError`."""
    url = url or os.environ.get("PRBENCH_REWARD_URL", DEFAULT_URL)
    last = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff * 2 ** (attempt - 1))
        try:
            answer = _post(url, items, timeout)
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", "replace")[:500]
            if 400 <= error.code < 500 and error.code not in (408, 429):
                raise RewardServerError(f"reward server {url} refused the request ({error.code}): {detail}") from None
            last = f"HTTP {error.code}: {detail}"
            continue
        except (urllib.error.URLError, OSError, TimeoutError, json.JSONDecodeError) as error:
            last = f"{type(error).__name__}: {getattr(error, 'reason', error)}"
            continue
        scores = answer.get("scores") if isinstance(answer, dict) else None
        if not isinstance(scores, list) or len(scores) != len(items):
            raise RewardServerError(f"reward server {url} answered without one score per item: {str(answer)[:200]}")
        if any(score is None for score in scores):
            raise RewardServerError(f"reward server {url} could not rate some responses (null scores)")
        return [float(score) for score in scores]
    raise RewardServerError(f"reward server {url} gave no scores after {retries + 1} attempts; last error: {last}")


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> float:
    """verl's per-sample reward: the server's score of `solution_str` for the prompt in `extra_info`."""
    return score_items([_item(solution_str, extra_info)], **_options(kwargs))[0]


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any] | None = None,
    extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
    **kwargs: Any,
) -> list[float]:
    """verl's batched reward (`reward_model.reward_manager=batch`): one request per `max_items` responses."""
    extras = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    items = [_item(solution, extra) for solution, extra in zip(solution_strs, extras)]
    chunk = int(kwargs.pop("max_items", 256))
    options = _options(kwargs)
    scores: list[float] = []
    for start in range(0, len(items), chunk):
        scores += score_items(items[start : start + chunk], **options)
    return scores


def _options(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The server options among verl's reward kwargs (`url`, `retries`, `timeout`, `backoff`)."""
    return {key: kwargs[key] for key in ("url", "retries", "timeout", "backoff") if key in kwargs}
