"""Padding token rows into a batch: ids and mask, which columns a row's real tokens take, position ids, and
whether a forward needs its mask (`needed_mask`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def real_columns(length: int, width: int, side: str) -> slice:
    """The columns a row of `length` real tokens takes in a batch `width` wide, padded on `side`."""
    return slice(width - length, width) if side == "left" else slice(0, length)


def pad_rows(rows: Sequence[Sequence[int]], pad: int, side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention mask) of `rows` padded to the longest on `side`."""
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for row, tokens in enumerate(rows):
        if tokens:
            columns = real_columns(len(tokens), width, side)
            ids[row, columns] = torch.tensor(tokens, dtype=torch.long)
            mask[row, columns] = 1
    return ids, mask


def needed_mask(mask: torch.Tensor, right_padding_free: bool) -> torch.Tensor | None:
    """`mask` if the forward needs it: None without padding, or for right padding on a checked causal model.

    >>> needed_mask(torch.ones((2, 3), dtype=torch.long), False) is None
    True
    >>> padded = torch.tensor([[1, 1, 1], [1, 1, 0]])
    >>> needed_mask(padded, True) is None, needed_mask(padded, False) is padded
    (True, True)
    """
    return None if right_padding_free or bool(mask.all()) else mask


def positions(mask: torch.Tensor, side: str, start: torch.Tensor | None = None) -> torch.Tensor:
    """Position ids from `start` per row (default 0): counting real tokens for left padding (padding gets 1, as
    in generate()), plain column numbers for right padding (real tokens come first)."""
    if side == "left":
        ids = mask.cumsum(-1) - 1
        if start is not None:
            ids = ids + start[:, None]
        return ids.masked_fill(mask == 0, 1)
    ids = torch.arange(mask.shape[1]).expand_as(mask)
    return ids if start is None else start[:, None] + ids
