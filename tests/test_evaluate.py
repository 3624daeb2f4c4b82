"""prbench evaluate: classifier reward models and baselines, with and without the profile."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
from cli_errors import user_error
from error_lines import one_error

from personalized_rewardbench.cli import main
from personalized_rewardbench.data.ranking_cache import cache_path
from personalized_rewardbench.data.sources import load_source
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.engine import PARTIAL_DIR, prepare_items, run_evaluation
from personalized_rewardbench.runs.scorer_factory import make_scorer
from personalized_rewardbench.scoring.prompts import reward_chat
from personalized_rewardbench.testing.tiny_models import (
    build_tiny_causal_lm,
    build_tiny_encoder_reward_model,
    build_tiny_reward_model,
)


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory) -> Path:
    return build_tiny_reward_model(tmp_path_factory.mktemp("models") / "tiny-rm")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PRBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _evaluate(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "results"
    assert main(["evaluate", "--output", str(out), "--no-progress", *args]) == 0
    [path] = [
        p
        for p in out.rglob("results.json")
        if p.stat().st_mtime == max(q.stat().st_mtime for q in out.rglob("results.json"))
    ]
    return json.loads(path.read_text()) | {"_dir": str(path.parent)}


def _scores(result: dict) -> list[dict]:
    return [json.loads(line) for line in (Path(result["_dir"]) / "scores.jsonl").read_text().splitlines()]


def test_length_baseline_matches_a_hand_count(tmp_path, cache):
    result = _evaluate(tmp_path, "--model", "baseline:length", "--data", "sample")
    rows = [row for rows in load_source("sample").rows.values() for row in rows]
    wins = sum(len(row["chosen"]) > len(row["rejected"]) for row in rows)
    assert result["accuracy"] == pytest.approx(wins / len(rows))
    assert result["num_pairs"] == len(rows) == 24
    assert result["demo_sample"] is True


def test_random_baseline_follows_its_documented_rule(tmp_path, cache):
    result = _evaluate(tmp_path, "--model", "baseline:random", "--data", "sample", "--seed", "7")
    for record in _scores(result):
        assert record["chosen_score"] == random.Random(f"7:{record['id']}:chosen").random()
        assert record["rejected_score"] == random.Random(f"7:{record['id']}:rejected").random()
    wins = sum(r["chosen_score"] > r["rejected_score"] for r in _scores(result))
    assert result["accuracy"] == pytest.approx(wins / 24)


def test_default_run_is_the_embedding_baseline_on_the_sample(tmp_path, cache, capsys):
    result = _evaluate(tmp_path)
    assert (result["model"], result["dataset"], result["protocol"]["profile_k"]) == ("baseline:embedding", "sample", 0)
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].endswith("results.json") and "demo sample" in "\n".join(out)


def test_profile_helps_the_embedding_baseline_on_the_sample(tmp_path, cache):
    without = _evaluate(tmp_path, "--profile-k", "0")
    with_profile = _evaluate(tmp_path, "--profile-k", "5")
    assert with_profile["accuracy"] > without["accuracy"]


def test_results_json_is_the_metric_of_scores_jsonl(tmp_path, cache, tiny_rm):
    result = _evaluate(
        tmp_path, "--model", str(tiny_rm), "--data", "sample", "--limit", "3", "--profile-k", "2", "--retriever", "bm25"
    )
    scores = _scores(result)
    assert [s["id"] for s in scores] == [f"{i}_0_{n}" for i in range(3) for n in range(3)]
    correct = [s["chosen_score"] > s["rejected_score"] for s in scores]
    assert result["accuracy"] == pytest.approx(sum(correct) / len(correct))
    assert result["ties"] == sum(s["chosen_score"] == s["rejected_score"] for s in scores)
    assert result["mean_margin"] == pytest.approx(
        sum(s["chosen_score"] - s["rejected_score"] for s in scores) / len(scores)
    )
    for subset, figures in result["per_subset"].items():
        mine = [c for c, s in zip(correct, scores) if s["subset"] == subset]
        assert figures["accuracy"] == pytest.approx(sum(mine) / len(mine)) and figures["num_pairs"] == 3
    assert result["ci95"][0] <= result["accuracy"] <= result["ci95"][1]
    protocol = result["protocol"]
    assert (protocol["profile_k"], protocol["retriever"], protocol["score_rule"], protocol["dtype"]) == (
        2,
        "bm25",
        "logit",
        "float32",
    )
    for key in (
        "benchmark",
        "dataset_revision",
        "dataset_version",
        "model_revision",
        "model_type",
        "truncated_pairs",
        "runtime",
        "package_version",
    ):
        assert key in result
    assert result["runtime"]["pairs_per_second"] > 0


def _item_and_scorer(tiny_rm, cache, k, retriever="bm25", template="default"):
    config = RunConfig(
        model=str(tiny_rm),
        data="sample",
        limit=1,
        profile_k=k,
        retriever=retriever,
        template=template,
        progress=False,
        cache_dir=cache,
    )
    data = prepare_items(config)
    return data, make_scorer(config)


def test_model_input_never_contains_the_answer_key(tiny_rm, cache):
    data, scorer = _item_and_scorer(tiny_rm, cache, k=15)
    rows = {row["id"]: row for rows in load_source("sample").rows.values() for row in rows}
    for item in data.items:
        chosen_ids, rejected_ids = scorer.fit(item).inputs
        for ids in (chosen_ids, rejected_ids):
            text = scorer.tokenizer.decode(ids)
            row = rows[item.id]
            secrets = [row["narrative"]] + [
                aspect[key] for aspect in row["rubric_aspects"] for key in ("aspect", "evidence", "reason")
            ]
            assert len(secrets) == 1 + 3 * len(row["rubric_aspects"])  # every answer-key field of the row
            for secret in secrets:
                encoded_secret = scorer.tokenizer.decode(
                    scorer.tokenizer(secret, add_special_tokens=False)["input_ids"]
                )
                assert encoded_secret not in text
        expected = scorer.tokenizer.apply_chat_template(
            reward_chat(item, item.chosen), tokenize=True, return_dict=True
        )["input_ids"]
        assert list(expected) == chosen_ids
        assert chosen_ids.count(scorer.tokenizer.bos_token_id) == 2  # one per chat turn, no doubled BOS


def test_profile_k_changes_the_input_in_the_retrievers_order(tiny_rm, cache):
    data0, scorer = _item_and_scorer(tiny_rm, cache, k=0)
    data3, _ = _item_and_scorer(tiny_rm, cache, k=3)
    assert scorer.fit(data0.items[0]).inputs[0] != scorer.fit(data3.items[0]).inputs[0]
    row = load_source("sample").rows["Art_and_Entertainment"][0]
    from personalized_rewardbench.data.retrieval import BM25Retriever

    order = BM25Retriever().rank(row["question"], [p["text"] for p in row["profile"]])
    assert [p.text for p in data3.items[0].posts] == [row["profile"][i]["text"] for i in order[:3]]
    text = scorer.tokenizer.decode(scorer.fit(data3.items[0]).inputs[0])
    positions = [text.find(f"post {i} ( category :") for i in (1, 2, 3)]
    assert -1 not in positions and positions == sorted(positions)


def test_rankings_come_from_the_cache_on_the_second_run(tiny_rm, cache):
    data, _ = _item_and_scorer(tiny_rm, cache, k=2)
    path = cache_path(cache, load_source("sample").revision, "bm25")
    stored = json.loads(path.read_text())
    item_id = data.items[0].id
    stored[item_id] = list(reversed(stored[item_id]))
    path.write_text(json.dumps(stored))
    again, _ = _item_and_scorer(tiny_rm, cache, k=2)
    row = load_source("sample").rows["Art_and_Entertainment"][0]
    assert [p.text for p in again.items[0].posts] == [row["profile"][i]["text"] for i in stored[item_id][:2]]


def test_each_retriever_has_its_own_cached_rankings(tiny_rm, cache):
    """bm25 first, then minilm with the same cache: minilm's order, never bm25's cached one."""
    from personalized_rewardbench.data.retrieval import make_retriever

    bm25, _ = _item_and_scorer(tiny_rm, cache, k=2, retriever="bm25")
    minilm, _ = _item_and_scorer(tiny_rm, cache, k=2, retriever="minilm")
    rows = {row["id"]: row for rows in load_source("sample").rows.values() for row in rows}
    retriever, _ = make_retriever("minilm")
    differ = 0
    for by_bm25, by_minilm in zip(bm25.items, minilm.items):
        row = rows[by_minilm.id]
        order = retriever.rank(row["question"], [post["text"] for post in row["profile"]])
        assert [p.text for p in by_minilm.posts] == [row["profile"][i]["text"] for i in order[:2]]
        differ += [p.text for p in by_bm25.posts] != [p.text for p in by_minilm.posts]
    assert differ > 0  # the two retrievers disagree on some item, so a shared cache entry would show


def test_posts_first_template_at_k0_is_the_question_alone(tiny_rm, cache):
    data, scorer = _item_and_scorer(tiny_rm, cache, k=0, template="posts-first")
    item = data.items[0]
    expected = scorer.tokenizer.apply_chat_template(
        [{"role": "user", "content": item.question}, {"role": "assistant", "content": item.chosen}],
        tokenize=True,
        return_dict=True,
    )["input_ids"]
    assert scorer.fit(item).inputs[0] == list(expected)


def test_scores_are_deterministic(tiny_rm, cache, tmp_path):
    first = _scores(_evaluate(tmp_path / "a", "--model", str(tiny_rm), "--data", "sample", "--limit", "2"))
    second = _scores(_evaluate(tmp_path / "b", "--model", str(tiny_rm), "--data", "sample", "--limit", "2"))
    assert first == second


def test_long_inputs_drop_lowest_ranked_posts_and_never_the_answer(tiny_rm, cache):
    data, scorer = _item_and_scorer(tiny_rm, cache, k=15)
    item = data.items[0]
    full = len(scorer.encode_answer(item, item.chosen))
    scorer.max_length = full - 1
    fitted = scorer.fit(item)
    chosen_ids, truncated = fitted.inputs[0], fitted.truncated
    assert truncated and len(chosen_ids) <= full - 1
    text = scorer.tokenizer.decode(chosen_ids)
    answer = scorer.tokenizer.decode(scorer.tokenizer(item.chosen, add_special_tokens=False)["input_ids"])
    assert answer in text

    def as_decoded(post_text: str) -> str:
        return scorer.tokenizer.decode(scorer.tokenizer(post_text, add_special_tokens=False)["input_ids"])

    kept = [as_decoded(post.text) in text for post in item.posts]  # item.posts: most relevant first
    assert 0 < sum(kept) < len(kept)
    assert kept == sorted(kept, reverse=True)  # the most relevant posts stay, the least relevant go first


def test_two_label_heads_use_the_last_class_probability(tmp_path, cache):
    model = build_tiny_reward_model(tmp_path / "two-label", num_labels=2)
    result = _evaluate(tmp_path, "--model", str(model), "--data", "sample", "--limit", "1")
    assert result["protocol"]["score_rule"] == "last_class_prob"
    assert all(0.0 <= s[key] <= 1.0 for s in _scores(result) for key in ("chosen_score", "rejected_score"))


def test_missing_pad_token_gets_a_distinct_one(tmp_path, cache):
    from transformers import AutoTokenizer

    folder = build_tiny_reward_model(tmp_path / "nopad")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.pad_token = tokenizer.eos_token  # pad == EOS corrupts last-token pooling
    tokenizer.save_pretrained(folder)
    config = RunConfig(model=str(folder), data="sample", limit=1, progress=False)
    scorer = make_scorer(config)
    assert scorer.tokenizer.pad_token_id != scorer.tokenizer.eos_token_id
    assert scorer.model.config.pad_token_id == scorer.tokenizer.pad_token_id
    assert scorer.protocol()["added_pad_token"] is True


class _Crash(RuntimeError):
    pass


def test_resume_after_a_crash_gives_identical_output(tiny_rm, cache, tmp_path):
    args = dict(
        model=str(tiny_rm),
        data="sample",
        limit=3,
        profile_k=2,
        retriever="bm25",
        batch_tokens=600,
        progress=False,
        cache_dir=cache,
    )
    clean = run_evaluation(RunConfig(output=tmp_path / "clean", **args), log=lambda _m: None)

    config = RunConfig(output=tmp_path / "crashy", **args)
    scorer = make_scorer(config)
    original, calls = scorer.score, []

    def crash_after_two(items, batch):
        calls.append(batch)
        if len(calls) > 2:
            raise _Crash("killed")
        return original(items, batch)

    scorer.score = crash_after_two
    with pytest.raises(_Crash):
        run_evaluation(config, scorer=scorer, log=lambda _m: None)
    partial = next((clean.run_dir.parent.parent.parent / "crashy").rglob(f"{PARTIAL_DIR}/rank-0.jsonl"))
    done_before = len(partial.read_text().splitlines())
    assert 0 < done_before < 9
    with partial.open("a") as handle:  # a torn last line, as after kill -9 mid-write
        handle.write('{"id": "0_0_2", "subset": "Art_and')
    resumed = run_evaluation(config, log=lambda _m: None)
    assert (resumed.run_dir / "scores.jsonl").read_text() == (clean.run_dir / "scores.jsonl").read_text()
    strip = lambda r: {k: v for k, v in r.items() if k not in ("runtime", "created_at")}  # noqa: E731
    assert strip(resumed.results) == strip(clean.results)
    assert resumed.results["runtime"]["pairs_scored"] == 9 - done_before
    assert not (resumed.run_dir / PARTIAL_DIR).exists()
    again = run_evaluation(config, log=lambda _m: None)
    assert again.reused and again.results == resumed.results


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "/nonexistent/model-dir"], "no such model folder: /nonexistent/model-dir"),
        (["--model", "./typo_model"], "no such model folder: ./typo_model"),
        (["--model", "../models/typo/rm"], "no such model folder: ../models/typo/rm"),
        (["--model", "baseline:length", "--subset", "Cooking"], "unknown subset 'Cooking'"),
        (["--model", "baseline:length", "--profile-k", "-1"], "--profile-k must be 0 or more"),
        (["--model", "baseline:length", "--data", "/nonexistent/data"], "does not exist"),
        (["--model", "baseline:length", "--retriever", "tfidf"], "unknown --retriever"),
        (["--model", "baseline:nope", "--data", "sample"], "unknown baseline"),
    ],
)
def test_user_errors_are_one_line(tmp_path, cache, capsys, args, message):
    assert main(["evaluate", "--output", str(tmp_path), "--no-progress", "--data", "sample", *args]) == 2
    err, _hint = user_error(capsys.readouterr().err)
    assert message in err


def test_unreadable_data_is_one_line(tmp_path, cache, capsys):
    bad = tmp_path / "data" / "Society_and_Culture"
    bad.mkdir(parents=True)
    (bad / "test-00000-of-00001.parquet").write_bytes(b"not parquet at all")
    assert (
        main(["evaluate", "--model", "baseline:length", "--data", str(tmp_path / "data"), "--output", str(tmp_path)])
        == 2
    )
    err, hint = user_error(capsys.readouterr().err)
    assert "cannot read it as a parquet file" in err and hint is None


def test_checkpoint_without_a_classification_head_is_refused(tmp_path, cache, capsys):
    lm = build_tiny_causal_lm(tmp_path / "lm")
    assert main(["evaluate", "--model", str(lm), "--data", "sample", "--limit", "1", "--output", str(tmp_path)]) == 2
    err, hint = user_error(capsys.readouterr().err)
    assert "no trained classification head" in err and "--model-type judge-pairwise/judge-score" in hint


def test_contriever_falls_back_to_minilm_offline_and_says_so(tmp_path, cache, capsys):
    result = _evaluate(
        tmp_path,
        "--model",
        "baseline:length",
        "--data",
        "sample",
        "--limit",
        "1",
        "--profile-k",
        "2",
        "--retriever",
        "contriever",
    )
    assert result["protocol"]["retriever"] == "minilm"
    assert "using minilm instead" in capsys.readouterr().out


def test_leaderboard_prints_runs_and_writes_a_chart(tmp_path, cache, capsys):
    _evaluate(tmp_path, "--model", "baseline:length", "--data", "sample")
    _evaluate(tmp_path, "--model", "baseline:random", "--data", "sample")
    capsys.readouterr()
    assert main(["leaderboard", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert "baseline:length" in out and "baseline:random" in out and "demo-sample runs" in out
    png = tmp_path / "results" / "leaderboard.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_folder_without_config_json_is_not_a_model_folder(tmp_path, cache, capsys):
    empty = tmp_path / "empty-model"
    empty.mkdir()
    assert main(["evaluate", "--model", str(empty), "--data", "sample", "--output", str(tmp_path / "out")]) == 2
    assert user_error(capsys.readouterr().err) == (
        f"prbench: error: {empty}: not a model folder (no config.json)",
        "pass the folder written by save_pretrained",
    )
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    assert main(["evaluate", "--model", str(weights), "--data", "sample", "--output", str(tmp_path / "out")]) == 2
    assert f"{weights}: not a model folder (it is a file)" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_batch_tokens_default_follows_the_device(monkeypatch):
    from personalized_rewardbench.runs.config import auto_batch_tokens

    assert RunConfig(device="cpu").batch_tokens == auto_batch_tokens("cpu") == 2048
    assert RunConfig(device="cpu", batch_tokens=900).batch_tokens == 900
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert RunConfig(device="auto").batch_tokens == RunConfig(device="cuda").batch_tokens == 16384
    assert RunConfig(device="cpu").batch_tokens == 2048
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert RunConfig(device="auto").batch_tokens == 2048


def test_the_cli_records_the_automatic_token_budget(tmp_path, cache, tiny_rm):
    result = _evaluate(tmp_path, "--model", str(tiny_rm), "--data", "sample", "--limit", "1", "--device", "cpu")
    assert result["runtime"]["batch_tokens"] == 2048


# -- inputs too long even without posts: the question is shortened, the answer never cut -------------------------


@pytest.fixture(scope="module")
def bert96(tmp_path_factory) -> Path:
    """An encoder-style RM (BERT, text-pair input with [CLS]/[SEP], no chat template) with 96 positions."""
    return build_tiny_encoder_reward_model(tmp_path_factory.mktemp("models") / "bert96", max_positions=96)


def _long_question_data(folder: Path) -> Path:
    """Upstream-layout data: long questions (~200 words), short answers, 3 profile posts per user."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from row_factory import make_row

    from personalized_rewardbench.data.schema import FEATURES, SUBSETS

    for index, subset in enumerate(SUBSETS):
        rows = []
        for n in range(2):
            row = make_row(index, n)
            row["question"] = (
                f"Opening words of question {index} {n}. "
                + " ".join(f"detail{i}" for i in range(200))
                + " CLOSING-WORDS?"
            )
            rows.append(row)
        path = folder / subset / "test-00000-of-00001.parquet"
        path.parent.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=FEATURES.arrow_schema), path)
    return folder


@pytest.mark.parametrize("k", [0, 2])
def test_an_encoder_with_96_positions_gets_a_shortened_question_and_the_whole_answer(
    bert96, tmp_path, cache, capsys, k
):
    data = _long_question_data(tmp_path / "data")
    result = _evaluate(
        tmp_path, "--model", str(bert96), "--data", str(data), "--profile-k", str(k), "--retriever", "bm25"
    )
    assert (result["num_pairs"], result["shortened_questions"], result["truncated_pairs"]) == (6, 6, 6 if k else 0)
    assert all(record["question_shortened"] and record["truncated"] == bool(k) for record in _scores(result))
    out = capsys.readouterr().out
    assert "shortened questions (too long even without posts" in out and ": 6" in out
    assert ("lowest-ranked profile posts dropped" in out) == bool(k)

    config = RunConfig(
        model=str(bert96), data=str(data), profile_k=k, retriever="bm25", progress=False, cache_dir=cache
    )
    scorer, items = make_scorer(config), prepare_items(config).items
    assert scorer.max_length == 96
    for item in items:
        fitted = scorer.fit(item)
        assert fitted.item.posts == () and fitted.question_shortened
        assert fitted.item.question.startswith("Opening words of question") and fitted.item.question.endswith(" …")
        assert "CLOSING-WORDS" not in fitted.item.question and len(fitted.item.question) < len(item.question)
        for ids, answer in zip(fitted.inputs, (item.chosen, item.rejected)):
            assert len(ids) <= 96
            text = scorer.tokenizer.decode(ids)
            assert scorer.tokenizer.decode(scorer.tokenizer(answer, add_special_tokens=False)["input_ids"]) in text
        # the longest start that fits: a few more characters of the question would not
        longer = replace(fitted.item, question=item.question[: len(fitted.item.question) + 8] + " …")
        assert max(len(scorer.encode_answer(longer, answer)) for answer in (item.chosen, item.rejected)) > 96


def test_an_answer_longer_than_the_model_is_a_one_line_error(bert96, tmp_path, cache, capsys):
    assert (
        main(["evaluate", "--model", str(bert96), "--data", "sample", "--output", str(tmp_path), "--no-progress"]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert one_error(err) and "Traceback" not in err
    # 113 answer tokens + [CLS] + "…" (the question cut to nothing) + [SEP] twice
    assert err.startswith("prbench: error: item 0_0_0: the chosen answer alone takes 117 tokens")
    assert (
        "over the max length of 96 tokens" in err
        and "use a model with a longer context (this one takes 96 positions)" in err
    )


def _k0_lengths(tiny_rm, cache) -> tuple[list, object, list[int], int]:
    """Items at k 0, the scorer, each item's longer input, and the longest input with the question cut to '…'."""
    config = RunConfig(model=str(tiny_rm), data="sample", progress=False, cache_dir=cache)
    scorer, items = make_scorer(config), prepare_items(config).items
    full = [max(len(scorer.encode_answer(item, a)) for a in (item.chosen, item.rejected)) for item in items]
    alone = max(
        len(scorer.encode_answer(replace(item, question="…"), a))
        for item in items
        for a in (item.chosen, item.rejected)
    )
    return items, scorer, full, alone


def test_max_length_at_k0_shortens_questions_and_shared_prefix_scores_still_equal_full(
    tiny_rm, tmp_path, cache, capsys
):
    items, _scorer, full, alone = _k0_lengths(tiny_rm, cache)
    limit = alone + 10
    over = sum(length > limit for length in full)
    assert 0 < over < len(items)
    results = {}
    for name, extra in (("fast", []), ("full", ["--no-shared-prefix"])):
        results[name] = _evaluate(
            tmp_path / name, "--model", str(tiny_rm), "--data", "sample", "--max-length", str(limit), *extra
        )
    fast, plain = results["fast"], results["full"]
    assert (fast["shortened_questions"], fast["truncated_pairs"], fast["protocol"]["max_length"]) == (over, 0, limit)
    assert fast["runtime"]["shared_prefix"] is True
    for a, b in zip(_scores(fast), _scores(plain)):
        assert (
            abs(a["chosen_score"] - b["chosen_score"]) <= 1e-4
            and abs(a["rejected_score"] - b["rejected_score"]) <= 1e-4
        )
    out = capsys.readouterr().out
    assert (
        "shortened questions (too long even without posts: the question's end cut, marked '…'; "
        f"answers never cut): {over}" in out
    )
    assert "posts dropped" not in out

    config = RunConfig(model=str(tiny_rm), data="sample", max_length=limit, progress=False, cache_dir=cache)
    scorer = make_scorer(config)
    for item, length in zip(items, full):
        fitted = scorer.fit(item)
        (chosen, rejected), truncated = fitted.inputs, fitted.truncated
        assert max(len(chosen), len(rejected)) <= limit and not truncated
        assert (scorer.fit(item).item.question == item.question) == (length <= limit)


def test_max_length_below_the_answer_is_a_one_line_error_naming_the_item(tiny_rm, tmp_path, cache, capsys):
    assert (
        main(
            [
                "evaluate",
                "--model",
                str(tiny_rm),
                "--data",
                "sample",
                "--max-length",
                "16",
                "--output",
                str(tmp_path),
                "--no-progress",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert one_error(err) and "Traceback" not in err
    assert err.startswith("prbench: error: item 0_0_0: the chosen answer alone takes ")
    assert (
        "over the max length of 16 tokens" in err
        and "pass a larger --max-length (this model takes up to 2048 tokens)" in err
    )


def test_a_llama3_style_tokenizer_gets_one_bos_where_render_then_retokenize_gives_two(tmp_path, cache):
    """`--protocol prbench` tokenizes the chat directly: one BOS, where the reference route gives two."""
    from tokenizers.processors import TemplateProcessing
    from transformers import LlamaForSequenceClassification

    from personalized_rewardbench.testing.tiny_models import CHAT_TEMPLATE, llama_config, make_tokenizer

    tokenizer = make_tokenizer()
    tokenizer.add_special_tokens({"bos_token": "<|begin_of_text|>"})
    bos = tokenizer.bos_token_id
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B", special_tokens=[("<|begin_of_text|>", bos)]
    )
    tokenizer.chat_template = "{{ bos_token }}" + CHAT_TEMPLATE  # the template writes the BOS, as Llama-3's does
    folder = tmp_path / "llama3-style"
    LlamaForSequenceClassification(llama_config(tokenizer, num_labels=1)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)

    config = RunConfig(
        model=str(folder),
        data="sample",
        limit=1,
        profile_k=2,
        retriever="bm25",
        template="posts-first",
        progress=False,
        cache_dir=cache,
    )
    item, scorer = prepare_items(config).items[0], make_scorer(config)
    ours = scorer.fit(item).inputs[0]
    chat = reward_chat(item, item.chosen, "posts-first")
    upstream = scorer.tokenizer(scorer.tokenizer.apply_chat_template(chat, tokenize=False))["input_ids"]
    assert ours[:2] != [bos, bos] and ours[0] == bos and ours.count(bos) == 1
    assert upstream[:2] == [bos, bos] and upstream[1:] == ours
