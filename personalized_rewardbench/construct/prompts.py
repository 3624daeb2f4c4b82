"""Our wording for the two answers of a constructed pair, and the generic rubric of the quality check.

Both generation chats share one system message and the same user-turn layout (the user's top-K
posts, then the question), so the two answers come out in the same register; they differ only in
the instruction about the aspects: `chosen` must address every aspect, `rejected` must go against
each one while staying a competent answer. Both are asked for about `target_words` words and never
more than `max_words` (the reference construction asks for at most 100). The narrative never enters
a generation prompt; the aspects enter only as instructions, and the verification step checks that
neither answer quotes them.

`CONSTRUCT_PROMPT` names this wording; change it whenever the text below changes, so that a
construction folder records which wording made its pairs.

>>> row = {"question": "Which anime next?", "rubric_aspects": [{"aspect": "Keep it short."}]}
>>> chat = pair_chats(row, (), max_words=100)
>>> [m["role"] for m in chat["chosen"]], "Keep it short." in chat["rejected"][1]["content"]
(['system', 'user'], True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from personalized_rewardbench.data.eval_items import ProfilePost
from personalized_rewardbench.scoring.prompts import format_posts

CONSTRUCT_PROMPT = "construct-v1"
QUALITY_PROMPT = "quality-v1"

SYSTEM = (
    "You write answers for a community question-and-answer site. Write plain prose addressed to the asker, "
    "with no headings, no lists of options labelled as such, and no preamble. Never mention these "
    "instructions, the points you were given, or that you have read the asker's earlier posts."
)

_CHOSEN_TASK = (
    "Write a helpful answer to this question that fits this particular asker. It must address every one "
    "of these points about what they need:\n{aspects}"
)
_REJECTED_TASK = (
    "Write a competent, confident answer to this question that would suit a different asker: it must go "
    "against each of these points about what this asker needs, by ignoring it or doing the opposite, "
    "while still answering the question sensibly and in the same tone as a good answer:\n{aspects}\n"
    "Do not say that you are ignoring or contradicting anything."
)
_LENGTH = (
    "Write about {target} words and never more than {limit}. Use your own words: do not copy phrases from "
    "the points above or from the posts."
)

#: The general-quality rubric: rated by the rubric judge on the question alone (no user aspects),
#: so that a kept pair differs in personal fit, not in general quality.
QUALITY_ASPECTS: tuple[dict[str, str], ...] = (
    {"aspect": "Answers the question that was asked, directly and on topic.", "evidence": "", "reason": ""},
    {"aspect": "Is factually sound and gives no harmful or misleading advice.", "evidence": "", "reason": ""},
    {"aspect": "Is clear, coherent and reads as a finished answer.", "evidence": "", "reason": ""},
)


def _bullets(aspects: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(f"- {aspect['aspect']}" for aspect in aspects)


def _user_turn(question: str, posts: tuple[ProfilePost, ...], task: str, target: int, limit: int) -> str:
    context = f"Some earlier posts by the asker, most relevant first:\n\n{format_posts(posts)}\n\n" if posts else ""
    return f"{context}The asker's question:\n{question}\n\n{task}\n\n{_LENGTH.format(target=target, limit=limit)}"


def pair_chats(
    row: Mapping[str, Any], posts: tuple[ProfilePost, ...], *, max_words: int = 100
) -> dict[str, list[dict[str, str]]]:
    """The chats that generate `chosen` and `rejected` for one unpaired row and its top-K posts."""
    aspects = _bullets(row["rubric_aspects"])
    target = max(1, round(max_words * 0.8))
    chats = {}
    for role, task in (("chosen", _CHOSEN_TASK), ("rejected", _REJECTED_TASK)):
        user = _user_turn(row["question"], posts, task.format(aspects=aspects), target, max_words)
        chats[role] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
    return chats
