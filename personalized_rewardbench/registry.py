"""Per-model quirks in one place: score head rule, dtype, max length, trust_remote_code, template.

Entries match a model id exactly or by a trailing-`*` prefix; unknown models get `ModelSpec()` defaults.
Baseline scorers are named `baseline:<name>` and need no weights.

>>> resolve_spec("Skywork/Skywork-Reward-V2-Qwen3-0.6B").max_length
16384
>>> resolve_spec("my/unknown-rm").score_rule
'auto'
"""

from __future__ import annotations

from dataclasses import dataclass, replace

SCORE_RULES = ("auto", "logit", "last_class_prob")


@dataclass(frozen=True)
class ModelSpec:
    """How to run one reward model.

    score_rule: ``auto`` (one-logit head -> that logit; more labels -> probability of the last class),
    or force ``logit`` / ``last_class_prob``. dtype ``auto`` is bfloat16 on GPU and float32 on CPU.
    """

    model_type: str = "classifier"
    score_rule: str = "auto"
    dtype: str = "auto"
    max_length: int = 8192
    trust_remote_code: bool = False
    chat_template: str | None = None  # overrides the tokenizer's template when set
    description: str = ""


REGISTRY: dict[str, ModelSpec] = {
    "Skywork/Skywork-Reward-V2-*": ModelSpec(max_length=16384, description="Skywork-Reward-V2 (Bradley-Terry, one logit)"),
    "Skywork/Skywork-Reward-Llama-3.1-8B*": ModelSpec(max_length=8192, description="Skywork-Reward (v1)"),
    "nicolinho/QRM-*": ModelSpec(trust_remote_code=True, description="quantile reward model with custom code"),
    "LxzGordon/URM-*": ModelSpec(trust_remote_code=True, description="uncertainty-aware RM with custom code"),
    "Ray2333/GRM-*": ModelSpec(trust_remote_code=True, description="generalizable RM with custom code"),
    "internlm/internlm2-*reward": ModelSpec(trust_remote_code=True, description="InternLM2 reward (custom head)"),
    "OpenAssistant/reward-model-deberta-v3-large-v2": ModelSpec(max_length=512, description="encoder RM, one logit"),
}


def resolve_spec(model: str, **overrides) -> ModelSpec:
    """The registry entry for `model` (exact id first, then the longest matching prefix pattern)."""
    spec = REGISTRY.get(model)
    if spec is None:
        patterns = [p for p in REGISTRY if p.endswith("*") and model.startswith(p[:-1])]
        spec = REGISTRY[max(patterns, key=len)] if patterns else ModelSpec()
    changes = {key: value for key, value in overrides.items() if value is not None}
    return replace(spec, **changes) if changes else spec
