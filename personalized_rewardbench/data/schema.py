"""The one definition of the benchmark's row schema, its subsets, and row validation.

Every other part (release build, loading script, evaluation engine, Space) takes its field names,
types and subset names from here; a test holds the loading script's Features equal to `FEATURES`.

>>> sorted(FEATURES)[:3]
['category', 'chosen', 'id']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import datasets

from personalized_rewardbench.errors import UserError

#: Subset (config) names in upstream order; the position is the subset index used in row ids.
SUBSETS: tuple[str, ...] = (
    "Art_and_Entertainment",
    "Lifestyle_and_Personal_Development",
    "Society_and_Culture",
)

#: Column added to the `default` config so that rows of the combined view stay attributable.
SUBSET_COLUMN = "subset"

#: Fields that are the answer key: they must never reach a model's input.
ANSWER_KEY_FIELDS: tuple[str, ...] = ("narrative", "rubric_aspects")

PROFILE_ITEM = {"id": datasets.Value("string"), "category": datasets.Value("string"), "text": datasets.Value("string")}
RUBRIC_ASPECT = {
    "aspect": datasets.Value("string"),
    "evidence": datasets.Value("string"),
    "reason": datasets.Value("string"),
}

#: The upstream row schema (field order as upstream).
FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "question": datasets.Value("string"),
        "profile": datasets.List(PROFILE_ITEM),
        "rubric_aspects": datasets.List(RUBRIC_ASPECT),
        "narrative": datasets.Value("string"),
        "category": datasets.Value("string"),
        "chosen": datasets.Value("string"),
        "rejected": datasets.Value("string"),
    }
)

#: Schema of the `default` config: the upstream fields plus the subset name.
FEATURES_WITH_SUBSET = datasets.Features({**FEATURES, SUBSET_COLUMN: datasets.Value("string")})

_NON_EMPTY_TEXT = ("id", "question", "chosen", "rejected")


class SchemaError(UserError):
    """A row that does not follow the schema; the message names the source, the row and the field."""


def check_subset(name: str) -> str:
    """Return `name` if it is a known subset, else raise a UserError listing the valid names."""
    if name not in SUBSETS:
        raise UserError(f"unknown subset {name!r}: choose one of {', '.join(SUBSETS)}")
    return name


def _fail(source: str, row_ref: str, field: str, problem: str) -> SchemaError:
    return SchemaError(f"row {row_ref}: field '{field}': {problem}", where=source)


def _check_struct_list(value: Any, keys: Mapping[str, Any], source: str, ref: str, field: str) -> None:
    if not isinstance(value, list):
        raise _fail(source, ref, field, f"expected a list, got {type(value).__name__}")
    for position, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise _fail(source, ref, f"{field}[{position}]", f"expected an object, got {type(item).__name__}")
        for key in keys:
            if key not in item:
                raise _fail(source, ref, f"{field}[{position}].{key}", "missing")
            if not isinstance(item[key], str):
                raise _fail(
                    source, ref, f"{field}[{position}].{key}", f"expected a string, got {type(item[key]).__name__}"
                )


def validate_row(row: Mapping[str, Any], source: str, index: int) -> None:
    """Check one row against the schema; raise SchemaError naming `source`, the row id (or index) and the field."""
    if not isinstance(row, Mapping):
        raise SchemaError(f"{source}: row #{index}: expected an object, got {type(row).__name__}")
    ref = str(row["id"]) if isinstance(row.get("id"), str) and row.get("id") else f"#{index}"
    for field in FEATURES:
        if field not in row or row[field] is None:
            raise _fail(source, ref, field, "missing")
    for field in ("id", "question", "narrative", "category", "chosen", "rejected"):
        if not isinstance(row[field], str):
            raise _fail(source, ref, field, f"expected a string, got {type(row[field]).__name__}")
    for field in _NON_EMPTY_TEXT:
        if not row[field].strip():
            raise _fail(source, ref, field, "is empty")
    if row["chosen"].strip() == row["rejected"].strip():
        raise _fail(source, ref, "rejected", "is identical to 'chosen'")
    _check_struct_list(row["profile"], PROFILE_ITEM, source, ref, "profile")
    _check_struct_list(row["rubric_aspects"], RUBRIC_ASPECT, source, ref, "rubric_aspects")
    if not row["rubric_aspects"]:
        raise _fail(source, ref, "rubric_aspects", "needs at least one aspect")


def validate_rows(rows: Iterable[Mapping[str, Any]], source: str) -> list[dict[str, Any]]:
    """Validate every row and the uniqueness of ids; return the rows restricted to the schema's fields."""
    seen: dict[str, int] = {}
    clean: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        validate_row(row, source, index)
        if row["id"] in seen:
            raise _fail(source, row["id"], "id", f"duplicate of row #{seen[row['id']]}")
        seen[row["id"]] = index
        clean.append({field: row[field] for field in FEATURES})
    return clean
