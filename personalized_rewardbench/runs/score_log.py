"""Append-only score logs that survive crashes (even kill -9) and never hold duplicate items.

Records are appended one JSON line each and flushed + fsynced per batch. On load, a torn last line
(the process died mid-write) is cut off, so the file again holds only whole records.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.run_files import record_problem


class ScoreLog:
    def __init__(self, path: Path):
        self.path = path
        self.notices: list[str] = []  # what `load` repaired, one line each

    def load(self) -> dict[str, dict[str, Any]]:
        """Records by item id; cuts the file back to its last whole, valid record in place.

        A torn tail (kill -9 mid-write) is cut silently. A complete line that is not a score record
        (edited, or damaged on disk) is cut with everything after it, with a notice: those items are
        scored again, which gives the same scores (the batch plan is deterministic)."""
        if not self.path.is_file():
            return {}
        records: dict[str, dict[str, Any]] = {}
        good_bytes = 0
        with self.path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.endswith(b"\n"):
                    break
                try:
                    record = json.loads(line)
                    problem = record_problem(record)
                except ValueError:  # invalid JSON or not UTF-8
                    problem = "not valid JSON"
                if problem:
                    self.notices.append(
                        f"{self.path}: line {number}: {problem}; dropped it and the lines after it (scored again)"
                    )
                    break
                records[record["id"]] = record
                good_bytes += len(line)
        if good_bytes != self.path.stat().st_size:
            with self.path.open("r+b") as handle:
                handle.truncate(good_bytes)
        return records

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Append whole lines, flushed and fsynced; a failed write (disk full) names the file. A line
        torn by that failure is cut by the next `load`."""
        payload = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(payload)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as error:
            raise write_error(self.path, error) from None


def write_error(path: Path, error: OSError) -> UserError:
    """The one-line error of a write that failed (a full disk, no permission), naming the file."""
    return UserError(f"{path}: cannot write ({error.strerror or type(error).__name__})")


def stale_temp_files(folder: Path) -> list[Path]:
    """Temp files `.NAME.tmp-PID` that an interrupted atomic write left in `folder`."""
    return sorted(folder.glob(".*.tmp-*"))


def _replace_atomic(path: Path, write: Callable[[TextIO], None]) -> None:
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with temporary.open("w", encoding="utf-8") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise write_error(path, error) from None


def write_json_atomic(path: Path, payload: Any) -> None:
    """Write JSON to a temp file beside `path`, then rename: readers never see half a file."""
    text = json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
    _replace_atomic(path, lambda handle: handle.write(text))


def write_jsonl_atomic(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """One JSON line per record, written like `write_json_atomic`."""
    _replace_atomic(path, lambda handle: handle.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
