"""Judges follow the classifiers' over-long policy (issue 11, class 9): drop the lowest-ranked posts, then shorten
the question (marked `…`), never cut an answer; record `truncated` / `question_shortened` and the results.json
counts; refuse with one line when the answers alone do not fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_errors import user_error

from personalized_rewardbench import cli
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.engine import prepare_items
from personalized_rewardbench.runs.scorer_factory import make_scorer
from personalized_rewardbench.scoring.base import AnswerGroup
from personalized_rewardbench.testing.tiny_models import build_tiny_causal_lm


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("judge") / "tiny-lm", seed=7)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PRBENCH_CACHE", str(tmp_path / "prbench-cache"))


def _settings(model: Path, out: Path, model_type: str, max_length: int, *extra: str) -> list[str]:
    return [
        "evaluate",
        *("--model", str(model), "--model-type", model_type, "--data", "sample", "--limit", "2"),
        *("--profile-k", "3", "--retriever", "bm25", "--max-length", str(max_length), "--dtype", "float32"),
        *("--output", str(out), "--cache-dir", str(out.parent / "cache"), "--no-progress", *extra),
    ]


def _config(args: list[str]) -> RunConfig:
    value = lambda flag: args[args.index(flag) + 1]  # noqa: E731
    return RunConfig(
        model=value("--model"),
        model_type=value("--model-type"),
        data="sample",
        limit=2,
        profile_k=3,
        retriever="bm25",
        max_length=int(value("--max-length")),
        dtype="float32",
        judge_mode=value("--judge-mode") if "--judge-mode" in args else "logits",
        max_new_tokens=int(value("--max-new-tokens")) if "--max-new-tokens" in args else 512,
        cache_dir=Path(value("--cache-dir")),
        progress=False,
    )


def _contains(sequence: list[int], part: list[int]) -> bool:
    return any(sequence[i : i + len(part)] == part for i in range(len(sequence) - len(part) + 1))


@pytest.mark.parametrize(
    ("model_type", "max_length", "extra", "room"),
    [
        ("judge-pairwise", 450, (), 450),
        ("judge-score", 348, ("--judge-mode", "generate", "--max-new-tokens", "8"), 340),
    ],
)
def test_over_long_prompts_lose_posts_then_the_question_end_never_an_answer(
    tiny_lm, tmp_path, model_type, max_length, extra, room
):
    args = _settings(tiny_lm, tmp_path / "out", model_type, max_length, *extra)
    assert cli.main(args) == 0
    (results_path,) = (tmp_path / "out").rglob("results.json")
    results = json.loads(results_path.read_text())
    records = [json.loads(line) for line in (results_path.parent / "scores.jsonl").read_text().splitlines()]
    shortened = [r["id"] for r in records if r.get("question_shortened")]
    assert 0 < len(shortened) < len(records)  # some questions had to be cut, some fit once the posts were gone
    assert results["shortened_questions"] == len(shortened)
    assert results["truncated_pairs"] == sum(r["truncated"] for r in records) == len(records)
    assert all("question_shortened" not in r for r in records if r["id"] not in shortened)  # unchanged records

    config = _config(args)
    judge, items = make_scorer(config), prepare_items(config, log=lambda _: None).items
    plan = judge.plan(items)
    tokenizer = judge.tokenizer
    words = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    for item, fitted in zip(items, plan.encodings):
        assert max(map(len, fitted.prompts)) <= room
        assert fitted.question_shortened == (item.id in shortened) and fitted.truncated
        for prompt in fitted.prompts:
            assert not _contains(prompt, words(item.posts[-1].text)[:12])  # the lowest-ranked post went first
            answers = [item.chosen, item.rejected] if model_type == "judge-pairwise" else None
            for answer in answers or []:
                assert _contains(prompt, words(answer))  # every answer whole
            question = item.question.split()
            assert _contains(prompt, words(" ".join(question[:3])))  # the question's start stays
            assert _contains(prompt, words(" ".join(question[-6:]))) == (item.id not in shortened)
        if model_type == "judge-score":
            assert _contains(fitted.prompts[0], words(item.chosen)) and _contains(
                fitted.prompts[1], words(item.rejected)
            )
    # The pointwise entry point fits a group the same way.
    groups = [AnswerGroup(item, (item.chosen, item.rejected)) for item in items]
    if model_type == "judge-score":
        fitted = [(r.truncated, r.question_shortened) for r in judge.score_answers(groups)]
        assert fitted == [(p.truncated, p.question_shortened) for p in plan.encodings]


def test_a_judge_refuses_in_one_line_when_the_answers_alone_do_not_fit(tiny_lm, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(_settings(tiny_lm, out, "judge-pairwise", 400)) == 2
    error, hint = user_error(capsys.readouterr().err)
    assert "answers are never cut" in error and "item " in error and "over the 400 tokens" in error
    assert "pass a larger --max-length" in hint
    assert not list(out.rglob("scores.jsonl"))
