"""A real OpenAI-compatible chat-completions server on 127.0.0.1 (FastAPI + uvicorn in a thread) for tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request

Respond = Callable[[list[dict[str, str]], dict[str, Any]], str]


def make_app(respond: Respond, requests: list[dict[str, Any]]) -> FastAPI:
    """`POST /v1/chat/completions`: the reply is `respond(messages, body)`; every body is kept in `requests`."""
    app = FastAPI()
    lock = threading.Lock()

    @app.post("/v1/chat/completions")
    def chat(body: dict[str, Any]) -> dict[str, Any]:
        with lock:  # one generation at a time, like a single-GPU server
            requests.append(body)
            text = respond(body["messages"], body)
        return {
            "id": f"chatcmpl-{len(requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "system_fingerprint": "test",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    @app.get("/health")
    def health(request: Request) -> dict[str, str]:
        return {"status": "ok"}

    return app


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """Run `app` on a free port of 127.0.0.1; yield its base URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
