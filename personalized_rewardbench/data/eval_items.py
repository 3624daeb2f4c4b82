"""What a model may see of a benchmark row: `EvalItem` holds the question, the ranked profile posts
and the two answers — never `narrative` or `rubric_aspects` (the answer key).

Every scorer takes EvalItems, so the answer key cannot reach a model input by construction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProfilePost:
    category: str
    text: str


@dataclass(frozen=True)
class EvalItem:
    """One benchmark pair as models see it; `posts` are the top-k posts, most relevant first."""

    id: str
    subset: str
    question: str
    posts: tuple[ProfilePost, ...]
    chosen: str
    rejected: str

    def with_posts(self, count: int) -> EvalItem:
        """The same item keeping only the `count` most relevant posts."""
        return EvalItem(self.id, self.subset, self.question, self.posts[:count], self.chosen, self.rejected)


def make_eval_item(row: Mapping[str, Any], subset: str, ranking: Sequence[int] | None, k: int) -> EvalItem:
    """Build the model-facing item from a schema row and its profile ranking (None when k == 0)."""
    posts: tuple[ProfilePost, ...] = ()
    if k > 0 and ranking is not None:
        profile = row["profile"]
        posts = tuple(ProfilePost(profile[i]["category"], profile[i]["text"]) for i in ranking[:k])
    return EvalItem(row["id"], subset, row["question"], posts, row["chosen"], row["rejected"])
