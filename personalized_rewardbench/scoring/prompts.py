"""Prompt templates that turn an EvalItem into the chat a reward model scores.

Two templates for the user turn (the assistant turn is always the answer, unchanged):

- ``default``: with k > 0 profile posts::

      Here are some of my earlier posts, most relevant first:

      Post 1 (Category: cooking):
      <text>

      ...

      My question:
      <question>

  with k = 0, the question alone.
- ``upstream``: the upstream evaluator's message layout as the paper describes it: the top posts formatted
  ``Post i (Category: c):\\n<text>``, joined by blank lines, then the question; the question alone at k = 0.

What ``upstream`` reproduces is the *messages*: the user turn's text and the assistant turn (the answer),
laid out by the model's own chat template. It does not reproduce how upstream turns them into token ids.
The upstream evaluator renders the chat to text (``apply_chat_template(..., tokenize=False)``) and then
tokenizes that text with special tokens added; on tokenizers whose chat template already writes the BOS
token and whose tokenizer adds one too (Llama-3 style: ``<|begin_of_text|>`` twice) the input starts with
a doubled BOS. This package always tokenizes the chat directly (``apply_chat_template(..., tokenize=True)``),
so every template gives the single BOS the model was trained with. On tokenizers that add no BOS of their
own (Qwen2/3 and the Skywork-Reward-V2 Qwen models, for example) both routes give identical token ids; on
Llama-3 style tokenizers the only difference is the extra leading BOS, which can move scores slightly.

>>> from personalized_rewardbench.data.eval_items import EvalItem, ProfilePost
>>> posts = (ProfilePost("anime", "I loved Mushishi."),)
>>> item = EvalItem("0_0_1", "Art_and_Entertainment", "Which anime next?", posts, "A", "B")
>>> print(user_message(item, "upstream"))
Post 1 (Category: anime):
I loved Mushishi.
<BLANKLINE>
Which anime next?
"""

from __future__ import annotations

from personalized_rewardbench.data.eval_items import EvalItem, ProfilePost
from personalized_rewardbench.errors import UserError

TEMPLATES = ("default", "upstream")


def check_template(name: str) -> str:
    if name not in TEMPLATES:
        raise UserError(f"unknown --template {name!r}: choose one of {', '.join(TEMPLATES)}")
    return name


def format_posts(posts: tuple[ProfilePost, ...]) -> str:
    """Posts in the upstream format, numbered from 1, separated by blank lines."""
    return "\n\n".join(f"Post {i} (Category: {post.category}):\n{post.text}" for i, post in enumerate(posts, start=1))


def user_message(item: EvalItem, template: str = "default") -> str:
    """The user turn: the question, preceded by the item's profile posts when it has any."""
    if not item.posts:
        return item.question
    if template == "upstream":
        return f"{format_posts(item.posts)}\n\n{item.question}"
    return (
        f"Here are some of my earlier posts, most relevant first:\n\n{format_posts(item.posts)}"
        f"\n\nMy question:\n{item.question}"
    )


def reward_chat(item: EvalItem, answer: str, template: str = "default") -> list[dict[str, str]]:
    """The two-turn chat a classifier reward model scores."""
    return [{"role": "user", "content": user_message(item, template)}, {"role": "assistant", "content": answer}]
