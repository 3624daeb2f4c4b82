"""`prbench construct` without models: input validation, every verification rule, output, release, sharding."""

from __future__ import annotations

import json
import threading

import datasets
import pyarrow.parquet as pq
import pytest
from construct_fixtures import CannedGenerator, CannedJudge, sample_rows, words, write_lamp_qa_folder

from personalized_rewardbench.cli import main
from personalized_rewardbench.construct.pipeline import ConstructConfig, run_construction
from personalized_rewardbench.construct.prompts import pair_chats
from personalized_rewardbench.construct.verify import (
    REASONS,
    VerifyConfig,
    judge_check,
    leaked_ngrams,
    length_ratio,
    rule_check,
)
from personalized_rewardbench.data.schema import FEATURES, SUBSETS
from personalized_rewardbench.data.sources import load_source
from personalized_rewardbench.downstream.generation import sample_seed
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.release.build import build_release
from personalized_rewardbench.release.card import read_front_matter


def _config(tmp_path, source, **overrides) -> ConstructConfig:
    settings = dict(
        source=str(source),
        out=tmp_path / "out",
        generator="canned-generator",
        split="train",
        profile_k=3,
        retriever="bm25",
        cache_dir=tmp_path / "cache",
        progress=False,
    )
    settings.update(overrides)
    return ConstructConfig(**settings)


# ---------------------------------------------------------------- input


def test_unpaired_rows_load_from_a_train_split_and_the_benchmark_path_still_needs_answers(tmp_path):
    written = write_lamp_qa_folder(tmp_path / "lamp", split="train")
    source = load_source(str(tmp_path / "lamp"), split="train", paired=False)
    assert source.split == "train" and source.rows == written
    with pytest.raises(UserError, match=r"no subset files found for the test split; it holds train files"):
        load_source(str(tmp_path / "lamp"))  # evaluate reads the test split, paired
    with pytest.raises(UserError, match="field 'chosen': missing"):
        load_source(str(tmp_path / "lamp"), split="train")  # paired rows need answers
    # answers present in the input are dropped, not carried into the construction
    assert "chosen" not in load_source("sample", paired=False).rows[SUBSETS[0]][0]


def test_every_bad_unpaired_row_gets_one_line(tmp_path, capsys):
    write_lamp_qa_folder(tmp_path / "lamp", split="train")
    path = tmp_path / "lamp" / SUBSETS[0] / "train-00000-of-00001.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    del rows[1]["narrative"]
    rows[3]["rubric_aspects"] = []
    rows[5]["profile"][0]["text"] = 7
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    code = main(["construct", "--source", str(tmp_path / "lamp"), "--split", "train", "--generator", "x",
                 "--out", str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[0] == "prbench: error: 3 bad rows; fix or remove them:"
    assert err[1:] == [
        f"{path}: row 0_0_1: field 'narrative': missing",
        f"{path}: row 0_0_3: field 'rubric_aspects': needs at least one aspect",
        f"{path}: row 0_0_5: field 'profile[0].text': expected a string, got int",
    ]
    assert not (tmp_path / "out").exists()


def test_prompts_carry_question_posts_and_aspects_but_never_the_narrative():
    row = sample_rows()[SUBSETS[0]][0]
    from personalized_rewardbench.data.eval_items import ProfilePost

    posts = (ProfilePost("anime", row["profile"][1]["text"]),)
    chats = pair_chats(row, posts, max_words=100)
    for role in ("chosen", "rejected"):
        user = chats[role][1]["content"]
        assert row["question"] in user and row["profile"][1]["text"] in user
        assert all(aspect["aspect"] in user for aspect in row["rubric_aspects"])
        assert row["narrative"] not in user and "never more than 100" in user
        assert chats[role][0] == chats["chosen"][0]  # one system message: the same register
    assert "fits this particular asker" in chats["chosen"][1]["content"]
    assert "go against each of these points" in chats["rejected"][1]["content"]


# ---------------------------------------------------------------- rules


def test_leak_check_ignores_what_the_generator_was_shown():
    key = ["I only ever watch short anime on my phone at night"]
    answer = "Since you only ever watch short anime on my phone at night, try this."
    assert leaked_ngrams(answer, key, [], 8) == sorted(
        [
            "only ever watch short anime on my phone",
            "ever watch short anime on my phone at",
            "watch short anime on my phone at night",
        ]
    )
    assert leaked_ngrams(answer, key, ["i only ever watch short anime on my phone at night!"], 8) == []
    assert leaked_ngrams(answer, key, [], 11) == []


@pytest.mark.parametrize(
    ("chosen_words", "rejected_words", "passes"),
    [(80, 100, True), (79, 100, False), (125, 100, True), (126, 100, False)],
)
def test_length_ratio_band_edges(chosen_words, rejected_words, passes):
    row = sample_rows()[SUBSETS[0]][0]
    config = VerifyConfig(max_words=200)
    failed, details = rule_check(words("a", chosen_words), words("b", rejected_words), row, [], config)
    assert ("length_ratio" not in failed) == passes
    assert details["length_ratio"] == length_ratio(words("a", chosen_words), words("b", rejected_words))


def test_judge_margin_and_quality_thresholds():
    config = VerifyConfig(margin=0.5, quality_check=True, min_quality=1.0)
    assert judge_check([1.5, 1.0], [1.0, 2.0], config) == (
        [],
        {"rubric": [1.5, 1.0], "margin": 0.5, "quality": [1.0, 2.0]},
    )
    assert judge_check([4 / 3, 1.0], [2.0, 2.0], config)[0] == ["judge_margin"]  # 0.333 < 0.5
    assert judge_check([None, 1.0], [0.5, None], config)[0] == ["judge_unparsable", "quality_unparsable"]
    assert judge_check([2.0, 0.0], [0.9, 2.0], config)[0] == ["low_quality"]
    with pytest.raises(UserError, match="must hold 1"):
        VerifyConfig(min_length_ratio=1.1)


# ---------------------------------------------------------------- pipeline with canned backends


def _leaky_sentence(row) -> str:
    """Eight words of the narrative that appear neither in the question nor in any post."""
    shown = [row["question"], *(post["text"] for post in row["profile"])]
    narrative = row["narrative"].split()
    for start in range(len(narrative) - 8):
        candidate = " ".join(narrative[start : start + 8])
        if leaked_ngrams(candidate, [row["narrative"]], shown, 8):
            return candidate
    raise AssertionError("no private 8-gram in this narrative")


@pytest.fixture
def scripted(tmp_path):
    """A train-split LaMP-QA folder and a script that makes items fail each rule on purpose."""
    rows = write_lamp_qa_folder(tmp_path / "lamp", split="train")
    by_id = {row["id"]: row for subset_rows in rows.values() for row in subset_rows}
    script = {
        "0_0_1": ("", f"MISS {words('m', 59)}"),
        "0_0_2": (f"FIT {words('x', 59)}", f"FIT {words('x', 59)}"),
        "0_0_3": (f"FIT {words('f', 119)}", f"MISS {words('m', 119)}"),
        "0_0_4": (f"FIT {words('f', 59)}", f"MISS {words('m', 39)}"),
        "1_0_1": (f"FIT {_leaky_sentence(by_id['1_0_1'])} {words('f', 51)}", f"MISS {words('m', 59)}"),
        "1_0_2": (f"GARBLE {words('f', 59)}", f"MISS {words('m', 59)}"),
        "1_0_3": (f"WEAK {words('f', 59)}", f"WEAK {words('m', 59)}"),
        "2_0_1": (f"FIT QGARBLE {words('f', 58)}", f"MISS {words('m', 59)}"),
        "2_0_2": (f"FIT {words('f', 59)}", f"MISS POOR {words('m', 58)}"),
    }
    expected = {
        "0_0_1": "empty_answer",
        "0_0_2": "identical_answers",
        "0_0_3": "over_word_limit",
        "0_0_4": "length_ratio",
        "1_0_1": "key_leak",
        "1_0_2": "judge_unparsable",
        "1_0_3": "judge_margin",
        "2_0_1": "quality_unparsable",
        "2_0_2": "low_quality",
    }
    return rows, script, expected


def test_every_drop_reason_is_recorded_and_kept_pairs_are_written(tmp_path, scripted):
    rows, script, expected = scripted
    generator, judge = CannedGenerator(rows, script), CannedJudge()
    config = _config(tmp_path, tmp_path / "lamp", verify=VerifyConfig(quality_check=True))
    summary = run_construction(config, backends=(generator, judge), log=lambda _m: None).summary

    verdicts = {v["id"]: v for v in map(json.loads, (tmp_path / "out" / "verdicts.jsonl").read_text().splitlines())}
    assert {item_id: v["reasons"] for item_id, v in verdicts.items() if not v["kept"]} == {
        item_id: [reason] for item_id, reason in expected.items()
    } | {"0_0_1": ["empty_answer", "length_ratio"]}  # an empty answer also breaks the length band
    assert set(expected.values()) == set(REASONS)  # every rule was exercised
    assert verdicts["0_0_4"]["length_ratio"] == 1.5 and verdicts["0_0_3"]["words"] == [120, 120]
    assert verdicts["1_0_3"]["margin"] == 0.0 and verdicts["0_0_0"]["margin"] == 2.0
    counts = summary["counts"]
    assert counts["items"] == 24 and counts["kept"] == 15 and counts["dropped"] == 9
    assert counts["dropped_by_reason"] == {reason: 1 for reason in REASONS}  # by first reason: sums to dropped
    assert counts["failed_by_rule"] == {reason: 2 if reason == "length_ratio" else 1 for reason in REASONS}
    assert counts["per_subset"][SUBSETS[0]] == {"items": 8, "kept": 4}

    # seeds: answer j of item i from (seed, id, j); each answer generated once
    assert sorted(generator.calls) == sorted(
        (item_id, role, sample_seed(42, item_id, j))
        for item_id in verdicts
        for j, role in enumerate(("chosen", "rejected"))
    )
    # the judge rated only pairs that passed the rules: 24 - 5 pairs, 2 answers, rubric + quality
    assert len(judge.chats) == (24 - 5) * 2 * 2
    assert summary["cost"]["judge_calls"] == 76 and summary["cost"]["generation_calls"] == 48
    assert summary["cost"]["unit"] == {"generated": "words", "judged": "words"}  # canned: no tokenizer
    generated_words = sum(
        len(text.split()) for g in map(json.loads, (tmp_path / "out" / "generations.jsonl").read_text().splitlines())
        for text in (g["chosen"], g["rejected"])
    )  # fmt: skip
    assert summary["cost"]["generated"] == generated_words
    assert summary["cost"]["per_kept_pair"]["generated"] == round(generated_words / 15, 1)

    table = pq.read_table(tmp_path / "out" / SUBSETS[0] / "train-00000-of-00001.parquet")
    assert table.schema == FEATURES.arrow_schema
    kept_rows = table.to_pylist()
    assert [row["id"] for row in kept_rows] == ["0_0_0", "0_0_5", "0_0_6", "0_0_7"]
    source_row = rows[SUBSETS[0]][0]
    assert kept_rows[0] == {**source_row, "chosen": f"FIT {words('fit', 59)}", "rejected": f"MISS {words('miss', 59)}"}
    stored = json.loads((tmp_path / "out" / "construct.json").read_text())
    assert stored == summary and stored["generator"]["model"] == "canned-generator"
    assert stored["judge"]["model"] == "canned-judge" and stored["prompts"]["version"] == "construct-v1"


def test_rerun_reuses_every_step_and_a_changed_setting_is_refused(tmp_path, scripted):
    rows, script, _ = scripted
    config = _config(tmp_path, tmp_path / "lamp")
    run_construction(config, backends=(CannedGenerator(rows, script), CannedJudge()), log=lambda _m: None)
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    generator, judge = CannedGenerator(rows, script), CannedJudge()
    run_construction(config, backends=(generator, judge), log=lambda _m: None)
    assert generator.calls == [] and judge.chats == []
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()} == before
    changed = _config(tmp_path, tmp_path / "lamp", verify=VerifyConfig(margin=1.0))
    with pytest.raises(UserError, match="holds a run with a different verify"):
        run_construction(changed, backends=(generator, judge), log=lambda _m: None)


def test_two_ranks_share_the_work_and_write_what_one_process_writes(tmp_path, scripted):
    rows, script, _ = scripted
    single = _config(tmp_path, tmp_path / "lamp", out=tmp_path / "single", batch_size=2)
    run_construction(single, backends=(CannedGenerator(rows, script), CannedJudge()), log=lambda _m: None)

    sharded = _config(tmp_path, tmp_path / "lamp", out=tmp_path / "sharded", batch_size=2)
    barrier = threading.Barrier(2, timeout=60)
    generators = [CannedGenerator(rows, script), CannedGenerator(rows, script)]
    errors: list[BaseException] = []

    def rank(r: int) -> None:
        try:
            run_construction(sharded, rank=r, world_size=2, barrier=barrier.wait,
                             backends=(generators[r], CannedJudge()), log=lambda _m: None)  # fmt: skip
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(generators[0].calls) == len(generators[1].calls) == 24  # 12 batches of 2 items, 6 per rank
    assert {c[0] for c in generators[0].calls}.isdisjoint({c[0] for c in generators[1].calls})
    for name in ("generations.jsonl", "judgments.jsonl", "verdicts.jsonl", "construct.json"):
        assert (tmp_path / "sharded" / name).read_text() == (tmp_path / "single" / name).read_text()
    assert not list((tmp_path / "sharded").glob("*.partial"))


# ---------------------------------------------------------------- release


def test_train_pairs_build_into_a_release_marked_as_training_data(tmp_path, scripted, capsys):
    rows, script, _ = scripted
    config = _config(tmp_path, tmp_path / "lamp")
    summary = run_construction(
        config, backends=(CannedGenerator(rows, script), CannedJudge()), log=lambda _m: None
    ).summary
    release = tmp_path / "release"
    code = main(
        [
            "release",
            "build",
            "--source",
            str(tmp_path / "out"),
            "--version",
            "0.1.0",
            "--out",
            str(release),
            "--repo",
            "me/prb-train",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "split train" in out

    pairs = {s: pq.read_table(tmp_path / "out" / s / "train-00000-of-00001.parquet").to_pylist() for s in SUBSETS}
    for subset in SUBSETS:
        loaded = datasets.load_dataset(str(release), subset, split="train", cache_dir=str(tmp_path / "hf"))
        assert loaded.to_list() == pairs[subset]
    everything = datasets.load_dataset(str(release), split="train", cache_dir=str(tmp_path / "hf"))
    assert everything.num_rows == summary["counts"]["kept"] == 17  # no quality check: its 2 items stay
    card = (release / "README.md").read_text()
    meta = read_front_matter(release / "README.md")
    assert "Training data — not the benchmark" in card and "canned-generator" in card
    assert "17 of 24 items kept" in card and 'split="train"' in card
    assert "training-data" in meta["tags"] and "benchmark" not in meta["tags"]
    assert all(files["split"] == "train" for config_ in meta["configs"] for files in config_["data_files"])
    assert json.loads((release / "release.json").read_text())["split"] == "train"
    # the benchmark path never reads it: evaluate wants the test split
    with pytest.raises(UserError, match="holds train files"):
        load_source(str(release))


def test_test_split_pairs_are_an_evaluate_source(tmp_path, scripted, capsys):
    rows, script, _ = scripted
    write_lamp_qa_folder(tmp_path / "lamp-test", split="test")
    config = _config(tmp_path, tmp_path / "lamp-test", split="test")
    run_construction(config, backends=(CannedGenerator(rows, script), CannedJudge()), log=lambda _m: None)
    code = main(
        [
            "evaluate",
            "--model",
            "baseline:length",
            "--data",
            str(tmp_path / "out"),
            "--output",
            str(tmp_path / "res"),
            "--no-progress",
        ]
    )
    capsys.readouterr()
    assert code == 0
    results = json.loads(next((tmp_path / "res").rglob("results.json")).read_text())
    scored = [
        json.loads(line)["id"] for line in next((tmp_path / "res").rglob("scores.jsonl")).read_text().splitlines()
    ]
    verdicts = [json.loads(line) for line in (tmp_path / "out" / "verdicts.jsonl").read_text().splitlines()]
    assert results["num_pairs"] == 17 and scored == [v["id"] for v in verdicts if v["kept"]]
    # a release of constructed test pairs is a benchmark-style release that names how it was made
    build_release(str(tmp_path / "out"), "0.1.0", tmp_path / "release", verify=False)
    card = (tmp_path / "release" / "README.md").read_text()
    assert "> **Constructed pairs.** Made by `prbench construct` with generator `canned-generator`" in card
    assert "Training data" not in card and "benchmark" in read_front_matter(tmp_path / "release" / "README.md")["tags"]


def test_pairs_made_from_the_demo_sample_stay_marked_as_demo(tmp_path):
    rows = sample_rows()
    config = _config(tmp_path, "sample", split="test")
    summary = run_construction(config, backends=(CannedGenerator(rows), CannedJudge()), log=lambda _m: None).summary
    assert summary["demo_sample"] is True and summary["counts"]["kept"] == 24
    assert load_source(str(tmp_path / "out")).is_demo_sample
