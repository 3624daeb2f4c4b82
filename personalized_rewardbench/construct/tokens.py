"""Count what construction spends: tokens generated, and tokens the judge reads and writes.

The generation backends return texts only, so counts come from the model's own tokenizer: the one
the transformers and vLLM backends hold, else the tokenizer loaded by the model name (a server that
serves a Hub model). When no tokenizer can be had, counts fall back to whitespace words, and the
unit says so (`"words"`), so a cost report never passes words off as tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from personalized_rewardbench.downstream.generation import chat_ids
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.model_loading import load_tokenizer
from personalized_rewardbench.scoring.registry import resolve_spec


class TokenCounter:
    """Counts the tokens of texts and of rendered chats with one model's tokenizer (or words)."""

    def __init__(self, backend: Any, model: str):
        self.tokenizer = getattr(backend, "tokenizer", None)
        if self.tokenizer is None:
            try:
                self.tokenizer = load_tokenizer(model, resolve_spec(model))
            except (UserError, OSError, ValueError):
                self.tokenizer = None
        self.unit = "tokens" if self.tokenizer is not None else "words"

    def text(self, text: str) -> int:
        if self.tokenizer is None:
            return len(text.split())
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def chat(self, chat: Sequence[dict[str, str]]) -> int:
        """Tokens of the prompt a chat renders to (with the generation prompt), as the backend sends it."""
        if self.tokenizer is None or not getattr(self.tokenizer, "chat_template", None):
            return sum(self.text(message["content"]) for message in chat)
        return len(chat_ids(self.tokenizer, list(chat)))
