"""A stand-in for the ZeroGPU device API on 127.0.0.1, for the zero-mode smoke test of the Space.

It answers the four calls the `spaces` package makes (`/startup-report` at launch, then `/schedule`,
`/allow` and `/release` around each GPU call) the way the real API does in the simple case: a GPU is
always free (a plain JSON answer, no queue), and it records every call so a test can check the order.
"""

from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

FAKE_GPU_UUID = "GPU-00000000-fake-zero-gpu"


class FakeZeroApi:
    """Serve the device API in a thread; `calls` lists {"path", "params"} in arrival order."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self._lock = threading.Lock()
        self._tokens = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeZeroApi:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def paths(self) -> list[str]:
        with self._lock:
            return [call["path"] for call in self.calls]

    def _record(self, path: str, params: dict[str, str]) -> dict:
        with self._lock:
            self.calls.append({"path": path, "params": params})
            if path != "/schedule":
                return {}
            # the same (only) GPU every time; `idle` lets the Space reuse its forked worker
            return {
                "idle": True,
                "nvidiaIndex": 0,
                "nvidiaUUID": FAKE_GPU_UUID,
                "allowToken": f"token-{next(self._tokens)}",
            }

    def _handler(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                url = urlsplit(self.path)
                params = {key: values[-1] for key, values in parse_qs(url.query).items()}
                if url.path not in ("/startup-report", "/schedule", "/allow", "/release"):
                    self.send_error(404)
                    return
                body = json.dumps(api._record(url.path, params)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args):  # keep pytest's output clean
                pass

        return Handler
