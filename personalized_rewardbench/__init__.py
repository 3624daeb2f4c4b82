"""Personalized RewardBench: measure whether a reward model prefers the answer that fits *this* user."""

__version__ = "0.1.0"
