"""How a classifier's encoded groups are batched under the token budget, and the token positions those batches'
forwards compute (the plan's `tokens_computed` and `padding_fraction`).

Shared-prefix groups batch by `shared_prefix_cost`, full-scoring groups by their padded size. A lone group over
the budget gets a batch of its own, whose rows scoring splits into forwards within it (`row_forwards`): its
answers, or with a shared prefix its suffixes on top of the prefix, which runs once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from personalized_rewardbench.scoring.base import padded_positions, token_budget_batches
from personalized_rewardbench.scoring.shared_prefix import PairLayout, shared_prefix_batches, shared_prefix_cost


@dataclass(frozen=True)
class EncodedGroup:
    """A fitted group and how it is scored: `layout.prefix` > 0 tokens shared by all its answers, or 0 (full)."""

    inputs: tuple[list[int], ...]
    truncated: bool
    layout: PairLayout
    question_shortened: bool = False

    @property
    def longest(self) -> int:
        return max(map(len, self.inputs))

    @property
    def shape(self) -> tuple[int, int, int]:
        """(shared prefix, longest suffix, answers): what a shared-prefix batch pays for this group."""
        return self.layout.prefix, self.longest - self.layout.prefix, len(self.inputs)


def classifier_batches(encoded: Sequence[EncodedGroup], budget: int) -> list[list[int]]:
    """Shared-prefix batches, then full-scoring batches, each within `budget` but for a lone group over it."""
    shared = [i for i, group in enumerate(encoded) if group.layout.prefix]
    full = [i for i, group in enumerate(encoded) if not group.layout.prefix]
    shapes = [encoded[i].shape for i in shared]
    batches = [[shared[j] for j in batch] for batch in shared_prefix_batches(shapes, budget)]
    lengths = [len(encoded[i].inputs) * encoded[i].longest for i in full]
    batches += [[full[j] for j in batch] for batch in token_budget_batches(lengths, budget)]
    return batches


def batch_positions(encoded: Sequence[EncodedGroup], batches: Sequence[Sequence[int]], budget: int) -> tuple[int, int]:
    """(positions the batches' forwards compute, padding included; positions of real tokens), a shared prefix
    counted once per group."""
    computed = real = 0
    for batch in batches:
        groups = [encoded[i] for i in batch]
        real += sum(sum(map(len, g.inputs)) - (len(g.inputs) - 1) * g.layout.prefix for g in groups)
        if len(groups) == 1 and groups[0].layout.prefix:  # a lone group: its suffixes within the budget
            prefix = groups[0].layout.prefix
            computed += prefix + padded_positions([len(ids) - prefix for ids in groups[0].inputs], budget)
        elif groups[0].layout.prefix:
            computed += shared_prefix_cost([g.shape for g in groups])
        else:
            computed += padded_positions([len(ids) for g in groups for ids in g.inputs], budget)
    return computed, real
