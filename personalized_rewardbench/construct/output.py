"""What a construction folder holds when it is finished, all written atomically by rank 0.

::

    run.json                                   the identity (source, generator, judge, prompts, seeds, rules)
    generations.jsonl / judgments.jsonl        every step's records (the resumable steps' outputs)
    verdicts.jsonl                             per item: kept, or the reasons it was dropped, with measurements
    <Config>/<split>-00000-of-00001.parquet    the kept pairs in the release schema (chosen, rejected added)
    construct.json                             identity + counts kept / dropped by reason + cost report

The Parquet layout is the upstream one, so the folder is a source for `prbench release build`
(a `train` split becomes a release marked as training data) and for `prbench evaluate` (test split).
A subset whose every item was dropped gets no file (a source refuses empty files).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from personalized_rewardbench import __version__
from personalized_rewardbench.construct.verify import REASONS
from personalized_rewardbench.data.schema import FEATURES, SUBSETS
from personalized_rewardbench.data.sources import CONSTRUCT_MANIFEST
from personalized_rewardbench.runs.score_log import write_json_atomic, write_jsonl_atomic

VERDICTS = "verdicts"


def pair_file(out: Path, subset: str, split: str) -> Path:
    return out / subset / f"{split}-00000-of-00001.parquet"


def _write_parquet_atomic(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    pq.write_table(pa.Table.from_pylist(rows, schema=FEATURES.arrow_schema), temporary, compression="zstd")
    os.replace(temporary, path)


def counts(verdicts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Items, kept, dropped by primary (first) reason — these sum to the dropped count — and by any reason."""
    dropped = [verdict for verdict in verdicts if not verdict["kept"]]
    primary = Counter(verdict["reasons"][0] for verdict in dropped)
    anywhere = Counter(reason for verdict in dropped for reason in verdict["reasons"])
    per_subset: dict[str, dict[str, int]] = {}
    for verdict in verdicts:
        entry = per_subset.setdefault(verdict["subset"], {"items": 0, "kept": 0})
        entry["items"] += 1
        entry["kept"] += int(verdict["kept"])
    return {
        "items": len(verdicts),
        "kept": len(verdicts) - len(dropped),
        "dropped": len(dropped),
        "dropped_by_reason": {reason: primary[reason] for reason in REASONS if primary[reason]},
        "failed_by_rule": {reason: anywhere[reason] for reason in REASONS if anywhere[reason]},
        "per_subset": per_subset,
    }


def cost_report(
    generated: Sequence[Mapping[str, Any]], judged: Sequence[Mapping[str, Any]], kept: int, units: Mapping[str, str]
) -> dict[str, Any]:
    """Tokens generated (both answers of every item) and judged (prompt + output), in total and per kept pair."""
    generated_tokens = sum(sum(record["tokens"]) for record in generated)
    judge_prompt = sum(record["tokens"][0] for record in judged)
    judge_output = sum(record["tokens"][1] for record in judged)

    def per_pair(total: int) -> float | None:
        return round(total / kept, 1) if kept else None

    return {
        "unit": dict(units),
        "generated": generated_tokens,
        "judge_prompt": judge_prompt,
        "judge_output": judge_output,
        "judged": judge_prompt + judge_output,
        "generation_calls": 2 * len(generated),
        "judge_calls": len(judged),
        "per_kept_pair": {"generated": per_pair(generated_tokens), "judged": per_pair(judge_prompt + judge_output)},
    }


def write_outputs(
    out: Path,
    identity: Mapping[str, Any],
    items: Sequence[Any],
    generated: Sequence[Mapping[str, Any]],
    verdicts: Sequence[Mapping[str, Any]],
    judged: Sequence[Mapping[str, Any]],
    units: Mapping[str, str],
) -> dict[str, Any]:
    """Write verdicts, the kept pairs per subset and construct.json; return construct.json's content."""
    split = identity["split"]
    kept: dict[str, list[dict[str, Any]]] = {}
    for item, record, verdict in zip(items, generated, verdicts):
        if verdict["kept"]:
            kept.setdefault(item.subset, []).append(
                {**item.row, "chosen": record["chosen"], "rejected": record["rejected"]}
            )
    write_jsonl_atomic(out / f"{VERDICTS}.jsonl", verdicts)
    files = {}
    for subset in SUBSETS:
        path = pair_file(out, subset, split)
        if kept.get(subset):
            _write_parquet_atomic(path, [{field: row[field] for field in FEATURES} for row in kept[subset]])
            files[subset] = str(path.relative_to(out))
        elif path.exists():
            path.unlink()  # left from an earlier run of this folder: it must not be read as this run's pairs
    summary_counts = counts(verdicts)
    summary = {
        **identity,
        "seeds": {
            "run": identity["seed"],
            "chosen": "sample_seed(seed, item id, 0)",
            "rejected": "sample_seed(seed, item id, 1)",
        },
        "counts": summary_counts,
        "cost": cost_report(generated, judged, summary_counts["kept"], units),
        "files": files,
        "package_version": __version__,
    }
    write_json_atomic(out / CONSTRUCT_MANIFEST, summary)
    return summary
