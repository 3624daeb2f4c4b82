"""Personalized rewards for RL: a TRL reward function, a reward server, and a verl reward function.

`PersonalizedReward` and the data helpers load on first use, so importing this package stays light.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PersonalizedReward", "trl_prompt_dataset", "write_verl_parquet"]


def __getattr__(name: str) -> Any:
    if name == "PersonalizedReward":
        from personalized_rewardbench.rewards.trl_reward import PersonalizedReward

        return PersonalizedReward
    if name in ("trl_prompt_dataset", "write_verl_parquet"):
        from personalized_rewardbench.rewards import datasets

        return getattr(datasets, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
