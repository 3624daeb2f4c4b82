"""Release build: sample / upstream folders / Hub cache -> Hub dataset folder -> datasets 5 loads it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from cli_errors import user_error
from row_factory import make_row, write_upstream_folder

from personalized_rewardbench.cli import main
from personalized_rewardbench.data.schema import FEATURES, FEATURES_WITH_SUBSET, SUBSETS
from personalized_rewardbench.data.sources import load_source
from personalized_rewardbench.release.build import RELEASE_SCRIPT_NAME, load_builder_module
from personalized_rewardbench.release.card import read_front_matter


@pytest.fixture(scope="module")
def sample_release(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rel") / "prb-sample"
    assert (
        main(["release", "build", "--source", "sample", "--version", "0.1.0", "--out", str(out), "--repo", "me/prb"])
        == 0
    )
    return out


def _load(folder: Path, config: str | None = None) -> datasets.Dataset:
    return datasets.load_dataset(str(folder), config, split="test")


def test_sample_release_loads_every_config_with_upstream_schema(sample_release):
    sample = load_source("sample")
    for subset in SUBSETS:
        rows = _load(sample_release, subset)
        assert rows.features == FEATURES
        assert rows.column_names == list(FEATURES)
        assert rows.to_list() == sample.rows[subset]
    combined = _load(sample_release)
    assert combined.features == FEATURES_WITH_SUBSET
    assert combined.num_rows == sum(len(rows) for rows in sample.rows.values())
    for row in combined:
        assert row["id"].startswith(str(SUBSETS.index(row["subset"])) + "_")


def test_builder_used_directly_yields_the_same_rows(sample_release, tmp_path):
    module = load_builder_module(sample_release / RELEASE_SCRIPT_NAME)
    for config in [*SUBSETS, "default"]:
        builder = module.PersonalizedRewardBench(
            config_name=config, data_dir=str(sample_release), cache_dir=str(tmp_path)
        )
        builder.download_and_prepare()
        assert (
            builder.as_dataset(split="test").to_list()
            == _load(sample_release, None if config == "default" else config).to_list()
        )


def test_loading_script_features_equal_the_schema():
    module = load_builder_module()
    assert module._FEATURES == FEATURES
    assert module._SUBSETS == SUBSETS
    assert module.PersonalizedRewardBench(config_name="default").info.features == FEATURES_WITH_SUBSET


def test_script_name_keeps_datasets_5_from_refusing_the_folder(sample_release, tmp_path):
    assert (sample_release / RELEASE_SCRIPT_NAME).is_file()
    clash = tmp_path / "clash"
    shutil.copytree(sample_release, clash)
    shutil.copy(clash / RELEASE_SCRIPT_NAME, clash / "clash.py")
    with pytest.raises(Exception, match="no longer supported"):
        _load(clash, SUBSETS[0])


def test_card_front_matter_matches_the_written_data(sample_release):
    meta = read_front_matter(sample_release / "README.md")
    assert meta["license"] == "apache-2.0"
    assert [c["config_name"] for c in meta["configs"]] == [*SUBSETS, "default"]
    infos = {info["config_name"]: info for info in meta["dataset_info"]}
    for subset in SUBSETS:
        table = pq.read_table(sample_release / "data" / subset / "test-00000-of-00001.parquet")
        split = infos[subset]["splits"][0]
        assert split["num_examples"] == table.num_rows
        assert split["num_bytes"] == table.select(list(FEATURES)).nbytes
        assert (
            infos[subset]["download_size"]
            == (sample_release / "data" / subset / "test-00000-of-00001.parquet").stat().st_size
        )
    assert infos["default"]["splits"][0]["num_examples"] == sum(infos[s]["splits"][0]["num_examples"] for s in SUBSETS)
    assert [f["name"] for f in infos["default"]["features"]] == [*FEATURES, "subset"]
    card = (sample_release / "README.md").read_text()
    assert "Demo sample — not the benchmark" in card
    assert "never enter a model's input" in card
    assert 'load_dataset("me/prb", "Art_and_Entertainment", split="test", revision="v0.1.0")' in card
    assert "2604.07343" in card
    changelog = (sample_release / "CHANGELOG.md").read_text()
    assert "## v0.1.0" in changelog and "not benchmark data" in changelog
    assert json.loads((sample_release / "release.json").read_text())["version"] == "0.1.0"


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_upstream_layout_folder_builds_a_release(tmp_path, fmt):
    written = write_upstream_folder(tmp_path / "up", per_subset=4, fmt=fmt)
    out = tmp_path / "release"
    assert main(["release", "build", "--source", str(tmp_path / "up"), "--version", "1.2.3", "--out", str(out)]) == 0
    for subset in SUBSETS:
        assert _load(out, subset).to_list() == written[subset]
    card = (out / "README.md").read_text()
    assert "Demo sample" not in card
    assert "1.2.3" in card


def _seed_hub_cache(hf_home: Path, repo_id: str, commit: str, source: Path) -> None:
    """Lay out a dataset repo in the huggingface_hub cache exactly as a download would."""
    repo_cache = hf_home / "hub" / f"datasets--{repo_id.replace('/', '--')}"
    shutil.copytree(source, repo_cache / "snapshots" / commit)
    (repo_cache / "refs").mkdir(parents=True)
    (repo_cache / "refs" / "main").write_text(commit)


def test_hub_source_resolves_through_the_hub_cache_offline(tmp_path, monkeypatch):
    hf_home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_home / "hub"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(hf_home / "hub"))
    written = write_upstream_folder(tmp_path / "up", per_subset=2)
    commit = "0123456789abcdef0123456789abcdef01234567"
    _seed_hub_cache(hf_home, "someone/prb-mirror", commit, tmp_path / "up")
    source = load_source("hub:someone/prb-mirror")
    assert source.kind == "hub" and source.revision == commit
    assert source.rows == written
    out = tmp_path / "release"
    assert (
        main(["release", "build", "--source", "hub:someone/prb-mirror", "--version", "0.2.0", "--out", str(out)]) == 0
    )
    assert commit in (out / "README.md").read_text()


def test_hub_source_missing_offline_is_one_line(tmp_path, capsys):
    code = main(
        ["release", "build", "--source", "hub:nobody/not-there", "--version", "0.1.0", "--out", str(tmp_path / "x")]
    )
    err, hint = user_error(capsys.readouterr().err)
    assert code == 2 and "hub:nobody/not-there: not in the local Hub cache" in err and hint == "download it once online"
    assert not (tmp_path / "x").exists()


def _broken(tmp_path: Path, mutate) -> Path:
    written = write_upstream_folder(tmp_path / "up", per_subset=3, fmt="jsonl")
    rows = written[SUBSETS[1]]
    mutate(rows)
    path = tmp_path / "up" / SUBSETS[1] / "test-00000-of-00001.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda rows: rows[1].pop("chosen"), "row 1_0_1: field 'chosen': missing"),
        (lambda rows: rows[2].update(question="   "), "row 1_0_2: field 'question': is empty"),
        (
            lambda rows: rows[0].update(rejected=rows[0]["chosen"]),
            "row 1_0_0: field 'rejected': is identical to 'chosen'",
        ),
        (lambda rows: rows[2].update(id="1_0_0"), "row 1_0_0: field 'id': duplicate of row #0"),
        (lambda rows: rows[1]["profile"][0].pop("text"), "row 1_0_1: field 'profile[0].text': missing"),
        (
            lambda rows: rows[1].update(rubric_aspects=[]),
            "row 1_0_1: field 'rubric_aspects': needs at least one aspect",
        ),
        (lambda rows: rows[0].update(narrative=7), "row 1_0_0: field 'narrative': expected a string, got int"),
        (lambda rows: rows[1].update(id=""), "row #1: field 'id': is empty"),
    ],
)
def test_bad_rows_stop_the_build_with_one_line(tmp_path, capsys, mutate, expected):
    path = _broken(tmp_path, mutate)
    out = tmp_path / "release"
    code = main(["release", "build", "--source", str(tmp_path / "up"), "--version", "0.1.0", "--out", str(out)])
    err, _hint = user_error(capsys.readouterr().err)
    assert code == 2
    assert str(path) in err and expected in err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".release")]


def test_unreadable_jsonl_names_the_line(tmp_path, capsys):
    write_upstream_folder(tmp_path / "up", per_subset=2, fmt="jsonl")
    path = tmp_path / "up" / SUBSETS[0] / "test-00000-of-00001.jsonl"
    path.write_text(path.read_text() + "{not json\n")
    assert (
        main(["release", "build", "--source", str(tmp_path / "up"), "--version", "0.1.0", "--out", str(tmp_path / "r")])
        == 2
    )
    assert f"{path}: line 3: not valid JSON" in capsys.readouterr().err


def test_existing_out_is_not_overwritten_unless_forced(tmp_path, capsys):
    out = tmp_path / "release"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["release", "build", "--source", "sample", "--version", "0.1.0", "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (out / "keep.txt").read_text() == "mine"
    (out / "release.json").write_text('{"version": "0.1.0"}')  # an earlier release: --force may replace it
    assert main(["release", "build", "--source", "sample", "--version", "0.1.1", "--out", str(out), "--force"]) == 0
    assert not (out / "keep.txt").exists()
    assert json.loads((out / "release.json").read_text())["version"] == "0.1.1"


def test_changelog_extends_the_previous_one(sample_release, tmp_path):
    out = tmp_path / "next"
    args = ["release", "build", "--source", "sample", "--version", "0.2.0", "--out", str(out)]
    assert main([*args, "--changelog", str(sample_release / "CHANGELOG.md"), "--notes", "Card wording."]) == 0
    text = (out / "CHANGELOG.md").read_text()
    assert text.index("## v0.2.0") < text.index("## v0.1.0")
    assert "Card wording." in text


@pytest.mark.parametrize("version", ["1.0", "v1.0.0.0", "one"])
def test_bad_version_is_refused(tmp_path, capsys, version):
    assert main(["release", "build", "--source", "sample", "--version", version, "--out", str(tmp_path / "r")]) == 2
    assert "semantic versioning" in capsys.readouterr().err


def test_push_dry_run_prints_the_plan_and_touches_nothing(sample_release, capsys):
    before = sorted((p.relative_to(sample_release), p.stat().st_mtime_ns) for p in sample_release.rglob("*"))
    assert (
        main(["release", "push", "--dir", str(sample_release), "--repo", "me/prb", "--tag", "v0.1.0", "--dry-run"]) == 0
    )
    out = capsys.readouterr().out
    assert "me/prb" in out and "v0.1.0" in out and "dry run" in out
    parquet = sample_release / "data" / SUBSETS[0] / "test-00000-of-00001.parquet"
    assert f"{parquet.stat().st_size:,d}  data/{SUBSETS[0]}/test-00000-of-00001.parquet" in out
    assert "README.md" in out and RELEASE_SCRIPT_NAME in out
    assert sorted((p.relative_to(sample_release), p.stat().st_mtime_ns) for p in sample_release.rglob("*")) == before


def test_push_checks_tag_and_token_before_any_network(sample_release, capsys, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert main(["release", "push", "--dir", str(sample_release), "--repo", "me/prb", "--tag", "v9.9.9"]) == 2
    err, hint = user_error(capsys.readouterr().err)
    assert "--tag v9.9.9 is not the release's tag v0.1.0" in err and hint == "pass --tag v0.1.0"
    assert main(["release", "push", "--dir", str(sample_release), "--repo", "me/prb", "--tag", "v0.1.0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "prbench: error: no Hugging Face token",
        "  hint: run 'hf auth login' or set HF_TOKEN, then push again",
    ]


def test_made_up_row_is_valid():
    from personalized_rewardbench.data.schema import validate_rows

    assert validate_rows([make_row(0, 1)], "x")[0]["id"] == "0_0_1"


def test_push_refuses_a_repo_the_card_was_not_built_for(sample_release, capsys):
    assert (
        main(["release", "push", "--dir", str(sample_release), "--repo", "other/prb", "--tag", "v0.1.0", "--dry-run"])
        == 2
    )
    assert "was built for me/prb" in capsys.readouterr().err


def test_force_never_replaces_a_folder_it_did_not_write(tmp_path, capsys, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text("code")
    monkeypatch.chdir(project)
    for out in (".", str(project), str(tmp_path)):
        assert main(["release", "build", "--source", "sample", "--version", "1.0.0", "--out", out, "--force"]) == 2
    a_file = project / "notes.txt"
    a_file.write_text("mine")
    assert main(["release", "build", "--source", "sample", "--version", "1.0.0", "--out", str(a_file), "--force"]) == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("  hint: ")]
    assert len(err) == 4 and all(line.startswith("prbench: error: --out") for line in err)
    assert (project / "main.py").read_text() == "code" and a_file.read_text() == "mine"


def test_release_needs_every_subset(tmp_path, capsys):
    write_upstream_folder(tmp_path / "up", per_subset=2)
    shutil.rmtree(tmp_path / "up" / SUBSETS[2])
    assert (
        main(["release", "build", "--source", str(tmp_path / "up"), "--version", "0.1.0", "--out", str(tmp_path / "r")])
        == 2
    )
    assert f"lacks {SUBSETS[2]}" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_ids_must_be_unique_across_subsets_and_files_not_empty(tmp_path, capsys):
    written = write_upstream_folder(tmp_path / "up", per_subset=2, fmt="jsonl")
    clash = dict(written[SUBSETS[1]][0], id=written[SUBSETS[0]][0]["id"])
    path = tmp_path / "up" / SUBSETS[1] / "test-00000-of-00001.jsonl"
    path.write_text(json.dumps(clash) + "\n" + json.dumps(written[SUBSETS[1]][1]) + "\n")
    assert (
        main(["release", "build", "--source", str(tmp_path / "up"), "--version", "0.1.0", "--out", str(tmp_path / "r")])
        == 2
    )
    assert f"row 0_0_0: field 'id': in both {SUBSETS[0]} and {SUBSETS[1]}" in capsys.readouterr().err
    path.write_text("")
    assert (
        main(["release", "build", "--source", str(tmp_path / "up"), "--version", "0.1.0", "--out", str(tmp_path / "r")])
        == 2
    )
    assert f"{path}: holds no rows" in capsys.readouterr().err
