"""The reward server: `prbench serve-reward --model RM` (FastAPI + uvicorn).

- ``POST /score``: a JSON list of ``{"question": str, "response": str, "posts": [...] | "profile": [...],
  "id": str (optional)}`` (or ``{"items": [...]}``); answers ``{"scores": [...], "truncated": [...],
  "question_shortened": [...]}`` in request order. ``posts`` are already ranked (the first `profile_k` are
  used); a full ``profile`` is ranked with the server's retriever.
- ``GET /health``: 200 while the scoring worker runs, else 503.
- ``GET /info``: model, revision, protocol (as `evaluate` records it) and the server's limits.

Requests arriving together are scored in one call (see `batcher`), answers about the same prompt from
one shared prompt. Errors are answers, never scores: a malformed request is 400/413/422 with a message, a
full queue 503 (with Retry-After), an internal failure 500 -- there is no default score.
"""

from __future__ import annotations

import functools
import json
import logging
import math
from dataclasses import asdict, dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from personalized_rewardbench import __version__
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.rewards.batcher import MicroBatcher, QueueFull
from personalized_rewardbench.rewards.entries import EntryScore, RewardEntry, parse_posts, prompt_item, score_requests
from personalized_rewardbench.rewards.ranking import ProfileRanker
from personalized_rewardbench.rewards.settings import RewardSettings, describe
from personalized_rewardbench.scoring.base import Scorer

logger = logging.getLogger(__name__)
_FIELDS = {"question", "response", "posts", "profile", "id"}


@dataclass(frozen=True)
class ServerLimits:
    max_items: int = 256  # entries per request
    max_bytes: int = 8 * 1024 * 1024  # request body
    max_queue: int = 256  # requests waiting for the model
    max_wait_ms: float = 10.0  # how long a batch waits for more requests (at most 20 ms)
    micro_batch_tokens: int = 32768  # tokens per scoring call (the scorer splits it into forward batches)
    prefix_cache_tokens: int = 16384  # prompt tokens whose states are kept for later calls (0: none)

    def __post_init__(self) -> None:
        if not 0 <= self.max_wait_ms <= 20:
            raise UserError(f"--max-wait-ms must be between 0 and 20, got {self.max_wait_ms}")
        if self.prefix_cache_tokens < 0:
            raise UserError(f"--prefix-cache-tokens must be 0 (off) or positive, got {self.prefix_cache_tokens}")
        for name in ("max_items", "max_bytes", "max_queue", "micro_batch_tokens"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} must be positive, got {getattr(self, name)}")


class RequestError(Exception):
    """A request the server refuses: HTTP `status` with `message`."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


class RewardService:
    """Parsing, ranking and batching around one scorer (usable without HTTP, e.g. in tests)."""

    def __init__(
        self, scorer: Scorer, settings: RewardSettings, limits: ServerLimits, data_revision: str | None = None
    ):
        self.scorer, self.settings, self.limits = scorer, settings, limits
        self.ranker = ProfileRanker(settings.retriever, settings.cache_dir, data_revision)
        self.tokenizer = getattr(scorer, "tokenizer", None)
        self._prompt_tokens = functools.lru_cache(maxsize=4096)(self._count_prompt)  # a prompt's `cost`, kept
        # a GRPO group's completions often arrive in two consecutive calls: the second reuses the prompt's states
        self.prefix_cache = scorer.keep_prefixes(limits.prefix_cache_tokens) if limits.prefix_cache_tokens else None
        self.batcher: MicroBatcher[RewardEntry, EntryScore] = MicroBatcher(
            lambda requests: score_requests(scorer, requests),
            budget_tokens=limits.micro_batch_tokens,
            max_wait_s=limits.max_wait_ms / 1000,
            max_queue=limits.max_queue,
        )

    def info(self) -> dict[str, Any]:
        retriever = self.ranker.name if self.settings.profile_k > 0 else "none"
        return {
            **describe(self.settings, self.scorer, retriever),
            "limits": asdict(self.limits),
            "prefix_cache": None if self.prefix_cache is None else self.prefix_cache.figures(),
            "version": __version__,
        }

    def parse(self, payload: Any) -> list[RewardEntry]:
        """Entries of a decoded JSON body; raises RequestError (4xx) for anything malformed."""
        items = payload.get("items") if isinstance(payload, dict) else payload
        if not isinstance(items, list):
            raise RequestError(422, "the body must be a JSON list of {question, response, posts|profile} objects")
        if not items:
            raise RequestError(422, "the request holds no items")
        if len(items) > self.limits.max_items:
            raise RequestError(413, f"{len(items)} items in one request; the limit is {self.limits.max_items}")
        k = self.settings.profile_k
        try:
            for n, item in enumerate(items):
                _check_item(n, item)
            ranked_rows = [n for n, item in enumerate(items) if item.get("profile") is not None]
            ranked = self.ranker.top_posts(
                [items[n]["question"] for n in ranked_rows],
                [items[n]["profile"] for n in ranked_rows],
                k,
                [items[n].get("id") for n in ranked_rows],
            )
            posts = {n: p for n, p in zip(ranked_rows, ranked)}
            return [
                RewardEntry(
                    prompt_item(
                        item["question"],
                        posts[n] if n in posts else parse_posts(item.get("posts"), f"items[{n}].posts")[:k],
                        item.get("id"),
                    ),
                    item["response"],
                )
                for n, item in enumerate(items)
            ]
        except UserError as error:
            raise RequestError(422, str(error)) from None

    def cost(self, entries: list[RewardEntry]) -> tuple[int, dict[tuple, int]]:
        """(answer tokens, {prompt: prompt tokens}) of a request: a batch counts each distinct prompt once.

        A text-only estimate (no chat scaffolding); without a tokenizer, 4 characters a token. A prompt's count is
        remembered (an RL group sends its prompt once per completion)."""
        prompts = list({(e.item.question, e.item.posts) for e in entries})
        answers = self._lengths([e.answer for e in entries])
        return sum(answers), {prompt: self._prompt_tokens(*prompt) for prompt in prompts}

    def _lengths(self, texts: list[str]) -> list[int]:
        if self.tokenizer is None:
            return [len(text) // 4 + 1 for text in texts]
        return [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def _count_prompt(self, question: str, posts: tuple) -> int:
        return self._lengths([question + "".join(post.text for post in posts)])[0]


def _check_item(n: int, item: Any) -> None:
    if not isinstance(item, dict):
        raise UserError(f"items[{n}] must be an object with 'question' and 'response'")
    unknown = sorted(set(item) - _FIELDS)
    if unknown:
        raise UserError(f"items[{n}] has unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_FIELDS))}")
    for name in ("question", "response"):
        if not isinstance(item.get(name), str):
            raise UserError(f"items[{n}].{name} must be a string")
    if not item["question"].strip():
        raise UserError(f"items[{n}].question is empty")
    if item.get("posts") is not None and item.get("profile") is not None:
        raise UserError(f"items[{n}] has both 'posts' (ranked) and 'profile' (to rank): send one")
    if item.get("id") is not None and not isinstance(item["id"], str):
        raise UserError(f"items[{n}].id must be a string")


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"request body of {declared} bytes; the limit is {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise RequestError(413, f"request body over the limit of {limit} bytes")
    return bytes(body)


def create_app(service: RewardService) -> FastAPI:
    """The FastAPI app; the scoring worker starts and stops with the app's lifespan."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        service.batcher.start()
        try:
            yield
        finally:
            service.batcher.stop()

    app = FastAPI(title="personalized-rewardbench reward server", version=__version__, lifespan=lifespan)

    @app.get("/health")
    async def health() -> JSONResponse:
        if not service.batcher.alive:
            return _error(503, "the scoring worker is not running")
        return JSONResponse({"status": "ok"})

    @app.get("/info")
    async def info() -> JSONResponse:
        return JSONResponse(service.info())

    @app.post("/score")
    async def score(request: Request) -> JSONResponse:
        try:
            body = await _read_body(request, service.limits.max_bytes)
            try:
                payload = json.loads(body)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise RequestError(400, f"the body is not valid JSON ({error})") from None
            entries = await run_in_threadpool(service.parse, payload)
            cost, shared = await run_in_threadpool(service.cost, entries)
            scores = await service.batcher.submit(entries, cost, shared)
        except RequestError as error:
            return _error(error.status, error.message)
        except QueueFull as error:
            return _error(503, f"the server is busy: {error}; retry later", {"Retry-After": "1"})
        except UserError as error:  # the model cannot score this request (e.g. an answer over the max length)
            return _error(422, str(error))
        except Exception as error:  # noqa: BLE001 - an internal failure is a 500, never a made-up score
            logger.exception("scoring failed")
            return _error(500, f"internal error while scoring: {type(error).__name__}: {error}")
        return JSONResponse(
            {
                "scores": [None if math.isnan(s.score) else s.score for s in scores],  # no rating: null
                "truncated": [s.truncated for s in scores],
                "question_shortened": [s.question_shortened for s in scores],
            }
        )

    return app
