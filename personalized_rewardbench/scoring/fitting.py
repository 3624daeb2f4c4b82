"""The over-long policy every model-backed scorer follows (classifiers and judges alike).

When an item's inputs do not fit the model's length: the lowest-ranked profile posts go first (`truncated`);
with no posts left and the inputs still too long, the question keeps its start and loses its end, marked with
`…` (`question_shortened`), the longest start that fits (cut where a token ends); an answer is never cut --
when even `…` as the question does not fit, the scorer raises a `UserError` naming the item.

>>> from personalized_rewardbench.data.eval_items import EvalItem
>>> item = EvalItem("0_0_1", "Art", "one two three four five six", (), "yes", "no")
>>> fitted = fit_item(item, lambda it: len(it.question), lambda n: n <= 14, lambda q: [3, 7, 13, 18], None)
>>> fitted.item.question, fitted.truncated, fitted.question_shortened
('one two …', False, True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Generic, NoReturn, TypeVar

from personalized_rewardbench.data.eval_items import EvalItem

#: Marks a question shortened to fit the max length (its start is kept).
ELLIPSIS = "…"

T = TypeVar("T")


@dataclass(frozen=True)
class Fitted(Generic[T]):
    """`item` as it is scored (posts that fit, question maybe shortened) and its `encoded` inputs."""

    item: EvalItem
    encoded: T
    truncated: bool  # profile posts were dropped
    question_shortened: bool = False  # no posts left and still too long: the question's end was cut


def fit_item(
    item: EvalItem,
    encode: Callable[[EvalItem], T],
    fits: Callable[[T], bool],
    cut_points: Callable[[str], list[int]],
    too_long: Callable[[EvalItem, T], NoReturn] | None,
) -> Fitted[T]:
    """Drop the lowest-ranked posts until `fits(encode(item))`, then shorten the question (binary search over
    `cut_points(question)`, character offsets where a token ends); `too_long(item, encoded)` raises when even the
    ellipsis alone does not fit."""
    for keep in range(len(item.posts), -1, -1):
        trimmed = item.with_posts(keep)
        encoded = encode(trimmed)
        if fits(encoded):
            return Fitted(trimmed, encoded, truncated=keep < len(item.posts))
    question = trimmed.question

    def shortened(cut: int) -> EvalItem:
        start = question[:cut].rstrip()
        return replace(trimmed, question=f"{start} {ELLIPSIS}" if start else ELLIPSIS)

    best = encode(shortened(0))
    if not fits(best):
        if too_long is not None:
            too_long(trimmed, best)
        raise ValueError(f"item {item.id}: the answers alone do not fit")
    cuts = cut_points(question)
    low, high = -1, len(cuts)  # cuts[low] fits (-1: the ellipsis alone), the whole question does not
    while high - low > 1:
        middle = (low + high) // 2
        encoded = encode(shortened(cuts[middle]))
        if fits(encoded):
            low, best = middle, encoded
        else:
            high = middle
    return Fitted(shortened(cuts[low] if low >= 0 else 0), best, bool(item.posts), question_shortened=True)


def token_ends(tokenizer, question: str) -> list[int]:
    """Character offsets where a token of `question` ends (every character for tokenizers without offsets)."""
    try:
        offsets = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        return sorted({end for _start, end in offsets if 0 < end < len(question)})
    except (NotImplementedError, TypeError, ValueError, KeyError):
        return list(range(1, len(question)))
