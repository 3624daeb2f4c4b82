"""The one definition of the benchmark's row schema, its subsets, and row validation.

Every other part (release build, loading script, evaluation engine, Space) takes its field names,
types and subset names from here; a test holds the loading script's Features equal to `FEATURES`.
`FEATURES` and `FEATURES_WITH_SUBSET` (`datasets.Features`) are built on first use, so that scoring
alone (a reward server, a TRL reward function) does not import `datasets`.

>>> sorted(features())[:3]
['category', 'chosen', 'id']
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from personalized_rewardbench.errors import UserError

if TYPE_CHECKING:
    import datasets

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

#: The upstream row fields, in upstream order; every value is a string, but `profile` and `rubric_aspects`
#: are lists of objects with these (string) keys.
FIELDS: tuple[str, ...] = ("id", "question", "profile", "rubric_aspects", "narrative", "category", "chosen", "rejected")
PROFILE_KEYS: tuple[str, ...] = ("id", "category", "text")
RUBRIC_ASPECT_KEYS: tuple[str, ...] = ("aspect", "evidence", "reason")
_LISTS = {"profile": PROFILE_KEYS, "rubric_aspects": RUBRIC_ASPECT_KEYS}

#: The answer fields; an *unpaired* row (LaMP-QA layout, input of `prbench construct`) has every other field.
ANSWER_FIELDS: tuple[str, ...] = ("chosen", "rejected")
UNPAIRED_FIELDS: tuple[str, ...] = tuple(field for field in FIELDS if field not in ANSWER_FIELDS)

#: Splits a folder may hold (`<Config>/<split>-*.parquet`); the benchmark is `test`, `train` is training data.
SPLITS: tuple[str, ...] = ("test", "train", "validation")


@functools.cache
def features(with_subset: bool = False) -> datasets.Features:
    """The upstream row schema (`FEATURES`), or with the subset name added (`FEATURES_WITH_SUBSET`: the
    `default` config's schema)."""
    import datasets

    def struct(keys: tuple[str, ...]) -> dict[str, datasets.Value]:
        return {key: datasets.Value("string") for key in keys}

    columns = {
        field: datasets.List(struct(_LISTS[field])) if field in _LISTS else datasets.Value("string") for field in FIELDS
    }
    if with_subset:
        columns[SUBSET_COLUMN] = datasets.Value("string")
    return datasets.Features(columns)


def __getattr__(name: str) -> Any:
    """`FEATURES` and `FEATURES_WITH_SUBSET`, built (and `datasets` imported) when first asked for."""
    if name in ("FEATURES", "FEATURES_WITH_SUBSET"):
        return features(with_subset=name == "FEATURES_WITH_SUBSET")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def _check_struct_list(value: Any, keys: Iterable[str], source: str, ref: str, field: str) -> None:
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


def row_problem(row: Mapping[str, Any], source: str, index: int, paired: bool = True) -> SchemaError | None:
    """The first schema problem of one row (naming `source`, the row id or index, and the field), or None.

    `paired=False` checks an unpaired row: `chosen` and `rejected` are neither required nor read."""
    if not isinstance(row, Mapping):
        return SchemaError(f"row #{index}: expected an object, got {type(row).__name__}", where=source)
    ref = str(row["id"]) if isinstance(row.get("id"), str) and row.get("id") else f"#{index}"
    fields = FIELDS if paired else UNPAIRED_FIELDS
    for field in fields:
        if field not in row or row[field] is None:
            return _fail(source, ref, field, "missing")
    for field in ("id", "question", "narrative", "category", "chosen", "rejected"):
        if field in fields and not isinstance(row[field], str):
            return _fail(source, ref, field, f"expected a string, got {type(row[field]).__name__}")
    for field in _NON_EMPTY_TEXT:
        if field in fields and not row[field].strip():
            return _fail(source, ref, field, "is empty")
    if paired and row["chosen"].strip() == row["rejected"].strip():
        return _fail(source, ref, "rejected", "is identical to 'chosen'")
    try:
        _check_struct_list(row["profile"], PROFILE_KEYS, source, ref, "profile")
        _check_struct_list(row["rubric_aspects"], RUBRIC_ASPECT_KEYS, source, ref, "rubric_aspects")
    except SchemaError as error:
        return error
    if not row["rubric_aspects"]:
        return _fail(source, ref, "rubric_aspects", "needs at least one aspect")
    return None


def validate_row(row: Mapping[str, Any], source: str, index: int) -> None:
    """Check one row against the schema; raise SchemaError naming `source`, the row id (or index) and the field."""
    if (problem := row_problem(row, source, index)) is not None:
        raise problem


#: How many bad rows an unpaired source lists before it says how many more there are.
MAX_LISTED_PROBLEMS = 20


def validate_rows(rows: Iterable[Mapping[str, Any]], source: str, paired: bool = True) -> list[dict[str, Any]]:
    """Validate every row and the uniqueness of ids; return the rows restricted to the schema's fields.

    Paired rows (the benchmark) stop at the first bad row. Unpaired rows (construction input, often
    thousands) are all checked and the error lists one line per bad row."""
    fields = FIELDS if paired else UNPAIRED_FIELDS
    seen: dict[str, int] = {}
    clean: list[dict[str, Any]] = []
    problems: list[str] = []
    for index, row in enumerate(rows):
        problem = row_problem(row, source, index, paired)
        if problem is None and row["id"] in seen:
            problem = _fail(source, row["id"], "id", f"duplicate of row #{seen[row['id']]}")
        if problem is not None:
            if paired:
                raise problem
            problems.append(str(problem))
            continue
        seen[row["id"]] = index
        clean.append({field: row[field] for field in fields})
    if problems:
        listed = problems[:MAX_LISTED_PROBLEMS]
        if len(problems) > len(listed):
            listed.append(f"... and {len(problems) - len(listed)} more bad rows")
        raise SchemaError(f"{len(problems)} bad rows; fix or remove them:\n" + "\n".join(listed))
    return clean
