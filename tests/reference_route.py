"""The reference code's classifier route, rewritten for the tests from its description (shared/DESIGN.md,
"How the reference code builds a classifier's input"), independent of the package under test.

It works on plain data (question, a ranked list of post dicts, answers) and plain transformers calls:
`question + profile` user turn, chat rendered to text, that text tokenized as a batch with the tokenizer's
default special tokens, padding with EOS where the tokenizer has none, right truncation at 8,192 tokens,
the model's own pooling, score = logit 0 of one-logit heads, else softmax of the last class.
Inputs go in the reference's order (chosen then rejected of each item) in batches of `batch_size`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

MAX_LENGTH = 8192


@dataclass
class ReferenceInput:
    question: str
    posts: list[dict[str, str]]  # ranked, most relevant first: {"category": ..., "text": ...}
    answer: str


def profile_text(posts: list[dict[str, str]]) -> str:
    blocks = []
    for number, post in enumerate(posts, start=1):
        blocks.append("Post " + str(number) + " (Category: " + post["category"] + "):\n" + post["text"])
    return "\n".join(blocks)


def rendered(tokenizer, entry: ReferenceInput) -> str:
    conversation = [
        {"role": "user", "content": entry.question + profile_text(entry.posts)},
        {"role": "assistant", "content": entry.answer},
    ]
    return tokenizer.apply_chat_template(conversation, tokenize=False)


def load(folder: str):
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32).eval()
    return tokenizer, model


@torch.no_grad()
def score(
    folder: str, entries: list[ReferenceInput], batch_size: int = 8, max_length: int = MAX_LENGTH
) -> tuple[list[list[int]], list[float]]:
    """(each input's token ids without padding, each input's score), in the order of `entries`."""
    tokenizer, model = load(folder)
    all_ids: list[list[int]] = []
    scores: list[float] = []
    for start in range(0, len(entries), batch_size):
        texts = [rendered(tokenizer, entry) for entry in entries[start : start + batch_size]]
        batch = tokenizer(texts, return_tensors="pt", padding=True, truncation=True, max_length=max_length)
        for row, mask in zip(batch["input_ids"], batch["attention_mask"]):
            all_ids.append([int(token) for token, keep in zip(row, mask) if keep])
        logits = model(**batch).logits.float()
        if logits.shape[-1] == 1:
            scores += logits[:, 0].tolist()
        else:
            scores += torch.softmax(logits, dim=-1)[:, -1].tolist()
    return all_ids, scores
