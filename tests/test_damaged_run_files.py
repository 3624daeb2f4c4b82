"""Issue 11, classes 2 and 4: files the tool reads back, damaged in many shapes.

Outputs (`run.json`, `results.json`, `scores.jsonl`) are refused with one line naming the file and
left as they are; derived files (partial score logs, the ranking cache) are rebuilt with a notice and
the run's scores equal a clean run's; leaderboards skip a damaged results.json with a notice naming
it and show the rest; runs pulled from a results repo reach the store only when whole and valid.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from error_lines import one_error

from personalized_rewardbench.cli import main
from personalized_rewardbench.data.ranking_cache import cache_path, rank_profiles
from personalized_rewardbench.data.retrieval import BM25Retriever
from personalized_rewardbench.data.sources import load_source
from personalized_rewardbench.runs.leaderboard import leaderboard_rows
from personalized_rewardbench.runs.run_files import admit_runs, run_folder_problem

ARGS = ["--model", "baseline:length", "--data", "sample", "--limit", "2", "--profile-k", "2", "--retriever", "bm25"]


def _evaluate(output: Path, cache: Path, *extra: str) -> int:
    return main(["evaluate", *ARGS, "--output", str(output), "--cache-dir", str(cache), "--no-progress", *extra])


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory) -> Path:
    """A finished run folder (6 pairs of the demo sample), copied by each test that damages it."""
    root = tmp_path_factory.mktemp("clean")
    assert _evaluate(root / "out", root / "cache") == 0
    [results] = list((root / "out").rglob("results.json"))
    return results.parent


def _copy(clean_run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    run_dir = out / clean_run.relative_to(clean_run.parent.parent)
    shutil.copytree(clean_run, run_dir)
    return run_dir


def _good_results(clean_run: Path) -> dict:
    return json.loads((clean_run / "results.json").read_text())


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert one_error(err) and "Traceback" not in err and err.startswith("prbench: error: "), err
    return err


TEXT_DAMAGE = [
    ("empty file", b""),
    ("whitespace", b"  \n"),
    ("null", b"null"),
    ("array", b"[1, 2, 3]"),
    ("number", b"42"),
    ("string", b'"results"'),
    ("invalid UTF-8", b'{"model": "\xff\xfe"}'),
    ("NUL bytes", b"\x00" * 32),
]


def _truncated(clean_run: Path, name: str) -> bytes:
    data = (clean_run / name).read_bytes()
    return data[: len(data) // 2]


def _edit(change):
    """A damage that edits the good results.json (read from the run folder given later)."""

    def damage(clean_run: Path) -> bytes:
        payload = _good_results(clean_run)
        change(payload)
        return json.dumps(payload).encode()

    return damage


RESULTS_SHAPES = [
    *[(name, lambda _run, data=data: data) for name, data in TEXT_DAMAGE],
    ("truncated", lambda run: _truncated(run, "results.json")),
    ("empty object", lambda _run: b"{}"),
    ("no accuracy", _edit(lambda r: r.pop("accuracy"))),
    ("accuracy a string", _edit(lambda r: r.update(accuracy="high"))),
    ("accuracy above 1", _edit(lambda r: r.update(accuracy=1.5))),
    ("accuracy NaN", _edit(lambda r: r.update(accuracy=float("nan")))),
    ("accuracy a boolean", _edit(lambda r: r.update(accuracy=True))),
    ("ci95 one number", _edit(lambda r: r.update(ci95=[0.1]))),
    ("num_pairs negative", _edit(lambda r: r.update(num_pairs=-1))),
    ("num_pairs a float", _edit(lambda r: r.update(num_pairs=6.5))),
    ("no model", _edit(lambda r: r.pop("model"))),
    ("model a number", _edit(lambda r: r.update(model=3))),
    ("per_subset a list", _edit(lambda r: r.update(per_subset=[]))),
    ("subset without ci95", _edit(lambda r: next(iter(r["per_subset"].values())).pop("ci95"))),
    ("subset figures null", _edit(lambda r: r["per_subset"].update(Art_and_Entertainment=None))),
    ("protocol a list", _edit(lambda r: r.update(protocol=[]))),
    ("profile_k a string", _edit(lambda r: r["protocol"].update(profile_k="2"))),
    ("another benchmark", _edit(lambda r: r.update(benchmark="reward-bench"))),
    ("created_at a number", _edit(lambda r: r.update(created_at=2026))),
]
RESULTS_IDS = [name for name, _ in RESULTS_SHAPES]


def _lines(clean_run: Path) -> list[bytes]:
    return (clean_run / "scores.jsonl").read_bytes().splitlines(keepends=True)


def _second(make):
    """A damage that replaces the second line of the good scores.jsonl."""

    def damage(clean_run: Path) -> bytes:
        lines = _lines(clean_run)
        return b"".join([lines[0], make(json.loads(lines[1])) + b"\n", *lines[2:]])

    return damage


def _without(key):
    return _second(lambda record: json.dumps({k: v for k, v in record.items() if k != key}).encode())


# (name, damage, line the error names, 0 when it names no line)
SCORE_SHAPES = [
    ("line null", _second(lambda _r: b"null"), 2),
    ("line array", _second(lambda _r: b"[1]"), 2),
    ("line number", _second(lambda _r: b"7"), 2),
    ("line empty object", _second(lambda _r: b"{}"), 2),
    ("no id", _without("id"), 2),
    ("id a number", _second(lambda r: json.dumps({**r, "id": 5}).encode()), 2),
    ("no chosen_score", _without("chosen_score"), 2),
    ("score a string", _second(lambda r: json.dumps({**r, "rejected_score": "low"}).encode()), 2),
    ("score null", _second(lambda r: json.dumps({**r, "chosen_score": None}).encode()), 2),
    ("score infinite", _second(lambda r: json.dumps({**r, "chosen_score": float("inf")}).encode()), 2),
    ("invalid UTF-8 line", _second(lambda _r: b'{"id": "\xff"}'), 2),
    ("blank line", _second(lambda _r: b""), 2),
    ("truncated last line", lambda run: b"".join(_lines(run))[:-20], 6),
    ("duplicate item", lambda run: b"".join([_lines(run)[0], *_lines(run)[:-1]]), 0),
    ("a record missing", lambda run: b"".join(_lines(run)[:-1]), 0),
    ("empty file", lambda _run: b"", 0),
]
SCORE_IDS = [name for name, _, _ in SCORE_SHAPES]


@pytest.mark.parametrize(("name", "damage"), RESULTS_SHAPES, ids=RESULTS_IDS)
def test_a_damaged_results_json_is_refused_naming_it(clean_run, tmp_path, capsys, name, damage):
    payload = damage(clean_run)
    run_dir = _copy(clean_run, tmp_path)
    (run_dir / "results.json").write_bytes(payload)
    before = sorted(p.name for p in run_dir.iterdir())
    assert _evaluate(tmp_path / "out", tmp_path / "cache") == 2, name
    err = _one_line_error(capsys)
    assert str(run_dir / "results.json") in err, (name, err)
    assert (run_dir / "results.json").read_bytes() == payload  # refused, never overwritten
    assert sorted(p.name for p in run_dir.iterdir()) == before  # no lock, temp or partial files left


@pytest.mark.parametrize(("name", "damage", "line"), SCORE_SHAPES, ids=SCORE_IDS)
def test_a_damaged_scores_jsonl_is_refused_naming_file_and_line(clean_run, tmp_path, capsys, name, damage, line):
    payload = damage(clean_run)
    run_dir = _copy(clean_run, tmp_path)
    (run_dir / "scores.jsonl").write_bytes(payload)
    assert _evaluate(tmp_path / "out", tmp_path / "cache") == 2, name
    err = _one_line_error(capsys)
    assert str(run_dir / "scores.jsonl") in err, (name, err)
    if line:
        assert f"line {line}:" in err, (name, err)
    assert (run_dir / "scores.jsonl").read_bytes() == payload
    assert sorted(p.name for p in run_dir.iterdir()) == ["results.json", "run.json", "scores.jsonl"]


RUN_JSON_SHAPES = [
    *TEXT_DAMAGE,
    ("truncated", b'{"dataset": "sample", "mod'),
    ("empty object", b"{}"),
    ("model a number", None),
    ("protocol a list", None),
]


@pytest.mark.parametrize("index", range(len(RUN_JSON_SHAPES)), ids=[name for name, _ in RUN_JSON_SHAPES])
def test_a_damaged_run_json_is_refused_naming_it(clean_run, tmp_path, capsys, index):
    name, payload = RUN_JSON_SHAPES[index]
    run_dir = _copy(clean_run, tmp_path)
    if payload is None:
        identity = json.loads((run_dir / "run.json").read_text())
        identity.update(model=3) if name == "model a number" else identity.update(protocol=[])
        payload = json.dumps(identity).encode()
    (run_dir / "run.json").write_bytes(payload)
    for output in ("results.json", "scores.jsonl"):  # also a run that never finished
        (run_dir / output).unlink()
    assert _evaluate(tmp_path / "out", tmp_path / "cache") == 2, name
    err = _one_line_error(capsys)
    assert str(run_dir) in err, (name, err)
    assert (run_dir / "run.json").read_bytes() == payload
    assert [p.name for p in run_dir.iterdir()] == ["run.json"]


def _partial_shapes(clean_run: Path) -> list[tuple[str, bytes]]:
    record = json.loads(_lines(clean_run)[0])
    return [
        ("null", b"null\n"),
        ("array", b"[1, 2]\n"),
        ("number", b"42\n"),
        ("empty object", b"{}\n"),
        ("id only", b'{"id": "0_0_0"}\n'),
        ("id null", json.dumps({**record, "id": None}).encode() + b"\n"),
        ("score a string", json.dumps({**record, "chosen_score": "x"}).encode() + b"\n"),
        ("invalid UTF-8", b'{"id": "\xff\xfe"}\n'),
        ("invalid JSON", b"{not json}\n"),
        ("NUL bytes", b"\x00" * 20 + b"\n"),
        ("blank line", b"\n"),
    ]


@pytest.mark.parametrize("index", range(11), ids=[f"partial-{i}" for i in range(11)])
def test_a_damaged_partial_log_is_rebuilt_with_a_notice(clean_run, tmp_path, capsys, index):
    name, damage = _partial_shapes(clean_run)[index]
    run_dir = _copy(clean_run, tmp_path)
    good_lines = (run_dir / "scores.jsonl").read_bytes().splitlines(keepends=True)
    partial = run_dir / "scores.partial" / "rank-0.jsonl"
    partial.parent.mkdir()
    partial.write_bytes(good_lines[0] + damage + b"".join(good_lines[1:3]))
    (run_dir / "results.json").unlink()
    (run_dir / "scores.jsonl").unlink()
    assert _evaluate(tmp_path / "out", tmp_path / "cache") == 0, name
    out = capsys.readouterr().out
    assert f"{partial}: line 2:" in out and "scored again" in out, (name, out)
    assert (run_dir / "scores.jsonl").read_bytes() == (clean_run / "scores.jsonl").read_bytes()
    assert json.loads((run_dir / "results.json").read_text())["num_pairs"] == 6
    assert sorted(p.name for p in run_dir.iterdir()) == ["results.json", "run.json", "scores.jsonl"]


def _cache_shapes() -> list[tuple[str, object]]:
    return [
        ("empty file", b""),
        ("null", None),
        ("array", [1, 2]),
        ("number", 42),
        ("string", "rankings"),
        ("invalid UTF-8", b'{"0_0_0": [0, \xff]}'),
        ("truncated", b'{"0_0_0": [0, 1, 2'),
        ("entry a string", {"0_0_0": "0,1,2"}),
        ("entry empty", {"0_0_0": []}),
        ("index out of range", {"0_0_0": [99, 0, 1, 2, 3, 4]}),
        ("negative index", {"0_0_0": [-1, 0, 1, 2, 3]}),
        ("duplicate index", {"0_0_0": [0, 0, 1, 2, 3, 4]}),
        ("floats", {"0_0_0": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]}),
        ("booleans", {"0_0_0": [True, False]}),
        ("entry null", {"0_0_0": None}),
    ]


@pytest.mark.parametrize("index", range(15))
def test_a_damaged_ranking_cache_is_recomputed_with_a_notice(tmp_path, index):
    name, damage = _cache_shapes()[index]
    source = load_source("sample")
    rows = [row for rows in source.rows.values() for row in rows]
    retriever = BM25Retriever()
    clean = rank_profiles(rows, retriever, source.revision, tmp_path / "clean", progress=False)
    path = cache_path(tmp_path / "damaged", source.revision, retriever.name)
    path.parent.mkdir(parents=True)
    if isinstance(damage, dict):  # one damaged entry among good ones
        damage = json.dumps({**clean, **damage}).encode()
    path.write_bytes(damage if isinstance(damage, bytes) else json.dumps(damage).encode())
    notices: list[str] = []
    again = rank_profiles(rows, retriever, source.revision, tmp_path / "damaged", progress=False, log=notices.append)
    assert again == clean, name
    assert len(notices) == 1 and str(path) in notices[0] and "again" in notices[0], (name, notices)
    assert json.loads(path.read_text()) == clean  # rewritten whole
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def _leaderboard_folder(clean_run: Path, tmp_path: Path, payload: bytes) -> tuple[Path, Path]:
    folder = tmp_path / "board"
    shutil.copytree(clean_run, folder / "m1" / "run-a")
    shutil.copytree(clean_run, folder / "m2" / "run-b")
    good = _good_results(clean_run)
    (folder / "m2" / "run-b" / "results.json").write_text(json.dumps({**good, "model": "second-model"}))
    damaged = folder / "m3" / "run-c" / "results.json"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(payload)
    return folder, damaged


@pytest.mark.parametrize(("name", "damage"), RESULTS_SHAPES, ids=RESULTS_IDS)
def test_the_leaderboard_skips_a_damaged_results_json_and_shows_the_rest(clean_run, tmp_path, capsys, name, damage):
    payload = damage(clean_run)
    folder, damaged = _leaderboard_folder(clean_run, tmp_path, payload)
    assert main(["leaderboard", str(folder)]) == 0, name
    captured = capsys.readouterr()
    notices = captured.err.strip().splitlines()
    assert len(notices) == 1 and str(damaged) in notices[0] and notices[0].startswith("prbench: skipped "), notices
    assert "baseline:length" in captured.out and "second-model" in captured.out
    assert (folder / "leaderboard.png").is_file()
    assert [row["model"] for row in leaderboard_rows(folder)] in (
        ["baseline:length", "second-model"],
        ["second-model", "baseline:length"],
    )

    from personalized_rewardbench.space.board import leaderboard_tables

    _, _, demo = leaderboard_tables(folder)
    assert sorted(demo["model"]) == ["baseline:length", "second-model"]


@pytest.mark.parametrize(("name", "damage"), RESULTS_SHAPES, ids=RESULTS_IDS)
def test_runs_pulled_from_a_results_repo_reach_the_store_only_when_valid(clean_run, tmp_path, name, damage):
    payload = damage(clean_run)
    incoming = tmp_path / "download"
    shutil.copytree(clean_run, incoming / "m1" / "good")
    shutil.copytree(clean_run, incoming / "m3" / "bad")
    (incoming / "m3" / "bad" / "results.json").write_bytes(payload)
    store = tmp_path / "store"
    notices = admit_runs(incoming, store)
    assert len(notices) == 1 and notices[0].startswith("skipped run m3/bad: m3/bad/results.json"), (name, notices)
    assert str(tmp_path) not in notices[0]  # no server paths in what a visitor may read
    assert sorted(p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file()) == [
        "m1/good/results.json",
        "m1/good/run.json",
        "m1/good/scores.jsonl",
    ]
    assert run_folder_problem(store / "m1" / "good") is None


@pytest.mark.parametrize(("name", "damage", "line"), SCORE_SHAPES, ids=SCORE_IDS)
def test_pulled_runs_with_damaged_scores_are_left_out(clean_run, tmp_path, name, damage, line):
    payload = damage(clean_run)
    incoming = tmp_path / "download"
    shutil.copytree(clean_run, incoming / "m" / "bad")
    (incoming / "m" / "bad" / "scores.jsonl").write_bytes(payload)
    notices = admit_runs(incoming, tmp_path / "store")
    assert len(notices) == 1 and "m/bad/scores.jsonl" in notices[0], (name, notices)
    assert not (tmp_path / "store").exists()


def test_a_pulled_run_does_not_replace_a_valid_local_one(clean_run, tmp_path):
    incoming, store = tmp_path / "download", tmp_path / "store"
    shutil.copytree(clean_run, incoming / "m" / "run")
    shutil.copytree(clean_run, store / "m" / "run")
    before = (store / "m" / "run" / "results.json").stat().st_mtime_ns
    assert admit_runs(incoming, store) == []
    assert (store / "m" / "run" / "results.json").stat().st_mtime_ns == before
