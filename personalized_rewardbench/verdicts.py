"""Reading a judge's answer: verdicts and ratings from generated text, and the tokens that spell them.

Text (``--judge-mode generate``): reasoning in ``<think>…</think>`` is removed first (an unclosed
``<think>`` block runs to the end of the text; text before a lone ``</think>`` is reasoning whose
opening tag was in the prompt). Then the *last* ``Result: X`` (``Rating: N``) wins; markdown
(``**Result:** b``), case and surrounding text are tolerated. No match means no verdict — never "A".

>>> parse_verdict("<think>Result: A?</think>Both fit, but **Result:** b.")
'B'
>>> parse_verdict("Result: A. On reflection, Result: B") , parse_verdict("Result: a tie") is None
('B', True)
>>> parse_rating("**Rating:** 7/10"), parse_rating("Rating: ten") is None
(7.0, True)

Tokens (``--judge-mode logits``): `choice_token_ids` finds, for each choice ("A", "B" or "0".."10"),
the single tokens that spell it, with and without a leading space, as the tokenizer writes them
(lower-casing tokenizers turn "A" into "a"). A choice no single token spells is left out (e.g. "10"
in tokenizers that split digits); a letter verdict without its tokens is an error.
"""

from __future__ import annotations

import re

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
# "result", up to 8 non-word characters (":", "**", " ", "[", "("), optionally "answer", then the letter.
# A lower-case "a" followed by a lower-case word is the article ("Result: a tie"), not a verdict.
_VERDICT = re.compile(r"\b(?i:result)\W{0,8}?(?:(?i:answer)\s*)?(?:([AB])|([ab])(?![ \t]+[a-z]))(?![A-Za-z0-9])")
_RATING = re.compile(r"\b(?i:rating)\W{0,8}?(10(?:\.0+)?|[0-9](?:\.[0-9]+)?)(?![0-9])")


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
        text = text[closes[-1].end():]
    opened = _THINK_OPEN.search(text)
    return text[: opened.start()] if opened else text


def parse_verdict(text: str) -> str | None:
    """"A", "B", or None when the text states no verdict; the last verdict stated wins."""
    matches = list(_VERDICT.finditer(strip_reasoning(text)))
    if not matches:
        return None
    last = matches[-1]
    return (last.group(1) or last.group(2)).upper()


def parse_rating(text: str) -> float | None:
    """The last ``Rating: N`` with 0 <= N <= 10, or None."""
    matches = list(_RATING.finditer(strip_reasoning(text)))
    return float(matches[-1].group(1)) if matches else None


def _single_token(tokenizer, text: str) -> int | None:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) == 2 and tokenizer.decode(ids[:1]).strip() == "":  # SentencePiece: "▁" + "A"
        ids = ids[1:]
    return ids[0] if len(ids) == 1 else None


def choice_token_ids(tokenizer, choices: list[str]) -> dict[str, list[int]]:
    """For each choice, the distinct single-token ids that decode to it (spaces and case ignored).

    An id is kept only for the one choice it decodes to, so the choices' id lists never overlap.
    Choices no single token spells get an empty list.
    """
    found: dict[str, list[int]] = {choice: [] for choice in choices}
    owner: dict[int, str] = {}
    vocab = tokenizer.get_vocab()
    for choice in choices:
        candidates = [_single_token(tokenizer, choice), _single_token(tokenizer, " " + choice)]
        candidates += [vocab.get(prefix + choice) for prefix in ("Ġ", "▁")]  # byte-level BPE / SentencePiece spellings
        for token_id in candidates:
            if token_id is None or token_id in owner or token_id == tokenizer.unk_token_id:
                continue
            if tokenizer.decode([token_id]).strip().upper() != choice.upper():
                continue
            owner[token_id] = choice
            found[choice].append(token_id)
    return found
