"""The rules a generated pair must pass to be kept; every dropped item records why.

Two stages, in this order (the cheap rules first, so the judge only rates pairs that can still be kept):

1. **Rules on the texts** (`rule_check`):
   ``empty_answer``, ``identical_answers``; ``over_word_limit`` (either answer longer than
   ``max_words`` words); ``length_ratio`` (chosen words / rejected words outside
   ``[min_length_ratio, max_length_ratio]``, 0.8-1.25 by default); ``key_leak`` (an answer shares a
   run of ``leak_ngram`` words, 8 by default, with the answer key — narrative, aspects, evidence,
   reasons — that does not also occur in what the generator was shown: the question and the posts.
   Quoting the user's own post is not a leak; quoting the narrative or an aspect is).
2. **Judge ratings** (`judge_check`): ``judge_unparsable`` (the rubric judge gave no well-formed
   ratings for either answer: excluded, never defaulted); ``judge_margin`` (rubric quality of chosen
   minus rejected, each a mean of 0/1/2 ratings, below ``margin``); with the optional quality check,
   ``quality_unparsable`` and ``low_quality`` (either answer's general quality, rated on the question
   alone with `prompts.QUALITY_ASPECTS`, below ``min_quality``: the pair must differ in fit, not quality).

Lengths count whitespace-separated words; n-grams are over lower-cased ``\\w+`` words.

>>> leaked_ngrams("As you said, you want short shows only.", ["I want short shows only please"], [], 4)
['want short shows only']
>>> length_ratio("one two three four", "one two three four five")
0.8
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from personalized_rewardbench.errors import UserError

#: Every drop reason, in the order they are checked (an item's first reason is its primary one).
RULE_REASONS = ("empty_answer", "identical_answers", "over_word_limit", "length_ratio", "key_leak")
JUDGE_REASONS = ("judge_unparsable", "judge_margin", "quality_unparsable", "low_quality")
REASONS = RULE_REASONS + JUDGE_REASONS

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class VerifyConfig:
    """Thresholds of the verification rules (all configurable from the CLI)."""

    margin: float = 0.5  # rubric quality (0-2 scale) chosen minus rejected, at least
    min_length_ratio: float = 0.8
    max_length_ratio: float = 1.25
    max_words: int = 100  # per answer; also the limit the generation prompts ask for
    leak_ngram: int = 8  # shortest shared word run that counts as quoting the answer key
    quality_check: bool = False
    min_quality: float = 1.0  # general quality (0-2 scale) each answer needs, with quality_check

    def __post_init__(self) -> None:
        if not 0 < self.min_length_ratio <= 1 <= self.max_length_ratio:
            raise UserError(
                f"length ratio band [{self.min_length_ratio}, {self.max_length_ratio}] must hold 1 "
                "(e.g. --min-length-ratio 0.8 --max-length-ratio 1.25)"
            )
        if not 0 <= self.margin <= 2:
            raise UserError(f"--margin is on the judge's 0-2 scale, got {self.margin}")
        if not 0 <= self.min_quality <= 2:
            raise UserError(f"--min-quality is on the judge's 0-2 scale, got {self.min_quality}")
        if self.max_words < 10:
            raise UserError(f"--max-words must be at least 10, got {self.max_words}")
        if self.leak_ngram < 3:
            raise UserError(f"--leak-ngram must be at least 3 words, got {self.leak_ngram}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def word_count(text: str) -> int:
    return len(text.split())


def length_ratio(chosen: str, rejected: str) -> float:
    """Words of `chosen` over words of `rejected` (rounded to 4 places; inf when `rejected` is empty)."""
    return round(word_count(chosen) / word_count(rejected), 4) if word_count(rejected) else float("inf")


def _ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def leaked_ngrams(answer: str, key_texts: Iterable[str], visible_texts: Iterable[str], n: int) -> list[str]:
    """The `n`-word runs of `answer` found in the answer key but in none of the texts the generator saw."""
    key = set().union(*(_ngrams(text, n) for text in key_texts))
    visible = set().union(*(_ngrams(text, n) for text in visible_texts))
    return sorted(" ".join(gram) for gram in (_ngrams(answer, n) & key) - visible)


def answer_key_texts(row: Mapping[str, Any]) -> list[str]:
    """Everything of a row that is the answer key: the narrative and every aspect's aspect, evidence and reason."""
    parts = [row["narrative"]]
    for aspect in row["rubric_aspects"]:
        parts.extend(aspect[field] for field in ("aspect", "evidence", "reason"))
    return parts


def rule_check(
    chosen: str, rejected: str, row: Mapping[str, Any], shown: Sequence[str], config: VerifyConfig
) -> tuple[list[str], dict[str, Any]]:
    """(failed rules in `RULE_REASONS` order, measurements) for one pair; `shown` = the texts the generator saw."""
    reasons: list[str] = []
    words = [word_count(chosen), word_count(rejected)]
    ratio = length_ratio(chosen, rejected)
    if not chosen.strip() or not rejected.strip():
        reasons.append("empty_answer")
    elif chosen.strip() == rejected.strip():
        reasons.append("identical_answers")
    if max(words) > config.max_words:
        reasons.append("over_word_limit")
    if not config.min_length_ratio <= ratio <= config.max_length_ratio:
        reasons.append("length_ratio")
    key = answer_key_texts(row)
    leaks = {
        role: leaked_ngrams(text, key, shown, config.leak_ngram)
        for role, text in (("chosen", chosen), ("rejected", rejected))
    }
    if any(leaks.values()):
        reasons.append("key_leak")
    details = {
        "words": words,
        "length_ratio": ratio if ratio != float("inf") else None,
        "leaks": {role: found[:3] for role, found in leaks.items() if found},
    }
    return reasons, details


def judge_check(
    rubric: Sequence[float | None], quality: Sequence[float | None] | None, config: VerifyConfig
) -> tuple[list[str], dict[str, Any]]:
    """(failed judge rules in `JUDGE_REASONS` order, measurements) from (chosen, rejected) ratings.

    `rubric` holds the rubric judge's mean rating of each answer (None: unparsable); `quality` the
    general-quality ratings when the quality check ran, else None."""
    reasons: list[str] = []
    details: dict[str, Any] = {"rubric": list(rubric), "margin": None}
    if None in rubric:
        reasons.append("judge_unparsable")
    else:
        margin = round(rubric[0] - rubric[1], 4)
        details["margin"] = margin
        if margin < config.margin:
            reasons.append("judge_margin")
    if quality is not None:
        details["quality"] = list(quality)
        if None in quality:
            reasons.append("quality_unparsable")
        elif min(quality) < config.min_quality:
            reasons.append("low_quality")
    return reasons, details
