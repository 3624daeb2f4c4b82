"""What defines a personalized reward: the scorer (built exactly as `prbench evaluate` builds it) and
how the prompt is made (profile k, retriever, template).

The TRL reward function and the reward server both start here, so a completion gets the score
`evaluate` would give it under the same settings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.scorer_factory import make_scorer
from personalized_rewardbench.scoring.base import Scorer

#: Posts the reward model sees by default: the paper's RL and Best-of-N setups use the top 10.
DEFAULT_PROFILE_K = 10


@dataclass
class RewardSettings:
    """The reward model and the prompt settings; validated like `prbench evaluate`'s options."""

    model: str
    profile_k: int = DEFAULT_PROFILE_K
    retriever: str = "contriever"
    template: str = "default"
    model_type: str = "auto"
    revision: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    max_length: int | None = None
    batch_tokens: int | None = None
    trust_remote_code: bool = False
    shared_prefix: bool = True
    cache_dir: Path | None = None

    def run_config(self) -> RunConfig:
        """The evaluate configuration with these settings (validates them; `data` is never read here)."""
        return RunConfig(
            model=self.model,
            data="sample",
            profile_k=self.profile_k,
            retriever=self.retriever,
            template=self.template,
            model_type=self.model_type,
            revision=self.revision,
            dtype=self.dtype,
            device=self.device,
            trust_remote_code=self.trust_remote_code,
            max_length=self.max_length,
            batch_tokens=self.batch_tokens,
            shared_prefix=self.shared_prefix,
            cache_dir=self.cache_dir,
            progress=False,
        )


def _pin_local_gpu() -> None:
    """Under `accelerate launch` / torchrun every process would load onto cuda:0: use the local rank's GPU."""
    local_rank = os.environ.get("LOCAL_RANK")
    if local_rank is None:
        return
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > int(local_rank):
        torch.cuda.set_device(int(local_rank))


def build_scorer(settings: RewardSettings) -> Scorer:
    """The scorer `prbench evaluate` would use for these settings; pairwise judges cannot give rewards."""
    config = settings.run_config()
    if settings.device in ("auto", "cuda"):
        _pin_local_gpu()
    scorer = make_scorer(config)
    if scorer.model_type == "judge-pairwise":
        raise UserError(
            f"{settings.model!r} is a pairwise judge: it compares two answers and gives no reward for one; "
            "use a classifier reward model or --model-type judge-score"
        )
    return scorer


def describe(settings: RewardSettings, scorer: Scorer, retriever: str) -> dict[str, Any]:
    """Model, revision and protocol, in the form `evaluate` records them (plus the retriever in use)."""
    return {
        "model": scorer.name,
        "revision": scorer.revision,
        "model_type": scorer.model_type,
        "protocol": {
            "profile_k": settings.profile_k,
            "retriever": retriever if settings.profile_k > 0 else "none",
            "template": settings.template,
            **scorer.protocol(),
        },
    }
