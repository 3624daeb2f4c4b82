"""The shapes of a run folder's files, checked whenever the tool reads them back.

A run folder holds `run.json` (the run identity), `scores.jsonl` (one record per pair) and
`results.json` (figures); while it runs, `scores.partial/rank-<r>.jsonl`. Anything read back may have
been edited, truncated or copied from elsewhere (a results repo on the Hub), so every reader checks
the shape here first and answers with one line naming the file (and line):

- outputs (`run.json`, `results.json`, `scores.jsonl`) are refused: `RunFileError`;
- leaderboards skip a bad `results.json` with a notice and show the rest;
- `admit_runs` moves only whole, valid run folders from a download into a results store.

>>> results_problem({"benchmark": "personalized-rewardbench", "model": "m", "dataset": "sample"})
"field 'accuracy': missing"
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

from personalized_rewardbench.errors import UserError

BENCHMARK = "personalized-rewardbench"
RESULTS_FILE = "results.json"
SCORES_FILE = "scores.jsonl"
RUN_FILE = "run.json"


class RunFileError(UserError):
    """A file of a run folder that is not what the tool wrote; the message names the file (and line)."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_fraction(value: Any) -> bool:
    return _is_number(value) and 0 <= value <= 1


def _interval(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(_is_fraction(v) for v in value)


def _figures_problem(figures: Any, where: str, judge: bool) -> str | None:
    """The problem with one block of figures (overall or one subset), or None."""
    if not isinstance(figures, dict):
        return f"{where}: expected an object, got {type(figures).__name__}"
    checks = {"accuracy": _is_fraction, "ci95": _interval, "num_pairs": _is_count, "ties": _is_count}
    if judge:
        checks["num_verdicts"] = _is_count
    for key, check in checks.items():
        if key not in figures:
            return f"{where}'{key}': missing"
        if not check(figures[key]):
            return f"{where}'{key}': not a valid value ({json.dumps(figures[key])[:40]})"
    return None


def results_problem(payload: Any) -> str | None:
    """Why `payload` is not a results.json this package wrote (one phrase), or None when it is."""
    if not isinstance(payload, dict):
        return f"expected a JSON object, got {type(payload).__name__}"
    if payload.get("benchmark") != BENCHMARK:
        return f"not a {BENCHMARK} results file (its 'benchmark' is {json.dumps(payload.get('benchmark'))[:40]})"
    for key in ("model", "dataset"):
        if not isinstance(payload.get(key), str) or not payload.get(key):
            return f"field '{key}': " + ("missing" if key not in payload else "expected a non-empty string")
    for key, kind in (("model_type", str), ("created_at", str), ("demo_sample", bool), ("protocol", dict)):
        if key in payload and not isinstance(payload[key], kind):
            return f"field '{key}': expected {kind.__name__}, got {type(payload[key]).__name__}"
    judge = "num_verdicts" in payload
    problem = _figures_problem(payload, "field ", judge)
    if problem:
        return problem
    if payload.get("macro_accuracy") is not None and not _is_fraction(payload["macro_accuracy"]):
        return "field 'macro_accuracy': not a valid value"
    per_subset = payload.get("per_subset")
    if not isinstance(per_subset, dict):
        return "field 'per_subset': " + ("missing" if per_subset is None else "expected an object")
    for name, figures in per_subset.items():
        problem = _figures_problem(figures, f"field 'per_subset.{name}.", judge)
        if problem:
            return problem.replace(".'", ".")
    protocol = payload.get("protocol", {})
    if not _is_count(protocol.get("profile_k", 0)):
        return "field 'protocol.profile_k': expected a count"
    if protocol.get("limit") is not None and not _is_count(protocol["limit"]):
        return "field 'protocol.limit': expected a count or null"
    subsets = protocol.get("subsets", [])
    if not isinstance(subsets, list) or not all(isinstance(s, str) for s in subsets):
        return "field 'protocol.subsets': expected a list of names"
    return None


def record_problem(record: Any) -> str | None:
    """Why `record` is not a score record (one line of scores.jsonl or of a partial log), or None."""
    if not isinstance(record, dict):
        return f"expected a JSON object, got {type(record).__name__}"
    for key in ("id", "subset"):
        if not isinstance(record.get(key), str) or not record[key]:
            return f"field '{key}': " + ("missing" if key not in record else "expected a non-empty string")
    for key in ("chosen_score", "rejected_score"):
        if key not in record:
            return f"field '{key}': missing"
        if not _is_number(record[key]):
            return f"field '{key}': expected a finite number, got {json.dumps(record[key])[:40]}"
    return None


def read_json(path: Path) -> Any:
    """The JSON value in `path`; RunFileError naming the file when it cannot be read or parsed."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise RunFileError(f"{path}: not UTF-8 text (byte {error.start + 1})") from None
    except json.JSONDecodeError as error:
        raise RunFileError(f"{path}: not valid JSON ({error.msg} at line {error.lineno})") from None
    except OSError as error:
        raise RunFileError(f"{path}: cannot read ({error.strerror or type(error).__name__})") from None


def read_results(path: Path) -> dict[str, Any]:
    """A checked results.json."""
    payload = read_json(path)
    problem = results_problem(payload)
    if problem:
        raise RunFileError(f"{path}: {problem}")
    return payload


def read_run_identity(path: Path) -> dict[str, Any]:
    """A checked run.json (an object whose identity keys the engine compares)."""
    payload = read_json(path)
    if not isinstance(payload, dict):
        raise RunFileError(f"{path}: expected a JSON object (the run identity), got {type(payload).__name__}")
    return payload


def read_scores(path: Path) -> list[dict[str, Any]]:
    """The records of a scores.jsonl, each checked; RunFileError naming the file and line."""
    records = []
    try:
        raw_lines = path.read_bytes().split(b"\n")
    except OSError as error:
        raise RunFileError(f"{path}: cannot read ({error.strerror or type(error).__name__})") from None
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    for number, raw in enumerate(raw_lines, start=1):
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise RunFileError(f"{path}: line {number}: not UTF-8 text") from None
        except json.JSONDecodeError as error:
            raise RunFileError(f"{path}: line {number}: not valid JSON ({error.msg})") from None
        problem = record_problem(record)
        if problem:
            raise RunFileError(f"{path}: line {number}: {problem}")
        records.append(record)
    ids = [record["id"] for record in records]
    if len(set(ids)) != len(ids):
        duplicate = next(i for i in ids if ids.count(i) > 1)
        raise RunFileError(f"{path}: item {duplicate} appears twice")
    return records


def run_folder_problem(run_dir: Path) -> str | None:
    """Why `run_dir` is not a whole, valid finished run (one line naming the file), or None."""
    try:
        results = read_results(run_dir / RESULTS_FILE)
        records = read_scores(run_dir / SCORES_FILE)
        if (run_dir / RUN_FILE).exists():
            identity = read_run_identity(run_dir / RUN_FILE)
            changed = sorted(key for key in identity if results.get(key) != identity[key])
            if changed:
                return f"{run_dir / RUN_FILE}: differs from results.json in {', '.join(changed)}"
    except RunFileError as error:
        return str(error)
    if len(records) != results["num_pairs"]:
        return f"{run_dir / SCORES_FILE}: holds {len(records)} records, results.json counts {results['num_pairs']}"
    return None


def admit_runs(incoming: Path, store: Path) -> list[str]:
    """Copy every valid finished run found under `incoming` (e.g. a Hub download) to the same place under
    `store`; returns one notice per run folder left out (named relative to `incoming`).

    A run the store already holds in a valid state is kept. Files are copied one by one through a temp
    file and a rename, results.json last, so a reader never sees results without their scores."""
    notices = []
    for results_path in sorted(incoming.rglob(RESULTS_FILE)):
        run_dir = results_path.parent
        relative = run_dir.relative_to(incoming)
        problem = run_folder_problem(run_dir)
        if problem:
            notices.append(f"skipped run {relative.as_posix()}: {problem.replace(str(incoming) + '/', '')}")
            continue
        target = store / relative
        if target.is_dir() and run_folder_problem(target) is None:
            continue
        target.mkdir(parents=True, exist_ok=True)
        for name in (RUN_FILE, SCORES_FILE, RESULTS_FILE):
            if (run_dir / name).is_file():
                temporary = target / f".{name}.tmp-{os.getpid()}"
                shutil.copyfile(run_dir / name, temporary)
                os.replace(temporary, target / name)
    return notices
