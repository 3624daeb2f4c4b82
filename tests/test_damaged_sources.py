"""Issue 11, classes 1 and 6: damaged source rows, paths and versions end in one line naming the file, exit 2.

Every damaged shape is tried through `release build --source` and `evaluate --data`; neither may leave
a release folder, a staging folder or a run folder behind.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from error_lines import one_error
from row_factory import make_row, write_upstream_folder

from personalized_rewardbench.cli import main
from personalized_rewardbench.data.schema import FEATURES, SUBSETS

TARGET = SUBSETS[1]
GOOD = json.dumps(make_row(1, 0)) + "\n"

# (name, bytes of the damaged JSONL file, what the error must say besides the file name)
JSONL_SHAPES = [
    ("null", GOOD + "null\n", "line 2: expected a JSON object (one row), got null"),
    ("array", GOOD + "[1, 2, 3]\n", "line 2: expected a JSON object (one row), got an array"),
    ("number", "42\n" + GOOD, "line 1: expected a JSON object (one row), got a number"),
    ("float", GOOD + "3.5\n", "line 2: expected a JSON object (one row), got a number"),
    ("string", GOOD + '"a row"\n', "line 2: expected a JSON object (one row), got a string"),
    ("boolean", GOOD + "true\n", "line 2: expected a JSON object (one row), got a boolean"),
    ("empty object", GOOD + "{}\n", "row #1: field 'id': missing"),
    ("id only", GOOD + '{"id": "1_0_9"}\n', "row 1_0_9: field 'question': missing"),
    ("id a number", json.dumps({**make_row(1, 1), "id": 5}) + "\n", "row #0: field 'id': expected a string"),
    ("profile a string", json.dumps({**make_row(1, 1), "profile": "p"}) + "\n", "field 'profile': expected a list"),
    (
        "profile item a list",
        json.dumps({**make_row(1, 1), "profile": [["x"]]}) + "\n",
        "field 'profile[0]': expected an object",
    ),
    (
        "post text a number",
        json.dumps({**make_row(1, 1), "profile": [{"id": "a", "category": "c", "text": 3}]}) + "\n",
        "field 'profile[0].text': expected a string",
    ),
    ("rubric null", json.dumps({**make_row(1, 1), "rubric_aspects": None}) + "\n", "field 'rubric_aspects': missing"),
    (
        "aspect without evidence",
        json.dumps({**make_row(1, 1), "rubric_aspects": [{"aspect": "a", "reason": "r"}]}) + "\n",
        "field 'rubric_aspects[0].evidence': missing",
    ),
    ("chosen a list", json.dumps({**make_row(1, 1), "chosen": ["a"]}) + "\n", "field 'chosen': expected a string"),
    ("truncated line", GOOD + GOOD[: len(GOOD) // 2] + "\n", "line 2: not valid JSON"),
    ("truncated last line", GOOD + GOOD[:40], "line 2: not valid JSON"),
    ("byte order mark", "\ufeff" + GOOD, "line 1: not valid JSON"),
    ("empty file", "", "holds no rows"),
    ("blank lines only", "\n  \n\n", "holds no rows"),
]
BINARY_SHAPES = [
    ("invalid UTF-8", GOOD.encode() + b'{"id": "\xff\xfe"}\n', "line 2: not UTF-8 text"),
    (
        "latin-1 text",
        GOOD.encode() + json.dumps(make_row(1, 1)).replace("which", "caf\xe9").encode("latin-1"),
        "line 2",
    ),
    ("NUL bytes", b"\x00" * 64, "line 1: not valid JSON"),
]


def _parquet_bytes(rows: list, schema: pa.Schema | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), sink)
    return sink.getvalue().to_pybytes()


_GOOD_PARQUET = _parquet_bytes([make_row(1, n) for n in range(3)], FEATURES.arrow_schema)
PARQUET_SHAPES = [
    ("truncated parquet", _GOOD_PARQUET[: len(_GOOD_PARQUET) // 2], "cannot read"),
    ("parquet footer cut", _GOOD_PARQUET[:-3], "cannot read"),
    ("empty parquet file", b"", "cannot read"),
    ("text as parquet", GOOD.encode(), "cannot read"),
    ("parquet of no rows", _parquet_bytes([], FEATURES.arrow_schema), "holds no rows"),
    ("parquet missing a column", _parquet_bytes([{"id": "1_0_0", "question": "q"}]), "field 'profile': missing"),
    (
        "parquet with a number id",
        _parquet_bytes([{**make_row(1, 0), "id": 7}]),
        "row #0: field 'id': expected a string",
    ),
    (
        "parquet with text profile",
        _parquet_bytes([{**make_row(1, 0), "profile": "posts"}]),
        "field 'profile': expected a list",
    ),
]


def _damaged_folder(tmp_path: Path, payload: bytes, fmt: str) -> Path:
    write_upstream_folder(tmp_path / "up", per_subset=2, fmt=fmt)
    path = tmp_path / "up" / TARGET / f"test-00000-of-00001.{fmt}"
    path.write_bytes(payload)
    return path


def _run(tmp_path: Path, command: str, source: str, capsys) -> str:
    if command == "release":
        args = ["release", "build", "--source", source, "--version", "0.1.0", "--out", str(tmp_path / "rel")]
    else:
        args = ["evaluate", "--model", "baseline:length", "--data", source, "--output", str(tmp_path / "runs")]
    code = main([*args, "--no-progress"] if command == "evaluate" else args)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert one_error(err) and "Traceback" not in err and err.startswith("prbench: error: ")
    assert not (tmp_path / "rel").exists() and not (tmp_path / "runs").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".rel")]
    return err


ALL_SHAPES = (
    [(name, text.encode(), "jsonl", expected) for name, text, expected in JSONL_SHAPES]
    + [(name, payload, "jsonl", expected) for name, payload, expected in BINARY_SHAPES]
    + [(name, payload, "parquet", expected) for name, payload, expected in PARQUET_SHAPES]
)


@pytest.mark.parametrize("command", ["release", "evaluate"])
@pytest.mark.parametrize(("name", "payload", "fmt", "expected"), ALL_SHAPES, ids=[s[0] for s in ALL_SHAPES])
def test_a_damaged_subset_file_is_one_line_naming_file_and_line(
    tmp_path, capsys, command, name, payload, fmt, expected
):
    path = _damaged_folder(tmp_path, payload, fmt)
    err = _run(tmp_path, command, str(tmp_path / "up"), capsys)
    assert str(path) in err and expected in err


@pytest.mark.parametrize("command", ["release", "evaluate"])
def test_a_symlink_loop_as_the_source_is_one_line(tmp_path, capsys, command):
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    err = _run(tmp_path, command, str(tmp_path / "a"), capsys)
    assert str(tmp_path / "a") in err


@pytest.mark.parametrize("command", ["release", "evaluate"])
def test_a_symlink_loop_as_a_subset_file_is_one_line(tmp_path, capsys, command):
    write_upstream_folder(tmp_path / "up", per_subset=2, fmt="jsonl")
    path = tmp_path / "up" / TARGET / "test-00000-of-00001.jsonl"
    path.unlink()
    os.symlink(path, path)
    err = _run(tmp_path, command, str(tmp_path / "up"), capsys)
    assert str(path) in err


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [("[1, 2]", "not a release manifest"), ('{"version": 1}', "not a release manifest"), ("\xff", "not valid JSON")],
)
def test_a_damaged_release_manifest_is_one_line(tmp_path, capsys, manifest, expected):
    write_upstream_folder(tmp_path / "up", per_subset=2, fmt="jsonl")
    (tmp_path / "up" / "release.json").write_bytes(manifest.encode("latin-1"))
    err = _run(tmp_path, "evaluate", str(tmp_path / "up"), capsys)
    assert str(tmp_path / "up" / "release.json") in err and expected in err


@pytest.mark.parametrize(
    ("content", "expected"),
    [(b"# Changelog\n\n## v0.0.1 \xe9t\xe9\n", "not UTF-8 text"), (None, "no such file")],
    ids=["latin-1 changelog", "changelog is a folder"],
)
def test_a_bad_changelog_is_one_line(tmp_path, capsys, content, expected):
    changelog = tmp_path / "CHANGELOG.md"
    if content is None:
        changelog.mkdir()
    else:
        changelog.write_bytes(content)
    args = ["release", "build", "--version", "0.2.0", "--out", str(tmp_path / "rel"), "--changelog", str(changelog)]
    code = main(args)
    err = capsys.readouterr().err.strip()
    assert code == 2 and one_error(err) and str(changelog) in err and expected in err
    assert not (tmp_path / "rel").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".rel")]


BAD_VERSIONS = [
    "1.0.0\n",
    "\n1.0.0",
    " 1.0.0",
    "1.0.0 ",
    "1.0.0\t",
    "1.0",
    "1.0.0.0",
    "v1.0.0.0",
    "01.0.0",
    "1.00.0",
    "1.0.0-rc1",
    "1.0.0+build",
    "vv1.0.0",
    "V1.0.0",
    "",
    "v",
    "one",
    "1.0.0\x00",
    "\u0661.0.0",  # an Arabic-Indic digit one: `\d` matches it, semantic versions do not
    "１.0.0",
    "1.-1.0",
]


@pytest.mark.parametrize("version", BAD_VERSIONS, ids=[repr(v) for v in BAD_VERSIONS])
def test_versions_are_matched_in_full(tmp_path, capsys, version):
    code = main(["release", "build", "--version", version, "--out", str(tmp_path / "rel")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and one_error(err) and "semantic versioning" in err and repr(version) in err
    assert not (tmp_path / "rel").exists()


@pytest.mark.parametrize("tag", ["v0.1.0\n", "v0.1.0 ", "v٠.1.0", "0.1.0"])
def test_push_tags_are_matched_in_full(tmp_path, capsys, tag):
    folder = tmp_path / "rel"
    folder.mkdir()
    (folder / "release.json").write_text('{"version": "0.1.0", "repo_id": "me/prb"}')
    code = main(["release", "push", "--dir", str(folder), "--repo", "me/prb", "--tag", tag, "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and one_error(err) and ("--tag v0.1.0" in err or "semantic versioning" in err)
