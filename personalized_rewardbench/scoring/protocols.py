"""Input protocols: how a classifier reward model's input token ids are built from an item and an answer.

Two protocols (`--protocol`, recorded as results.json ``protocol.name``; runs of different protocols are
different runs and are never ranked together):

``prbench`` (default): the chat ``[user, assistant]`` through the tokenizer's chat template, *tokenized
directly* (the template's own special tokens, nothing added twice); the user turn lists the posts first,
labelled, then the question (`prompts.user_message`); a pad token distinct from EOS is added where the
tokenizer has none, so last-non-pad pooling scores the final token; over-long inputs lose their
lowest-ranked posts first and never the answer (`ClassifierScorer.fit`).

``upstream``: the reference code's route (Martin-qyma/Personalized-RewardBench: ``evaluation/pointwise.py``
at k = 0, ``BoN/score.py`` and ``PPO/reward_server.py`` with a profile), token for token:

- user turn ``question + profile``: the top-k posts ``Post i (Category: c):\\n<text>`` joined by one
  newline, appended right after the question with no separator (the question alone at k = 0);
- the chat is rendered to *text* with the chat template, then that text is tokenized with the
  tokenizer's default special tokens, so a tokenizer that adds a BOS gets it twice and a BERT-style
  one wraps the rendered text in [CLS] … [SEP];
- truncation on the tokenizer's truncation side (right, by default) at 8,192 tokens (`--max-length`
  overrides; capped by the model's positions, where the reference would fail): it can cut the answer;
- where the tokenizer has no pad token, the pad is EOS, and the model pools with that id: with a
  template that ends in EOS the score is read at the token before the final EOS.

A tokenizer without a chat template cannot take the upstream route (the reference fails on it too):
one clear error line. A registry ``chat_template`` supplies one.

>>> from personalized_rewardbench.data.eval_items import EvalItem, ProfilePost
>>> posts = (ProfilePost("anime", "I loved Mushishi."), ProfilePost("film", "Ozu."))
>>> upstream_user_turn(EvalItem("0_0_1", "Art_and_Entertainment", "Which anime next?", posts, "A", "B"))
'Which anime next?Post 1 (Category: anime):\\nI loved Mushishi.\\nPost 2 (Category: film):\\nOzu.'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.errors import UserError

PROTOCOLS = ("prbench", "upstream")
DEFAULT_PROTOCOL = "prbench"
#: The reference code's `max_length` for classifier inputs.
UPSTREAM_MAX_LENGTH = 8192
#: The reference pairwise judge's seed for its one random order per item.
UPSTREAM_SEED = 42


def check_protocol(name: str) -> str:
    if name not in PROTOCOLS:
        raise UserError(f"unknown --protocol {name!r}: choose one of {', '.join(PROTOCOLS)}")
    return name


def protocol_name(results: dict[str, Any]) -> str:
    """The input protocol of a stored run (runs written before protocols existed are ``prbench``)."""
    return (results.get("protocol") or {}).get("name", DEFAULT_PROTOCOL)


def upstream_profile(item: EvalItem) -> str:
    """The reference's profile string: posts numbered from 1, joined by a single newline ('' at k = 0)."""
    return "\n".join(f"Post {i} (Category: {post.category}):\n{post.text}" for i, post in enumerate(item.posts, 1))


def upstream_user_turn(item: EvalItem) -> str:
    """``question + profile``: the profile appended right after the question, no separator."""
    return item.question + upstream_profile(item)


def use_eos_as_pad(tokenizer, model) -> bool:
    """The reference's pad: the tokenizer's own pad token, else EOS; the model pools with that id.

    Returns True when EOS was made the pad token."""
    made = False
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise UserError("--protocol upstream: the tokenizer has neither a pad token nor an EOS token to pad with")
        tokenizer.pad_token = tokenizer.eos_token
        made = True
    model.config.pad_token_id = tokenizer.pad_token_id
    return made


@dataclass(frozen=True)
class UpstreamInputs:
    """Builds the reference code's classifier inputs with `tokenizer` (see the module docstring)."""

    tokenizer: Any
    max_length: int

    @classmethod
    def for_model(cls, name: str, tokenizer, max_length: int) -> UpstreamInputs:
        if not tokenizer.chat_template:
            raise UserError(
                f"--protocol upstream: {name} has no chat template, and the reference code renders every input "
                "with one; use --protocol prbench (it encodes (question, answer) as a text pair)"
            )
        return cls(tokenizer, max_length)

    def render(self, item: EvalItem, answer: str | None) -> str:
        """The chat as text; `answer` None: the user turn and the generation prompt (the shared prefix)."""
        chat = [{"role": "user", "content": upstream_user_turn(item)}]
        if answer is None:
            return self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        chat.append({"role": "assistant", "content": answer})
        return self.tokenizer.apply_chat_template(chat, tokenize=False)

    def _tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer(text, truncation=True, max_length=self.max_length)["input_ids"])

    def encode_answer(self, item: EvalItem, answer: str) -> list[int]:
        """The input ids the reference scores for `answer`, truncated as it truncates."""
        return self._tokenize(self.render(item, answer))

    def encode_prompt(self, item: EvalItem) -> list[int]:
        """Ids of the rendered prompt (tokenized the same way); only used to find the shared prefix."""
        return self._tokenize(self.render(item, None))

    def encode_answers(self, item: EvalItem, answers: Sequence[str]) -> tuple[tuple[list[int], ...], bool]:
        """(each answer's input ids, whether any was cut at `max_length`)."""
        texts = [self.render(item, answer) for answer in answers]
        cut = max(len(self.tokenizer(text)["input_ids"]) for text in texts) > self.max_length
        return tuple(self._tokenize(text) for text in texts), cut
