"""Per-model quirks in one place: model type, score head rule, dtype, max length, trust_remote_code,
chat template and the chat-template switches a judge needs.

Entries match a model id exactly, or as an `fnmatch` pattern (``*``, ``?``, ``[...]``; case-sensitive);
among matching patterns the longest wins. Unknown models get `ModelSpec()` defaults.
Baseline scorers are named `baseline:<name>` and need no weights.

>>> resolve_spec("Skywork/Skywork-Reward-V2-Qwen3-0.6B").max_length
8192
>>> resolve_spec("my/unknown-rm").score_rule
'auto'
>>> resolve_spec("internlm/internlm2-7b-reward").trust_remote_code
True
>>> resolve_spec("Qwen/Qwen2.5-1.5B-Instruct").model_type, resolve_spec("Qwen/Qwen3-8B").logits_template_kwargs
('judge-pairwise', {'enable_thinking': False})
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Any


@dataclass(frozen=True)
class ModelSpec:
    """How to run one reward model or judge.

    score_rule: ``auto`` (one-logit head -> that logit; more labels -> probability of the last class),
    or force ``logit`` / ``last_class_prob``. dtype ``auto`` is bfloat16 on GPU and float32 on CPU.
    logits_template_kwargs: extra `apply_chat_template` arguments for a judge that reads next-token
    probabilities (``--judge-mode logits``), e.g. ``enable_thinking=False`` for Qwen3's no-thinking
    layout; generate mode leaves the template's defaults (reasoning judges may think). Templates
    ignore arguments they do not use.
    """

    model_type: str = "classifier"
    score_rule: str = "auto"
    dtype: str = "auto"
    max_length: int = 8192
    trust_remote_code: bool = False
    chat_template: str | None = None  # overrides the tokenizer's template when set
    logits_template_kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""


REGISTRY: dict[str, ModelSpec] = {
    "Skywork/Skywork-Reward-V2-*": ModelSpec(
        max_length=8192, description="Skywork-Reward-V2 (Bradley-Terry, one logit; 8192 as the upstream protocol)"
    ),
    "Skywork/Skywork-Reward-Llama-3.1-8B*": ModelSpec(max_length=8192, description="Skywork-Reward (v1)"),
    "nicolinho/QRM-*": ModelSpec(trust_remote_code=True, description="quantile reward model with custom code"),
    "LxzGordon/URM-*": ModelSpec(trust_remote_code=True, description="uncertainty-aware RM with custom code"),
    "Ray2333/GRM-*": ModelSpec(trust_remote_code=True, description="generalizable RM with custom code"),
    "internlm/internlm2-*reward": ModelSpec(trust_remote_code=True, description="InternLM2 reward (custom head)"),
    "OpenAssistant/reward-model-deberta-v3-large-v2": ModelSpec(max_length=512, description="encoder RM, one logit"),
    # LLM judges (chat models): --model-type auto makes them pairwise judges.
    "Qwen/Qwen2.5-*-Instruct": ModelSpec(
        model_type="judge-pairwise", description="Qwen2.5 chat model as a pairwise judge (the Space's judge)"
    ),
    "Qwen/Qwen3-*": ModelSpec(
        model_type="judge-pairwise",
        logits_template_kwargs={"enable_thinking": False},
        description="Qwen3 chat model as a pairwise judge; no-thinking template layout in logits mode",
    ),
}


def resolve_spec(model: str, **overrides) -> ModelSpec:
    """The registry entry for `model` (exact id first, then the longest matching pattern)."""
    spec = REGISTRY.get(model)
    if spec is None:
        patterns = [p for p in REGISTRY if any(c in p for c in "*?[") and fnmatchcase(model, p)]
        spec = REGISTRY[max(patterns, key=len)] if patterns else ModelSpec()
    changes = {key: value for key, value in overrides.items() if value is not None}
    return replace(spec, **changes) if changes else spec
