"""Try your own: score a visitor's question, profile posts and two answers with an allowlisted model.

The pair is an `EvalItem` with answer A as `chosen` and answer B as `rejected`, scored by the scorer's
own plan/score. A reward model gives each answer a score; a pairwise judge gives a verdict (and, in
logits mode, a margin) for each answer order, which is what the visitor sees.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from personalized_rewardbench.data.eval_items import EvalItem, ProfilePost
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.space.allowlist import Allowlist
from personalized_rewardbench.space.gpu_budget import check_pair_budget
from personalized_rewardbench.space.scorer_cache import ScorerCache
from personalized_rewardbench.space.settings import MAX_ANSWER_CHARS, MAX_POST_CHARS, MAX_POSTS, MAX_QUESTION_CHARS

#: gpu_runner(model_id, item, seconds) -> score_item()'s result, run inside @spaces.GPU.
PairRunner = Callable[[str, EvalItem, int], dict[str, Any]]
_LETTER = {1: "A", 0: "B", -1: None}  # a verdict for chosen (answer A) -> the answer preferred


def custom_item(question: str, posts_text: str, answer_a: str, answer_b: str) -> EvalItem:
    """An EvalItem from a visitor's text (one profile post per line), every part length-capped."""
    question, answer_a, answer_b = (text.strip() if text else "" for text in (question, answer_a, answer_b))
    for name, text, cap in (
        ("question", question, MAX_QUESTION_CHARS),
        ("answer A", answer_a, MAX_ANSWER_CHARS),
        ("answer B", answer_b, MAX_ANSWER_CHARS),
    ):
        if not text:
            raise UserError(f"the {name} is empty: type some text")
        if len(text) > cap:
            raise UserError(f"the {name} is {len(text)} characters long; the limit is {cap}: shorten it")
    posts = [line.strip() for line in (posts_text or "").splitlines() if line.strip()]
    if len(posts) > MAX_POSTS:
        raise UserError(f"{len(posts)} profile posts given; the limit is {MAX_POSTS} (one post per line)")
    for number, post in enumerate(posts, start=1):
        if len(post) > MAX_POST_CHARS:
            raise UserError(f"profile post {number} is {len(post)} characters long; the limit is {MAX_POST_CHARS}")
    return EvalItem(
        "custom-0", "custom", question, tuple(ProfilePost("profile", post) for post in posts), answer_a, answer_b
    )


def pair_result(model_id: str, model_type: str, record: dict[str, Any]) -> dict[str, Any]:
    """What the visitor sees of one scored pair (A = chosen, B = rejected in `record`).

    Reward models: `score_a`, `score_b`. Pairwise judges: `orders`, one entry per answer order with
    the answer it prefers (None: no verdict) and the margin in favour of A (None in generate mode);
    `preferred` is "A"/"B" when both orders agree, else "split" or "no verdict"."""
    result: dict[str, Any] = {"model": model_id, "type": model_type, "truncated": bool(record.get("truncated"))}
    if "verdict_chosen_first" in record:
        orders = [
            {
                "order": "A shown first",
                "prefers": _LETTER.get(record["verdict_chosen_first"]),
                "margin_for_a": record.get("margin_chosen_first"),
            },
            {
                "order": "B shown first",
                "prefers": _LETTER.get(record["verdict_chosen_second"]),
                "margin_for_a": record.get("margin_chosen_second"),
            },
        ]
        picks = {order["prefers"] for order in orders}
        if picks == {None}:
            preferred = "no verdict"
        elif len(picks) == 1:
            preferred = picks.pop()
        else:
            preferred = "split"
        return {**result, "score_a": None, "score_b": None, "orders": orders, "preferred": preferred}
    a, b = float(record["chosen_score"]), float(record["rejected_score"])
    return {**result, "score_a": a, "score_b": b, "preferred": "A" if a > b else "B" if b > a else "tie"}


class TryService:
    """Scores visitor pairs with allowlisted models (baselines here, models through the GPU runner)."""

    def __init__(self, allowlist: Allowlist, scorers: ScorerCache, gpu_max_seconds: float, preload: float = 0.0):
        self.allowlist, self.scorers, self.gpu_max_seconds = allowlist, scorers, gpu_max_seconds
        self.preload = preload  # seconds a fresh ZeroGPU worker spends copying preloaded models

    def try_pair(
        self,
        model_id: str,
        question: str,
        posts_text: str,
        answer_a: str,
        answer_b: str,
        gpu_runner: PairRunner | None = None,
    ) -> dict[str, Any]:
        """Check the model and the texts, estimate GPU time, and score."""
        model = self.allowlist.get(model_id)
        item = custom_item(question, posts_text, answer_a, answer_b)
        seconds = check_pair_budget(model, item, self.gpu_max_seconds, self.preload)
        if model.is_baseline or gpu_runner is None:
            return self.score_item(model.id, item)
        return gpu_runner(model.id, item, seconds)

    def score_item(self, model_id: str, item: EvalItem) -> dict[str, Any]:
        """Score answer A (`chosen`) and B (`rejected`) of `item` with the scorer's own plan/score."""
        model = self.allowlist.get(model_id)
        with self.scorers.use(model) as scorer:
            plan = scorer.plan([item])
            records = [record for batch in plan.batches for record in scorer.score(plan, batch)]
        return pair_result(model.id, model.type, records[0])
