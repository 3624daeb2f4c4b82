"""The chats an LLM judge reads: our own wording of the paper's pairwise and pointwise judge protocol.

A judge sees what every scorer sees (an `EvalItem`: the question, the top-k profile posts, the
answers) and never the narrative or the rubric aspects. Two prompts, each versioned; the version is
recorded in results.json (`protocol.judge_prompt`), so a change of wording makes a different run.

- pairwise (``PAIRWISE_PROMPT``): the system message asks for the answer that best fits this user,
  regardless of order and length, ending with ``Result: A`` or ``Result: B``; the user message holds
  the posts (when k > 0), the question and the two answers.
- pointwise (``SCORE_PROMPT``): the system message asks for a 0-10 rating of how well one answer fits
  this user, ending with ``Rating: N``; the user message holds the posts, the question and the answer.

In `logits` mode the assistant turn is started with the part of the answer format
(``VERDICT_FORMAT`` / ``RATING_FORMAT``) that every choice shares *as the tokenizer writes it*, and the
judge's next-token distribution is read there (`verdicts.read_choices`): "Result:" for most
tokenizers, "Rating: " (ending in a lone space token) for byte-level BPE tokenizers that split
digits. The format strings, not a fixed prefix, are the protocol.

>>> from personalized_rewardbench.data.eval_items import EvalItem
>>> item = EvalItem("0_0_1", "Art_and_Entertainment", "Which anime next?", (), "Mushishi.", "Naruto.")
>>> chat = pairwise_chat(item, chosen_first=False)
>>> [message["role"] for message in chat]
['system', 'user']
>>> chat[1]["content"].index("Naruto.") < chat[1]["content"].index("Mushishi.")
True
"""

from __future__ import annotations

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.scoring.prompts import format_posts

PAIRWISE_PROMPT = "pairwise-v1"
SCORE_PROMPT = "score-v1"
VERDICT_FORMAT = "Result: {}"  # the pairwise answer, {} one of LETTERS
RATING_FORMAT = "Rating: {}"  # the pointwise answer, {} one of RATINGS
RATINGS = tuple(str(n) for n in range(11))
LETTERS = ("A", "B")

PAIRWISE_SYSTEM = (
    "You are an impartial judge of personalized answers. A user asked a question; you will see the "
    "question, possibly some of the user's earlier posts, and two candidate answers, A and B. Decide "
    "which answer better fits this particular user: their situation, needs, preferences and the way "
    "they like to be answered, as far as the question and their posts reveal them. Both answers may be "
    "of similar general quality; what matters is the fit to this user. The order in which the answers "
    "are shown must not influence you, and neither must their length. You may reason briefly first. "
    "End your reply with a final line that is exactly `Result: A` or `Result: B`."
)

SCORE_SYSTEM = (
    "You are an impartial judge of personalized answers. A user asked a question; you will see the "
    "question, possibly some of the user's earlier posts, and one candidate answer. Rate how well the "
    "answer fits this particular user: their situation, needs, preferences and the way they like to be "
    "answered, as far as the question and their posts reveal them. Use a scale from 0 (ignores or "
    "contradicts what this user needs) to 10 (fits this user perfectly). Length alone must not "
    "influence you. You may reason briefly first. End your reply with a final line that is exactly "
    "`Rating: N`, where N is a whole number from 0 to 10."
)


def _context(item: EvalItem) -> str:
    """The user's posts (when the item has any) and the question."""
    parts = []
    if item.posts:
        parts.append(f"Some of the user's earlier posts, most relevant first:\n\n{format_posts(item.posts)}")
    parts.append(f"The user's question:\n{item.question}")
    return "\n\n".join(parts)


def pairwise_user_message(item: EvalItem, answer_a: str, answer_b: str) -> str:
    return (
        f"{_context(item)}\n\n"
        f"[Answer A]\n{answer_a}\n[End of answer A]\n\n"
        f"[Answer B]\n{answer_b}\n[End of answer B]\n\n"
        "Which answer better fits this user? End with `Result: A` or `Result: B`."
    )


def score_user_message(item: EvalItem, answer: str) -> str:
    return (
        f"{_context(item)}\n\n"
        f"[Answer]\n{answer}\n[End of answer]\n\n"
        "How well does this answer fit this user, from 0 to 10? End with `Rating: N`."
    )


def _chat(system: str, user: str, merge_system: bool) -> list[dict[str, str]]:
    if merge_system:  # for chat templates that reject a system role
        return [{"role": "user", "content": f"{system}\n\n{user}"}]
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def pairwise_chat(item: EvalItem, chosen_first: bool, merge_system: bool = False) -> list[dict[str, str]]:
    """The pairwise judge chat with `chosen` shown as answer A (`chosen_first`) or as answer B."""
    a, b = (item.chosen, item.rejected) if chosen_first else (item.rejected, item.chosen)
    return _chat(PAIRWISE_SYSTEM, pairwise_user_message(item, a, b), merge_system)


def score_chat(item: EvalItem, answer: str, merge_system: bool = False) -> list[dict[str, str]]:
    """The pointwise judge chat rating one answer."""
    return _chat(SCORE_SYSTEM, score_user_message(item, answer), merge_system)
