"""Reading a judge's answer: verdicts and ratings from generated text, and from next-token probabilities.

Text (``--judge-mode generate``): reasoning in ``<think>…</think>`` is removed first (an unclosed
``<think>`` block runs to the end of the text; text before a lone ``</think>`` is reasoning whose
opening tag was in the prompt). Then the *last* ``Result: X`` (``Rating: N``) statement decides;
markdown (``**Result:** b``), case, ``Answer``/``Answer:`` before the letter and surrounding text are
tolerated. A last statement that names two choices (``Result: A/B``, ``Result: A or B``,
``Rating: 7-8``, ``Rating: 6 to 7``), a negative or out-of-range rating, or no statement at all is
no verdict — never "A". A lower-case ``a`` followed by a lower-case word is the article
(``Result: a tie``) unless that word is a verb of preference (``Result: a is better``).

>>> parse_verdict("<think>Result: A?</think>Both fit, but **Result:** b.")
'B'
>>> parse_verdict("Result: A. On reflection, Result: B"), parse_verdict("Result: A/B") is None
('B', True)
>>> parse_rating("**Rating:** 7/10"), parse_rating("Rating: ten") is None, parse_rating("Rating: 7-8") is None
(7.0, True, True)

Tokens (``--judge-mode logits``): `read_choices` derives, per tokenizer, how the answer is read. It
tokenizes each full answer ("Result: A", "Result: B"; "Rating: 0" … "Rating: 10") as the chat
template writes it at the start of the assistant turn, keeps the longest token prefix common to all
of them as the *forced prefix* (appended to every prompt), and each choice's remaining tokens as its
*path*. Byte-level BPE tokenizers (Qwen2/2.5/3, Llama-3) write "Rating: 7" as
``Rating`` ``:`` ``Ġ`` ``7``, so the forced prefix ends in the lone space and the digits are read
after it; "Result: A" is ``Result`` ``:`` ``ĠA``, so the prefix ends at the colon.

A choice's probability is the product of its path's next-token probabilities. When one path extends
another (digit-by-digit tokenizers write 10 as ``1`` ``0``), the shorter choice gets the remaining
mass: P(1) = P(``1``) x (1 - P(``0`` | ``1``)), i.e. "1" followed by anything but the rest of "10".
Every one-token choice likewise keeps whatever follows it (P(7) includes "7" followed by more text),
so all choices are treated alike. `choice_logprobs` does this arithmetic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_OTHER_LETTER = r"(?:(?i:answer)\W{0,4})?[ABab](?![A-Za-z0-9])"
# "result", up to 8 non-word characters (":", "**", " ", "[", "("), optionally "answer" (":"), then the
# letter; group 3 catches a second letter ("A/B", "A or B"): an ambiguous statement.
_VERDICT = re.compile(
    r"\b(?i:result)\W{0,8}?(?:(?i:answer)\W{0,4}?)?"
    r"(?:([AB])|([b]|a(?![ \t]+(?!(?:is|fits|wins|better|because)\b)[a-z])))(?![A-Za-z0-9])"
    r"(\s*(?:/|\\|&|\bor\b|\band\b|\bvs\.?)\s*" + _OTHER_LETTER + r")?"
)
# "rating", up to 8 non-word characters, a number not preceded by a minus sign; group 2 catches a
# range ("7-8", "7 to 8", "7/8"; but "7/10" is a rating out of ten).
_RATING = re.compile(
    r"\b(?i:rating)[^\w\-−–]{0,8}?(?<![\-−–])([0-9]+(?:\.[0-9]+)?)(?![0-9]|\.[0-9])"
    r"(\s*(?:-|−|–|\bto\b|/(?!\s*10(?![0-9])))\s*[0-9])?"
)


def strip_reasoning(text: str) -> str:
    """The text without ``<think>`` reasoning.

    >>> strip_reasoning("<think>hmm</think>Result: A"), strip_reasoning("Result: A <think>but")
    ('Result: A', 'Result: A ')
    >>> strip_reasoning("prompt-opened reasoning</think> Result: B")
    ' Result: B'
    """
    text = _THINK_BLOCK.sub("", text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    return text[: opened.start()] if opened else text


def parse_verdict(text: str) -> str | None:
    """ "A", "B", or None when the last verdict statement is missing or names both letters."""
    matches = list(_VERDICT.finditer(strip_reasoning(text)))
    if not matches or matches[-1].group(3):
        return None
    last = matches[-1]
    return (last.group(1) or last.group(2)).upper()


def parse_rating(text: str) -> float | None:
    """The last ``Rating: N`` when 0 <= N <= 10 and N is a single number (not a range), else None."""
    matches = list(_RATING.finditer(strip_reasoning(text)))
    if not matches or matches[-1].group(2):
        return None
    value = float(matches[-1].group(1))
    return value if 0 <= value <= 10 else None


# --------------------------------------------------------------------------------------------------
# Reading choices from next-token probabilities
# --------------------------------------------------------------------------------------------------

Path = tuple[int, ...]


@dataclass(frozen=True)
class ChoiceReader:
    """How a judge's choice is read from next-token log-probabilities (see the module docstring).

    prefix: tokens forced after the generation prompt; paths: each choice's tokens after the prefix;
    context: "chat" when derived inside the chat template's assistant turn, "text" when the template
    could not render a final assistant message and the strings were tokenized alone.
    """

    prefix: Path
    paths: dict[str, Path]
    context: str

    @property
    def tokens(self) -> list[int]:
        """Every token id some path uses (the ids whose log-probabilities are read)."""
        return sorted({token for path in self.paths.values() for token in path})

    @property
    def chains(self) -> list[Path]:
        """Token runs to append to a prompt so that one forward pass sees every branching point: the
        longest paths among the nodes where the next token is read (usually just the empty run)."""
        nodes = {path[:i] for path in self.paths.values() for i in range(len(path))}
        return sorted(n for n in nodes if not any(len(m) > len(n) and m[: len(n)] == n for m in nodes))

    @property
    def depth(self) -> int:
        """How many final positions of each extended prompt are read (1 + the longest chain)."""
        return 1 + max(map(len, self.chains))

    def node_rows(self, rows_per_chain: list[list[list[float]]]) -> dict[Path, dict[int, float]]:
        """Node -> {token: log P(token | prompt + prefix + node)} from the backend rows of the
        prompt's chains (each a list of `depth` rows, the last one after the whole chain)."""
        tokens, nodes = self.tokens, {}
        for chain, rows in zip(self.chains, rows_per_chain):
            for j in range(len(chain) + 1):
                nodes[chain[:j]] = dict(zip(tokens, rows[len(rows) - 1 - (len(chain) - j)]))
        return nodes

    def logprobs(self, rows_per_chain: list[list[list[float]]]) -> dict[str, float]:
        """log P(choice) for one prompt; see `choice_logprobs`."""
        nodes = self.node_rows(rows_per_chain)
        return choice_logprobs(self.paths, lambda node, token: nodes[node][token])


def choice_logprobs(paths: dict[str, Path], logprob: Callable[[Path, int], float]) -> dict[str, float]:
    """log P(choice) from `logprob(node, token)`; a path that others extend keeps only the mass that
    does not continue into them.

    >>> lp = {(): {1: math.log(0.5), 2: math.log(0.25)}, (1,): {0: math.log(0.2)}}
    >>> got = choice_logprobs({"1": (1,), "2": (2,), "10": (1, 0)}, lambda node, token: lp[node][token])
    >>> {choice: round(math.exp(value), 3) for choice, value in got.items()}
    {'1': 0.4, '2': 0.25, '10': 0.1}
    """
    raw = {choice: math.fsum(logprob(path[:i], path[i]) for i in range(len(path))) for choice, path in paths.items()}
    out = {}
    for choice, path in paths.items():
        longer = [other for other, p in paths.items() if len(p) > len(path) and p[: len(path)] == path]
        minimal = [
            o
            for o in longer
            if not any(len(paths[m]) < len(paths[o]) and paths[o][: len(paths[m])] == paths[m] for m in longer)
        ]
        rest = math.fsum(math.exp(raw[o] - raw[choice]) for o in minimal) if raw[choice] > -math.inf else 0.0
        out[choice] = raw[choice] + math.log1p(-rest) if rest < 1.0 else -math.inf
    return out


def _ids(encoded) -> list[int]:
    return list(encoded["input_ids"] if not isinstance(encoded, list) else encoded)


def read_choices(
    tokenizer, template: str, choices: list[str], chat: list[dict[str, str]], template_kwargs: dict | None = None
) -> ChoiceReader:
    """The forced prefix and each choice's path for `template.format(choice)` answered after `chat`.

    Choices whose path holds the unknown token, or does not decode to the choice, are left out.
    """
    kwargs = dict(template_kwargs or {})
    texts = {choice: template.format(choice) for choice in choices}
    full: dict[str, list[int]] | None = None
    context = "text"
    try:
        start = _ids(
            tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=True, **kwargs)
        )
        full = {
            choice: _ids(
                tokenizer.apply_chat_template(
                    chat + [{"role": "assistant", "content": text}],
                    continue_final_message=True,
                    tokenize=True,
                    return_dict=True,
                    **kwargs,
                )
            )
            for choice, text in texts.items()
        }
        if all(ids[: len(start)] == start and len(ids) > len(start) for ids in full.values()):
            full, context = {choice: ids[len(start) :] for choice, ids in full.items()}, "chat"
        else:
            full = None
    except Exception:  # templates that cannot end on an assistant message (jinja's TemplateError, ValueError)
        full = None
    if full is None:
        full = {choice: _ids(tokenizer(text, add_special_tokens=False)) for choice, text in texts.items()}
    shared = min(map(len, full.values())) - 1
    first = next(iter(full.values()))
    for ids in full.values():
        shared = min(shared, next((i for i, (a, b) in enumerate(zip(first, ids)) if a != b), len(ids)))
    paths: dict[str, Path] = {}
    for choice, ids in full.items():
        path = tuple(ids[shared:])
        if tokenizer.unk_token_id in path or tokenizer.decode(list(path)).strip().upper() != choice.upper():
            continue
        if path not in paths.values():
            paths[choice] = path
    return ChoiceReader(tuple(first[:shared]), paths, context)
