"""The rating judge (`--model-type judge-score`): an LLM rates each answer from 0 to 10 on its own.

Logits mode reads the expected rating from the rating tokens' probabilities at the forced position; generate
mode parses the last `Rating: N`. The shared machinery (prompt fitting, backends, batching) is `judges._Judge`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.base import AnswerGroup, AnswerScores, ScoreRecord, ScoringPlan
from personalized_rewardbench.scoring.judge_backends import JudgeSettings
from personalized_rewardbench.scoring.judge_prompts import RATING_FORMAT, RATINGS, SCORE_PROMPT, score_chat
from personalized_rewardbench.scoring.judges import NO_RATING_SCORE, _clip, _Judge, shortened_questions
from personalized_rewardbench.scoring.registry import ModelSpec
from personalized_rewardbench.scoring.verdicts import parse_rating


class ScoreJudge(_Judge):
    """Rates each answer 0-10 for this user; accuracy is the usual chosen-vs-rejected comparison."""

    model_type = "judge-score"
    prompt_version = SCORE_PROMPT
    answer_format = RATING_FORMAT
    choices = RATINGS

    def __init__(self, settings: JudgeSettings, spec: ModelSpec, backend):
        super().__init__(settings, spec, backend)
        if self.reader is not None and len(self.reader.paths) < 2:
            raise UserError(
                f"{self.name!r}: its tokenizer cannot spell the ratings 0-10 distinctly; use --judge-mode generate"
            )

    def protocol(self) -> dict[str, Any]:
        protocol = super().protocol()
        if self.reader is not None:
            read = [value for value in RATINGS if value in self.reader.paths]
            protocol["rating_tokens"] = "0-10" if len(read) == len(RATINGS) else ",".join(read)
        return protocol

    def chats(self, item: EvalItem, answers: Sequence[str] | None = None) -> list[list[dict[str, str]]]:
        """[rate answer 1, rate answer 2, ...]; by default [rate chosen, rate rejected]."""
        answers = (item.chosen, item.rejected) if answers is None else answers
        return [score_chat(item, answer, self.merge_system) for answer in answers]

    @staticmethod
    def _expected(logprobs: dict[str, float]) -> float:
        """The mean rating under the rating tokens' probabilities, renormalised over those tokens."""
        top = max(logprobs.values())
        weights = {value: math.exp(lp - top) for value, lp in logprobs.items()}
        return sum(int(value) * w for value, w in weights.items()) / sum(weights.values())

    def score(self, plan: ScoringPlan, batch: Sequence[int]) -> list[ScoreRecord]:
        encoded = [plan.encodings[i] for i in batch]
        groups = [prompts.prompts for prompts in encoded]
        records = []
        if self.mode == "logits":
            for (chosen, rejected), prompts in zip(self._choice_logprobs(groups, plan.counters), encoded):
                c, r = self._expected(chosen), self._expected(rejected)
                records.append(
                    {
                        "chosen_score": c,
                        "rejected_score": r,
                        **prompts.flags(),
                        "rating_chosen": c,
                        "rating_rejected": r,
                        "no_verdict": 0,
                    }
                )
            return records
        texts = self.backend.generate(
            [p for group in groups for p in group], self.max_new_tokens, counters=plan.counters
        )
        for n, prompts in enumerate(encoded):
            c, r = parse_rating(texts[2 * n]), parse_rating(texts[2 * n + 1])
            missing = (c is None) + (r is None)
            records.append(
                {
                    "chosen_score": NO_RATING_SCORE if missing else c,
                    "rejected_score": NO_RATING_SCORE if missing else r,
                    **prompts.flags(),
                    "rating_chosen": c,
                    "rating_rejected": r,
                    "no_verdict": missing,
                    "text_chosen": _clip(texts[2 * n]),
                    "text_rejected": _clip(texts[2 * n + 1]),
                }
            )
        return records

    def score_answers(self, groups: Sequence[AnswerGroup]) -> list[AnswerScores]:
        """Each answer's rating (logits: the expected rating; generate: the stated one). In generate mode an
        answer without a rating scores NO_RATING_SCORE on its own (`score` ties the whole pair instead)."""
        results = [AnswerScores(()) for _ in groups]
        todo = [i for i, group in enumerate(groups) if group.answers]
        encoded = [self.encode_item(groups[i].item, groups[i].answers) for i in todo]
        self._verify([fitted.prompts for fitted in encoded])
        for batch in self._batches([fitted.prompts for fitted in encoded]):
            prompts = [encoded[n].prompts for n in batch]
            if self.mode == "logits":
                ratings = [[self._expected(lp) for lp in group] for group in self._choice_logprobs(prompts)]
            else:
                texts = iter(self.backend.generate([p for group in prompts for p in group], self.max_new_tokens))
                ratings = [[parse_rating(next(texts)) for _ in group] for group in prompts]
            for n, group_ratings in zip(batch, ratings):
                scores = tuple(NO_RATING_SCORE if r is None else float(r) for r in group_ratings)
                results[todo[n]] = AnswerScores(scores, encoded[n].truncated, encoded[n].question_shortened)
        return results

    def summarize(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "shortened_questions": shortened_questions(records),
            "no_verdict": sum(r["no_verdict"] for r in records),
            "no_verdict_pairs": sum(1 for r in records if r["no_verdict"]),
        }
