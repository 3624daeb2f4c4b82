"""Prompt templates that turn an EvalItem into the chat a reward model scores.

The user turn's wording under ``--protocol prbench`` (the assistant turn is always the answer, unchanged);
``--protocol upstream`` has one fixed user turn (`protocols.upstream_user_turn`), so it takes no template:

- ``default``: with k > 0 profile posts::

      Here are some of my earlier posts, most relevant first:

      Post 1 (Category: cooking):
      <text>

      ...

      My question:
      <question>

  with k = 0, the question alone.
- ``posts-first``: the top posts formatted ``Post i (Category: c):\\n<text>``, joined by blank lines, then
  the question, unlabelled; the question alone at k = 0. It is *not* the reference code's layout (that
  is ``question + profile``, see `protocols.py`); ``--template upstream`` was its old name and now points
  the user to ``--protocol upstream``.

>>> from personalized_rewardbench.data.eval_items import EvalItem, ProfilePost
>>> posts = (ProfilePost("anime", "I loved Mushishi."),)
>>> item = EvalItem("0_0_1", "Art_and_Entertainment", "Which anime next?", posts, "A", "B")
>>> print(user_message(item, "posts-first"))
Post 1 (Category: anime):
I loved Mushishi.
<BLANKLINE>
Which anime next?
"""

from __future__ import annotations

from personalized_rewardbench.data.eval_items import EvalItem, ProfilePost
from personalized_rewardbench.errors import UserError

TEMPLATES = ("default", "posts-first")


def check_template(name: str) -> str:
    if name == "upstream":
        raise UserError(
            "--template upstream is gone: --protocol upstream builds the reference code's inputs token for token; "
            "the old posts-first layout is --template posts-first"
        )
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
    if template == "posts-first":
        return f"{format_posts(item.posts)}\n\n{item.question}"
    return (
        f"Here are some of my earlier posts, most relevant first:\n\n{format_posts(item.posts)}"
        f"\n\nMy question:\n{item.question}"
    )


def reward_chat(item: EvalItem, answer: str, template: str = "default") -> list[dict[str, str]]:
    """The two-turn chat a classifier reward model scores."""
    return [{"role": "user", "content": user_message(item, template)}, {"role": "assistant", "content": answer}]
