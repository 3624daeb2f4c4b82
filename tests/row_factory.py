"""Schema-valid rows made up by the tests, and folders in the upstream layout built from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from personalized_rewardbench.data.schema import FEATURES, SUBSETS


def make_row(subset_index: int, n: int, profile_size: int = 3) -> dict[str, Any]:
    row_id = f"{subset_index}_0_{n}"
    return {
        "id": row_id,
        "question": f"Question {n} of subset {subset_index}: which option suits me?",
        "profile": [
            {"id": f"{row_id}_{k}", "category": "cooking", "text": f"Earlier post {k} by user {n}: I like topic {k}."}
            for k in range(profile_size)
        ],
        "rubric_aspects": [{"aspect": "fit the user", "evidence": "post 0", "reason": "stated preference"}],
        "narrative": f"NARRATIVE-SECRET-{row_id}",
        "category": "cooking",
        "chosen": f"A fitting answer for item {n}.",
        "rejected": f"An unfitting answer for item {n}, longer.",
    }


def write_upstream_folder(folder: Path, per_subset: int = 3, fmt: str = "parquet") -> dict[str, list[dict[str, Any]]]:
    """Write `<Config>/test-00000-of-00001.<fmt>` for every subset; return the rows written."""
    written = {}
    for index, subset in enumerate(SUBSETS):
        rows = [make_row(index, n) for n in range(per_subset)]
        path = folder / subset / f"test-00000-of-00001.{fmt}"
        path.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "parquet":
            pq.write_table(pa.Table.from_pylist(rows, schema=FEATURES.arrow_schema), path)
        else:
            path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        written[subset] = rows
    return written
