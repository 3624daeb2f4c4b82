"""Tiny offline models for the tests (see personalized_rewardbench.testing.tiny_models)."""

from personalized_rewardbench.testing.tiny_models import (  # noqa: F401
    CHAT_TEMPLATE,
    build_tiny_causal_lm,
    build_tiny_reward_model,
    llama_config,
    make_tokenizer,
)
