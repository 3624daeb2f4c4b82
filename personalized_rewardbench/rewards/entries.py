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


def score_requests(scorer: Scorer, requests: Sequence[Sequence[RewardEntry]]) -> list[list[EntryScore]]:
    """Scores of several requests scored together; each request's scores are those it gets alone.

    Entries of different requests about the same prompt share one group, but a group is fitted to the max
    length over all its answers: where that dropped posts (or shortened the question), each request's part
    of the group is scored again on its own, so no request's score depends on what else was batched."""
    flat = [entry for request in requests for entry in request]
    origin = [n for n, request in enumerate(requests) for _entry in request]
    scores = score_entries(scorer, flat)
    _groups, where = group_entries(flat)
    origins: dict[int, set[int]] = {}
    for i, (group, _answer) in enumerate(where):
        origins.setdefault(group, set()).add(origin[i])
    refit = {g for (g, _a), s in zip(where, scores) if (s.truncated or s.question_shortened) and len(origins[g]) > 1}
    for n in range(len(requests)):
        redo = [i for i, (group, _answer) in enumerate(where) if group in refit and origin[i] == n]
        for i, score in zip(redo, score_entries(scorer, [flat[i] for i in redo])):
            scores[i] = score
    results, start = [], 0
    for request in requests:
        results.append(scores[start : start + len(request)])
        start += len(request)
    return results


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
