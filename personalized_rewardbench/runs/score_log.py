"""Append-only score logs that survive crashes (even kill -9) and never hold duplicate items.

Records are appended one JSON line each and flushed + fsynced per batch. On load, a torn last line
(the process died mid-write) is cut off, so the file again holds only whole records.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any


class ScoreLog:
    def __init__(self, path: Path):
        self.path = path

    def load(self) -> dict[str, dict[str, Any]]:
        """Records by item id; repairs a torn tail in place."""
        if not self.path.is_file():
            return {}
        records: dict[str, dict[str, Any]] = {}
        good_bytes = 0
        with self.path.open("rb") as handle:
            for line in handle:
                if not line.endswith(b"\n"):
                    break
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    break
                records[record["id"]] = record
                good_bytes += len(line)
        if good_bytes != self.path.stat().st_size:
            with self.path.open("r+b") as handle:
                handle.truncate(good_bytes)
        return records

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())


def write_json_atomic(path: Path, payload: Any) -> None:
    """Write JSON to a temp file beside `path`, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temporary.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def write_jsonl_atomic(path: Path, records: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with temporary.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(temporary, path)
