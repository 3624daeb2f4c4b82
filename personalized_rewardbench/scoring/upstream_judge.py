"""The reference code's pairwise judge protocol (``--protocol upstream --model-type judge-pairwise``).

What the reference evaluator (``evaluation/pairwise.py`` of Martin-qyma/Personalized-RewardBench) does,
rebuilt here from its description:

- one order per item: per subset, a Mersenne-Twister seeded with 42 draws one number per item in
  dataset order, and chosen is answer A when it is below 0.5 (so ``--limit N`` keeps the first N draws);
- its own prompt files, ``prompts/pairwise_system.txt`` (system turn) and ``prompts/pairwise_user.txt``
  (user turn, ``{question}``, ``{Response_A}``, ``{Response_B}`` filled in that order), each stripped.
  They are not ours to ship: ``--upstream-prompts DIR`` reads them from the user's clone;
- greedy generation (temperature 0) of at most ``--max-new-tokens`` (512 there), the prompt being the
  chat template's tokens with the generation prompt (what vLLM's ``LLM.chat`` gives text models; a few
  older vLLM releases added a second BOS);
- parsing: the text after the last ``</think>``, double quotes and ``*`` removed; the first ``result:``
  (any case) decides: the next non-space character ``a`` -> A, ``b`` -> B; anything else, or no
  ``result:``, is unparsable and counted as **A** (``parse_failed`` in scores.jsonl, ``parse_failures``
  in results.json). No profile posts: the reference judge sees the question alone.

A record holds ``chosen_position`` (A or B), ``prediction``, ``parse_failed`` and the text (its last
2,000 characters); ``chosen_score`` is 1 and ``rejected_score`` 0 when the prediction is chosen's
position, the reverse otherwise, so the metric module's accuracy is the reference's accuracy.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.base import (
    AnswerGroup,
    AnswerScores,
    Scorer,
    ScoreRecord,
    ScoringPlan,
    token_budget_batches,
)
from personalized_rewardbench.scoring.devices import auto_batch_tokens
from personalized_rewardbench.scoring.judge_backends import JudgeSettings, make_backend
from personalized_rewardbench.scoring.protocols import UPSTREAM_SEED
from personalized_rewardbench.scoring.registry import ModelSpec

PROMPT_FILES = ("pairwise_system.txt", "pairwise_user.txt")
REFERENCE_REPO = "github.com/Martin-qyma/Personalized-RewardBench"
TEXT_LIMIT = 2000


def read_upstream_prompts(folder: Path | None) -> tuple[str, str]:
    """(system prompt, user template) from a clone of the reference repository or its prompts/ folder."""
    if folder is None:
        raise UserError(
            f"--protocol upstream judges with the reference code's prompt files, which prbench does not ship: "
            f"pass --upstream-prompts DIR, a local clone of {REFERENCE_REPO}"
        )
    folder = Path(folder).expanduser()
    for base in (folder / "prompts", folder):
        paths = [base / name for name in PROMPT_FILES]
        if all(path.is_file() for path in paths):
            system, user = (path.read_text(encoding="utf-8").strip() for path in paths)
            return system, user
    raise UserError(
        f"--upstream-prompts {folder}: no prompts/{PROMPT_FILES[0]} and prompts/{PROMPT_FILES[1]} there; "
        f"pass a local clone of {REFERENCE_REPO}"
    )


def upstream_orders(items: Sequence[EvalItem], seed: int = UPSTREAM_SEED) -> list[bool]:
    """Per item: chosen shown as A? One draw per item of a generator seeded per subset, in dataset order."""
    generators: dict[str, random.Random] = {}
    return [generators.setdefault(item.subset, random.Random(seed)).random() < 0.5 for item in items]


def fill_user_template(template: str, question: str, answer_a: str, answer_b: str) -> str:
    """The user turn: the placeholders replaced one after the other, as the reference does."""
    return template.replace("{question}", question).replace("{Response_A}", answer_a).replace("{Response_B}", answer_b)


def parse_upstream_verdict(text: str) -> str | None:
    """The reference's reading of a judge's text: "A", "B" or None (which it then counts as "A").

    >>> parse_upstream_verdict("<think>Result: B</think> **Result:** A")
    'A'
    >>> parse_upstream_verdict("Result: B, but Result: A") , parse_upstream_verdict("I prefer B")
    ('B', None)
    """
    text = text.strip().split("</think>")[-1].strip()
    text = text.replace('"', "").replace("*", "").strip().lower()
    if "result:" not in text:
        return None
    section = text.split("result:")[1].strip()
    return "A" if section.startswith("a") else "B" if section.startswith("b") else None


class UpstreamPairwiseJudge(Scorer):
    """Pairwise judge with the reference's one-seeded-order, prompt files and parsing (module docstring)."""

    model_type = "judge-pairwise"

    def __init__(self, name: str, backend, prompts: tuple[str, str], *, max_new_tokens: int, batch_tokens: int):
        self.name = name
        self.backend = backend
        self.tokenizer = backend.tokenizer
        self.revision = backend.revision
        self.device = backend.device
        self.system, self.user_template = prompts
        self.max_new_tokens = max_new_tokens
        self.batch_tokens = batch_tokens

    @classmethod
    def create(
        cls, settings: JudgeSettings, spec: ModelSpec, prompts_dir: Path | None, profile_k: int = 0
    ) -> UpstreamPairwiseJudge:
        """The judge for `settings` with the prompt files under `prompts_dir`; refuses profile posts."""
        prompts = read_upstream_prompts(prompts_dir)  # before loading a model: fail fast
        if profile_k:
            raise UserError(
                "--protocol upstream: the reference pairwise judge sees the question alone, no profile posts; "
                "use --profile-k 0, or --protocol prbench for a judge with the profile"
            )
        backend = make_backend(settings, spec)
        batch_tokens = settings.batch_tokens if settings.batch_tokens is not None else auto_batch_tokens(backend.device)
        return cls(settings.model, backend, prompts, max_new_tokens=settings.max_new_tokens, batch_tokens=batch_tokens)

    def protocol(self) -> dict[str, Any]:
        digest = hashlib.sha256("\0".join((self.system, self.user_template)).encode()).hexdigest()[:12]
        return {
            "template": "upstream-pairwise",
            "judge_mode": "generate",
            "judge_prompt": f"upstream-files:{digest}",
            "order": f"one per item, seed {UPSTREAM_SEED}",
            "unparsable_counts_as": "A",
            "max_new_tokens": self.max_new_tokens,
            "backend": self.backend.name,
            "max_length": self.backend.max_length,
            **self.backend.describe(),
        }

    def runtime_stats(self, plan: ScoringPlan) -> dict[str, Any]:
        return {"batch_tokens": self.batch_tokens, **self.backend.runtime_stats(plan.counters)}

    def chat(self, item: EvalItem, chosen_first: bool) -> list[dict[str, str]]:
        first, second = (item.chosen, item.rejected) if chosen_first else (item.rejected, item.chosen)
        user = fill_user_template(self.user_template, item.question, first, second)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    def encode(self, item: EvalItem, chosen_first: bool) -> list[int]:
        try:
            encoded = self.tokenizer.apply_chat_template(
                self.chat(item, chosen_first), add_generation_prompt=True, tokenize=True, return_dict=True
            )
        except Exception as error:  # noqa: BLE001 - e.g. a template that refuses a system turn
            raise UserError(
                f"{self.name}: its chat template cannot render the reference judge chat ({error})"
            ) from None
        ids = list(encoded["input_ids"])
        if len(ids) + self.max_new_tokens > self.backend.max_length:
            raise UserError(
                f"item {item.id}: the reference judge prompt takes {len(ids)} tokens, and with --max-new-tokens "
                f"{self.max_new_tokens} exceeds {self.name}'s {self.backend.max_length}; the reference does not "
                "shorten prompts: use a model with a longer context"
            )
        return ids

    def plan(self, items: Sequence[EvalItem]) -> ScoringPlan:
        """Batches under the token budget; per item (prompt ids, chosen shown as A)."""
        orders = upstream_orders(items)
        encodings = [(self.encode(item, first), first) for item, first in zip(items, orders)]
        lengths = [len(ids) + self.max_new_tokens for ids, _ in encodings]
        return ScoringPlan.of(items, token_budget_batches(lengths, self.batch_tokens), encodings)

    def score(self, plan: ScoringPlan, batch: Sequence[int]) -> list[ScoreRecord]:
        prompts = [plan.encodings[i][0] for i in batch]
        records = []
        for i, text in zip(batch, self.backend.generate(prompts, self.max_new_tokens, plan.counters)):
            position = "A" if plan.encodings[i][1] else "B"
            parsed = parse_upstream_verdict(text)
            prediction = parsed or "A"
            right = prediction == position
            records.append(
                {
                    "chosen_score": 1.0 if right else 0.0,
                    "rejected_score": 0.0 if right else 1.0,
                    "truncated": False,
                    "chosen_position": position,
                    "prediction": prediction,
                    "parse_failed": parsed is None,
                    "text": text if len(text) <= TEXT_LIMIT else "…" + text[-TEXT_LIMIT:],
                }
            )
        return records

    def score_answers(self, groups: Sequence[AnswerGroup]) -> list[AnswerScores]:
        raise UserError("a pairwise judge compares two answers; it gives no pointwise scores")

    def summarize(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        """The reference's extra figures: unparsable verdicts and accuracy with chosen as A / as B."""

        def accuracy(position: str) -> float | None:
            subset = [r for r in records if r["chosen_position"] == position]
            return sum(r["prediction"] == position for r in subset) / len(subset) if subset else None

        return {
            "parse_failures": sum(1 for r in records if r["parse_failed"]),
            "accuracy_chosen_as_a": accuracy("A"),
            "accuracy_chosen_as_b": accuracy("B"),
            "predicted_a": sum(1 for r in records if r["prediction"] == "A"),
        }
