"""One reward request, `(prompt item, answer)`, and scoring many of them through the scorer's pointwise
contract: answers to the same prompt form one `AnswerGroup`, so the prompt runs once (GRPO's group of
completions, concurrent server requests about the same user and question).

>>> from personalized_rewardbench.data.eval_items import ProfilePost
>>> completion_text([{"role": "assistant", "content": "Try Mushishi."}])
'Try Mushishi.'
>>> parse_posts([{"category": "anime", "text": "I loved it."}, "No category here."])
(ProfilePost(category='anime', text='I loved it.'), ProfilePost(category='', text='No category here.'))
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from personalized_rewardbench.data.eval_items import EvalItem, ProfilePost
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.base import AnswerGroup, Scorer


@dataclass(frozen=True)
class RewardEntry:
    """The prompt side (`item`: question and ranked posts; its chosen/rejected are empty) and one answer."""

    item: EvalItem
    answer: str


@dataclass(frozen=True)
class EntryScore:
    score: float
    truncated: bool  # profile posts were dropped to fit the max length
    question_shortened: bool


def parse_posts(value: Any, where: str = "posts") -> tuple[ProfilePost, ...]:
    """Posts given as {category, text} mappings or plain strings, in the order given."""
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise UserError(f"{where} must be a list of posts ({{'category', 'text'}} objects or strings)")
    posts = []
    for n, post in enumerate(value):
        if isinstance(post, str):
            posts.append(ProfilePost("", post))
        elif isinstance(post, Mapping) and isinstance(post.get("text"), str):
            category = post.get("category") or ""
            if not isinstance(category, str):
                raise UserError(f"{where}[{n}].category must be a string")
            posts.append(ProfilePost(category, post["text"]))
        else:
            raise UserError(f"{where}[{n}] must be a string or an object with a string 'text'")
    return tuple(posts)


def completion_text(completion: Any) -> str:
    """The answer text of a TRL completion: a string, or conversational messages (the assistant turns)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and all(isinstance(m, Mapping) for m in completion):
        parts = [_content_text(m.get("content")) for m in completion if m.get("role", "assistant") == "assistant"]
        return "".join(parts)
    raise UserError(f"a completion must be a string or a list of chat messages, got {type(completion).__name__}")


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # content blocks: [{"type": "text", "text": ...}, ...]
        return "".join(block.get("text", "") for block in content if isinstance(block, Mapping))
    raise UserError(f"message content must be a string or a list of content blocks, got {type(content).__name__}")


def prompt_item(question: str, posts: tuple[ProfilePost, ...], item_id: str | None = None) -> EvalItem:
    """The model-facing prompt of a reward request; its id names it in error messages."""
    if not isinstance(question, str) or not question.strip():
        raise UserError("question must be a non-empty string")
    if item_id is None:
        digest = hashlib.sha1(question.encode("utf-8")).hexdigest()[:10]
        item_id = f"reward-{digest}"
    return EvalItem(str(item_id), "", question, posts, "", "")


def _prompt_key(item: EvalItem) -> tuple[str, tuple[ProfilePost, ...]]:
    return item.question, item.posts


def group_entries(entries: Sequence[RewardEntry]) -> tuple[list[AnswerGroup], list[tuple[int, int]]]:
    """AnswerGroups of entries that share their prompt (first appearance order) and, per entry, (group, answer)."""
    slots: dict[tuple[str, tuple[ProfilePost, ...]], int] = {}
    items: list[EvalItem] = []
    answers: list[list[str]] = []
    where: list[tuple[int, int]] = []
    for entry in entries:
        key = _prompt_key(entry.item)
        if key not in slots:
            slots[key] = len(items)
            items.append(entry.item)
            answers.append([])
        group = slots[key]
        where.append((group, len(answers[group])))
        answers[group].append(entry.answer)
    return [AnswerGroup(item, tuple(texts)) for item, texts in zip(items, answers)], where


def score_entries(scorer: Scorer, entries: Sequence[RewardEntry]) -> list[EntryScore]:
    """Scores of `entries` in order, through `scorer.score_answers` (one group per distinct prompt)."""
    if not entries:
        return []
    groups, where = group_entries(entries)
    results = scorer.score_answers(groups)
    if len(results) != len(groups):
        raise RuntimeError(f"{scorer.name}: score_answers returned {len(results)} results for {len(groups)} groups")
    scores = []
    for group, answer in where:
        result = results[group]
        scores.append(EntryScore(float(result.scores[answer]), result.truncated, result.question_shortened))
    return scores
