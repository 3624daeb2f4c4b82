"""A personalized reward for TRL trainers (GRPO, RLOO, ...): a plain callable with TRL's reward signature.

    from trl import GRPOConfig, GRPOTrainer
    from personalized_rewardbench.rewards import PersonalizedReward, trl_prompt_dataset

    dataset = trl_prompt_dataset("hub:QiyaoMa/Personalized-RewardBench", profile_k=10)
    reward = PersonalizedReward("Skywork/Skywork-Reward-V2-Llama-3.1-8B", profile_k=10)
    GRPOTrainer(model="Qwen/Qwen3-0.6B", reward_funcs=reward, train_dataset=dataset, args=GRPOConfig(...)).train()

The question and the user's posts come from the dataset's columns: `question` plus either `posts`
(already ranked, most relevant first, as `trl_prompt_dataset` writes them) or the whole `profile`
(ranked here with `retriever` and `evaluate`'s cache). The reward model sees the same prompt
(`template`, top `profile_k` posts, fitting to the max length) and gives the same score as in
`prbench evaluate`; the completions of one prompt share it (one `AnswerGroup` per prompt). Each call
logs through TRL's `log_metric` / `log_extra` when the trainer passes them: the mean reward, the
fraction of completions whose prompt lost posts to fit (`truncated`) or had its question shortened.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.rewards.entries import (
    EntryScore,
    RewardEntry,
    completion_text,
    parse_posts,
    prompt_item,
    score_entries,
)
from personalized_rewardbench.rewards.ranking import ProfileRanker
from personalized_rewardbench.rewards.settings import DEFAULT_PROFILE_K, RewardSettings, build_scorer, describe
from personalized_rewardbench.scoring.base import Scorer

#: Prefix of the metrics the reward logs through TRL.
METRIC_PREFIX = "personalized_reward"


class PersonalizedReward:
    """`(prompts, completions, **columns) -> list[float]`: the reward model's score of every completion.

    `model` is a Hub id, a local folder, or an already built `Scorer` (shared with other code). Other
    arguments are `prbench evaluate`'s options of the same names."""

    def __init__(
        self,
        model: str | Scorer,
        *,
        profile_k: int = DEFAULT_PROFILE_K,
        retriever: str = "contriever",
        template: str = "default",
        model_type: str = "auto",
        revision: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        max_length: int | None = None,
        batch_tokens: int | None = None,
        trust_remote_code: bool = False,
        cache_dir: Path | None = None,
        data_revision: str | None = None,
    ):
        name = model if isinstance(model, str) else model.name
        self.settings = RewardSettings(
            model=name,
            profile_k=profile_k,
            retriever=retriever,
            template=template,
            model_type=model_type,
            revision=revision,
            device=device,
            dtype=dtype,
            max_length=max_length,
            batch_tokens=batch_tokens,
            trust_remote_code=trust_remote_code,
            cache_dir=cache_dir,
        )
        self.settings.run_config()  # validate before loading anything
        self.scorer: Scorer = build_scorer(self.settings) if isinstance(model, str) else model
        self.ranker = ProfileRanker(retriever, cache_dir, data_revision)
        self.__name__ = METRIC_PREFIX  # TRL names the reward's logged metrics after it
        self.last_stats: dict[str, float] = {}

    def info(self) -> dict[str, Any]:
        """Model, revision and protocol (as `evaluate` records them)."""
        return describe(self.settings, self.scorer, self.ranker.name)

    def entries(self, completions: Sequence[Any], columns: dict[str, Any]) -> list[RewardEntry]:
        """The reward requests of a TRL batch, from the completions and the dataset columns."""
        count = len(completions)
        questions = _column(columns, "question", count)
        ids = columns.get("id")
        if columns.get("posts") is not None:
            posts = [
                parse_posts(value, f"posts of row {n}")[: self.settings.profile_k]
                for n, value in enumerate(_column(columns, "posts", count))
            ]
        elif columns.get("profile") is not None and self.settings.profile_k > 0:
            posts = self.ranker.top_posts(questions, _column(columns, "profile", count), self.settings.profile_k, ids)
        elif self.settings.profile_k > 0:
            raise UserError(
                f"profile_k={self.settings.profile_k} needs a 'posts' or 'profile' column in the dataset "
                "(build it with personalized_rewardbench.rewards.trl_prompt_dataset), or pass profile_k=0"
            )
        else:
            posts = [() for _ in range(count)]
        return [
            RewardEntry(prompt_item(question, post, ids[n] if ids is not None else None), completion_text(completion))
            for n, (question, post, completion) in enumerate(zip(questions, posts, completions))
        ]

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
        log_metric: Callable[[str, float], None] | None = columns.pop("log_metric", None)
        log_extra: Callable[[str, list], None] | None = columns.pop("log_extra", None)
        started = time.perf_counter()
        scores = score_entries(self.scorer, self.entries(completions, columns))
        self.last_stats = _stats(scores, time.perf_counter() - started)
        if log_metric is not None:
            for name, value in self.last_stats.items():
                log_metric(f"{METRIC_PREFIX}/{name}", value)
        if log_extra is not None:
            log_extra(f"{METRIC_PREFIX}/truncated", [s.truncated for s in scores])
        return [s.score for s in scores]


def _column(columns: dict[str, Any], name: str, count: int) -> list[Any]:
    values = columns.get(name)
    if values is None:
        raise UserError(
            f"the reward needs a '{name}' column in the training dataset "
            "(build it with personalized_rewardbench.rewards.trl_prompt_dataset)"
        )
    if len(values) != count:
        raise UserError(f"column '{name}' has {len(values)} values for {count} completions")
    return list(values)


def _stats(scores: Sequence[EntryScore], seconds: float) -> dict[str, float]:
    count = max(1, len(scores))
    return {
        "mean": sum(s.score for s in scores) / count,
        "truncated": sum(s.truncated for s in scores) / count,
        "question_shortened": sum(s.question_shortened for s in scores) / count,
        "seconds": seconds,
    }
