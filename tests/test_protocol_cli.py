"""Both protocols end to end through `prbench evaluate` on the sample, the leaderboard keeps them apart, and
the reference pairwise-judge protocol (one seeded order, the reference's parsing, the user's prompt files)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from personalized_rewardbench.cli import main
from personalized_rewardbench.data.sources import load_source
from personalized_rewardbench.runs.leaderboard import leaderboard_rows
from personalized_rewardbench.scoring.upstream_judge import (
    fill_user_template,
    parse_upstream_verdict,
    upstream_orders,
)
from personalized_rewardbench.testing.tiny_models import build_tiny_causal_lm
from personalized_rewardbench.testing.tokenizer_kinds import build_kind_model

#: Our own stand-ins for the reference's prompt files (same file names and placeholders, our words).
SYSTEM = "You compare two answers written for one user.\n"
USER = "Question: {question}\n\nAnswer A: {Response_A}\n\nAnswer B: {Response_B}\n\nEnd with Result: A or Result: B."


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PRBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _run(out: Path, *args: str) -> tuple[dict, list[dict]]:
    assert main(["evaluate", "--output", str(out), "--no-progress", "--data", "sample", *args]) == 0
    newest = max(out.rglob("results.json"), key=lambda p: p.stat().st_mtime)
    records = [json.loads(line) for line in (newest.parent / "scores.jsonl").read_text().splitlines()]
    return json.loads(newest.read_text()), records


def test_both_protocols_run_end_to_end_and_are_ranked_apart(tmp_path, cache, capsys):
    model = build_kind_model("no-pad", tmp_path / "rm")
    out = tmp_path / "results"
    common = ["--model", str(model), "--profile-k", "3", "--retriever", "bm25", "--device", "cpu"]
    upstream, up_records = _run(out, *common, "--protocol", "upstream")
    prbench, pr_records = _run(out, *common)
    assert upstream["protocol"]["name"] == "upstream" and prbench["protocol"]["name"] == "prbench"
    assert upstream["protocol"]["template"] == "question+profile" and upstream["protocol"]["eos_pad"] is True
    assert prbench["protocol"]["added_pad_token"] is True
    assert upstream["num_pairs"] == prbench["num_pairs"] == 24
    assert [r["chosen_score"] for r in up_records] != [r["chosen_score"] for r in pr_records]
    assert len({p.parent for p in out.rglob("results.json")}) == 2  # different runs, different folders

    rows = leaderboard_rows(out)
    assert sorted(r["input_protocol"] for r in rows) == ["prbench", "upstream"]
    assert [r["protocol"] for r in rows] == ["k=3 bm25", "upstream k=3 bm25"]
    capsys.readouterr()
    assert main(["leaderboard", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.index("[prbench protocol, ranked on its own]") < printed.index(
        "[upstream protocol, ranked on its own]"
    )


def test_reference_parsing_rules():
    assert parse_upstream_verdict("**Result:** B") == "B"
    assert parse_upstream_verdict('<think>Result: A</think>\n"Result": b') == "B"  # after the thinking block
    assert parse_upstream_verdict("Result: A. Later: Result: B") == "A"  # the first result: decides
    assert parse_upstream_verdict("Result: neither") is None
    assert parse_upstream_verdict("<think>Result: B</think>") is None  # nothing after the thinking block
    assert fill_user_template("{question}|{Response_A}|{Response_B}", "q", "a{Response_B}", "b") == "q|ab|b"


def test_upstream_judge_draws_one_seeded_order_and_counts_unparsable_as_a(tmp_path, cache, capsys):
    prompts = tmp_path / "clone" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "pairwise_system.txt").write_text(SYSTEM)
    (prompts / "pairwise_user.txt").write_text(USER)
    judge = build_tiny_causal_lm(tmp_path / "lm")
    args = ["--model", str(judge), "--model-type", "judge-pairwise", "--protocol", "upstream", "--limit", "3"]
    args += ["--max-new-tokens", "6", "--device", "cpu"]

    assert main(["evaluate", "--output", str(tmp_path / "x"), "--data", "sample", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("prbench: error: --protocol upstream judges with the reference code's prompt files")
    assert "\n" not in err

    results, records = _run(tmp_path / "results", *args, "--upstream-prompts", str(tmp_path / "clone"))
    expected = []
    for rows in load_source("sample").rows.values():
        random.seed(42)  # the reference seeds once per subset run
        expected += ["A" if random.random() < 0.5 else "B" for _ in rows[:3]]
    assert [r["chosen_position"] for r in records] == expected
    assert upstream_orders([]) == []
    for record in records:
        parsed = parse_upstream_verdict(record["text"])
        assert record["parse_failed"] is (parsed is None)
        assert record["prediction"] == (parsed or "A")
        assert record["chosen_score"] == float(record["prediction"] == record["chosen_position"])
    assert results["parse_failures"] == sum(r["parse_failed"] for r in records)
    assert results["accuracy"] == pytest.approx(sum(r["chosen_score"] for r in records) / len(records))
    assert results["protocol"]["name"] == "upstream" and results["protocol"]["judge_mode"] == "generate"
    assert results["protocol"]["judge_prompt"].startswith("upstream-files:")

    from personalized_rewardbench.runs.config import RunConfig
    from personalized_rewardbench.runs.scorer_factory import make_scorer

    config = RunConfig(model=str(judge), model_type="judge-pairwise", protocol="upstream", device="cpu")
    config.upstream_prompts = prompts  # the prompts/ folder itself is accepted too
    scorer = make_scorer(config)
    item = load_source("sample").rows["Art_and_Entertainment"][0]
    from personalized_rewardbench.data.eval_items import make_eval_item

    eval_item = make_eval_item(item, "Art_and_Entertainment", None, 0)
    chat = [
        {"role": "system", "content": SYSTEM.strip()},
        {"role": "user", "content": fill_user_template(USER, item["question"], item["chosen"], item["rejected"])},
    ]
    expected_ids = scorer.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
    expected_ids = list(expected_ids["input_ids"] if hasattr(expected_ids, "keys") else expected_ids)
    assert scorer.encode(eval_item, chosen_first=True) == expected_ids

    assert (
        main(
            [
                "evaluate",
                "--output",
                str(tmp_path / "y"),
                "--data",
                "sample",
                *args,
                "--profile-k",
                "2",
                "--retriever",
                "bm25",
                "--upstream-prompts",
                str(prompts),
            ]
        )
        == 2
    )
    assert "sees the question alone" in capsys.readouterr().err
