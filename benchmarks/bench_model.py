"""Inputs for the scoring benchmarks: a randomly initialised decoder-only reward model of realistic
shape (scaled to a small CPU) and synthetic benchmark items with upstream-like lengths.

The tokenizer is `offline_models.make_tokenizer()`: the real all-MiniLM-L6-v2 WordPiece vocabulary
(30,522 tokens) with ChatML special tokens and chat template; nothing is downloaded.
"""

from __future__ import annotations

import random
from pathlib import Path

import torch
from transformers import LlamaForSequenceClassification, PreTrainedTokenizerFast

from personalized_rewardbench.data.eval_items import EvalItem, ProfilePost
from personalized_rewardbench.testing.tiny_models import llama_config, make_tokenizer

CATEGORIES = ("anime", "cooking", "travel", "fitness", "law", "history", "linguistics", "photography")


def build_model(folder: Path, *, layers: int = 4, hidden: int = 512, seed: int = 0) -> Path:
    """Save a random Llama-style sequence-classification RM (one logit) and its tokenizer to `folder`."""
    torch.manual_seed(seed)
    tokenizer = make_tokenizer()
    config = llama_config(
        tokenizer,
        hidden_size=hidden,
        intermediate_size=hidden * 11 // 4,
        num_hidden_layers=layers,
        num_attention_heads=hidden // 64,
        num_key_value_heads=max(1, hidden // 128),
        max_position_embeddings=8192,
        initializer_range=0.05,
        num_labels=1,
    )
    LlamaForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _vocabulary(tokenizer: PreTrainedTokenizerFast) -> list[str]:
    """Whole-word, alphabetic vocabulary entries: each is one token, so word counts are token counts."""
    return sorted(word for word in tokenizer.get_vocab() if word.isalpha() and word.isascii() and len(word) >= 3)


def make_items(count: int, seed: int = 0, posts: int = 10) -> list[EvalItem]:
    """`count` synthetic items: question 40-150 tokens, `posts` profile posts of 150-400 tokens,
    answers 60-130 tokens."""
    rng = random.Random(seed)
    words = _vocabulary(make_tokenizer())

    def text(low: int, high: int) -> str:
        n = rng.randint(low, high)
        sentence = [rng.choice(words) for _ in range(n - 1)]
        return " ".join(sentence).capitalize() + "."

    items = []
    for n in range(count):
        profile = tuple(ProfilePost(rng.choice(CATEGORIES), text(150, 400)) for _ in range(posts))
        items.append(
            EvalItem(f"bench_{n}", "Art_and_Entertainment", text(40, 150), profile, text(60, 130), text(60, 130))
        )
    return items


def make_answers(count: int, seed: int = 0, low: int = 250, high: int = 350) -> list[str]:
    """`count` synthetic answers of `low`-`high` tokens (Best-of-N candidates of upstream-like length)."""
    rng = random.Random(seed)
    words = _vocabulary(make_tokenizer())
    answers = []
    for _ in range(count):
        n = rng.randint(low, high)
        answers.append(" ".join(rng.choice(words) for _ in range(n - 1)).capitalize() + ".")
    return answers
