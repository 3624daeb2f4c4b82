"""Build the scorer a run asks for: a baseline, a classifier reward model, or an LLM judge."""

from __future__ import annotations

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.config import MODEL_TYPES, RunConfig
from personalized_rewardbench.scoring.base import Scorer
from personalized_rewardbench.scoring.judge_backends import JudgeSettings
from personalized_rewardbench.scoring.protocols import UPSTREAM_MAX_LENGTH
from personalized_rewardbench.scoring.registry import resolve_spec


def make_scorer(config: RunConfig) -> Scorer:
    """The scorer for `config.model` / `config.model_type`."""
    if config.model.startswith("baseline:"):
        from personalized_rewardbench.scoring.baselines import make_baseline

        return make_baseline(config.model, config.seed)
    upstream = config.protocol == "upstream"
    max_length = config.max_length or (UPSTREAM_MAX_LENGTH if upstream else None)  # the reference's, not the registry's
    spec = resolve_spec(config.model, trust_remote_code=config.trust_remote_code or None, max_length=max_length)
    model_type = spec.model_type if config.model_type == "auto" else config.model_type
    if upstream and model_type == "judge-pairwise":
        from personalized_rewardbench.scoring.upstream_judge import UpstreamPairwiseJudge

        return UpstreamPairwiseJudge.create(judge_settings(config), spec, config.upstream_prompts, config.profile_k)
    if upstream and model_type == "judge-score":
        raise UserError(
            "--protocol upstream has no rating judge: the reference code evaluates judges pairwise "
            "(--model-type judge-pairwise), or use --protocol prbench"
        )
    if model_type == "classifier":
        from personalized_rewardbench.scoring.classifier import ClassifierScorer

        return ClassifierScorer(
            config.model,
            spec,
            revision=config.revision,
            device=config.device,
            dtype=config.dtype,
            template=config.template,
            batch_tokens=config.batch_tokens,
            shared_prefix=config.shared_prefix,
            protocol=config.protocol,
        )
    if model_type in ("judge-pairwise", "judge-score"):
        from personalized_rewardbench.scoring.judges import make_judge

        return make_judge(judge_settings(config), spec, model_type)
    raise UserError(f"unknown --model-type {config.model_type!r}: choose one of {', '.join(MODEL_TYPES)}")


def judge_settings(config: RunConfig) -> JudgeSettings:
    """The judge options of a run."""
    return JudgeSettings(
        model=config.model,
        judge_mode=config.judge_mode,
        max_new_tokens=config.max_new_tokens,
        batch_tokens=config.batch_tokens,
        backend=config.backend,
        revision=config.revision,
        device=config.device,
        dtype=config.dtype,
        seed=config.seed,
        shared_prefix=config.shared_prefix,
    )
