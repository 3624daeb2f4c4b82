"""LLM judges: verdict parsing, both orders, prompt contents, shared-prefix logits, figures, resume, CLI.

A tiny random Llama (personalized_rewardbench.testing.tiny_models) stands in for the judge: its verdicts are
meaningless but deterministic, and in generate mode it mostly states no verdict, which must be reported as such.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from cli_errors import user_error

from personalized_rewardbench import cli
from personalized_rewardbench.data.sources import load_source
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.engine import prepare_items, run_evaluation
from personalized_rewardbench.runs.leaderboard import leaderboard_rows
from personalized_rewardbench.runs.scorer_factory import judge_settings, make_scorer
from personalized_rewardbench.scoring import judge_backends
from personalized_rewardbench.scoring.judge_backends import shared_prefix_length
from personalized_rewardbench.scoring.judge_prompts import pairwise_chat
from personalized_rewardbench.scoring.judges import (
    NO_RATING_SCORE,
    PairwiseJudge,
    judge_figures,
    make_judge,
)
from personalized_rewardbench.scoring.rating_judge import ScoreJudge
from personalized_rewardbench.scoring.registry import resolve_spec
from personalized_rewardbench.scoring.verdicts import parse_rating, parse_verdict, read_choices, strip_reasoning
from personalized_rewardbench.testing.tiny_models import build_tiny_causal_lm

# --------------------------------------------------------------------------------------------------
# Fixtures and helpers
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("judge") / "tiny-lm")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PRBENCH_CACHE", str(tmp_path / "prbench-cache"))


def _args(model: Path, output: Path, model_type: str = "judge-pairwise", *extra: str) -> list[str]:
    return [
        "evaluate",
        "--model",
        str(model),
        "--model-type",
        model_type,
        "--data",
        "sample",
        "--limit",
        "2",
        "--output",
        str(output),
        "--cache-dir",
        str(output.parent / "cache"),
        "--dtype",
        "float32",
        "--no-progress",
        *extra,
    ]


def _run(args: list[str]) -> tuple[dict, list[dict]]:
    assert cli.main(args) == 0
    output = Path(args[args.index("--output") + 1])
    (results_path,) = output.rglob("results.json")
    records = [json.loads(line) for line in (results_path.parent / "scores.jsonl").read_text().splitlines()]
    return json.loads(results_path.read_text()), records


def _config(model: Path, output: Path, **overrides) -> RunConfig:
    settings = dict(
        model=str(model),
        model_type="judge-pairwise",
        data="sample",
        limit=2,
        output=output,
        cache_dir=output.parent / "cache",
        dtype="float32",
        progress=False,
    )
    settings.update(overrides)
    return RunConfig(**settings)


def _contains(haystack: list[int], needle: list[int]) -> int:
    """Index of `needle` as a contiguous run in `haystack`, or -1."""
    for start in range(len(haystack) - len(needle) + 1):
        if haystack[start : start + len(needle)] == needle:
            return start
    return -1


def _stable(results: dict) -> dict:
    return {key: value for key, value in results.items() if key not in ("runtime", "created_at")}


@pytest.fixture(scope="module")
def pairwise_logits_run(tiny_lm, tmp_path_factory):
    """One uninterrupted logits run, one pair per batch (the reference for the resume test)."""
    output = tmp_path_factory.mktemp("pairwise-logits") / "out"
    return _run(_args(tiny_lm, output, "judge-pairwise", "--batch-tokens", "1"))


# --------------------------------------------------------------------------------------------------
# Reading verdicts and ratings
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("Result: A", "A"),
        ("Answer B is more concrete.\n\nResult: B", "B"),
        ("**Result:** b", "B"),
        ("**Result**: A.", "A"),
        ("result: a", "A"),
        ("Result: [B]", "B"),
        ("Result: Answer A\nThanks for asking!", "A"),
        ("Result: B -- it respects the user's time budget.", "B"),
        ("<think>Result: A looks right... no.</think>\nResult: B", "B"),
        ("<think>I would say Result: A but the user wants", None),  # unclosed reasoning: no verdict
        ("A first thought was Result: A. On reflection, Result: B.", "B"),  # last Result wins
        ("Result: A or Result: B", "B"),
        ("Both answers mention A and B equally.", None),
        ("Result: a tie, really", None),  # the article, not a verdict
        ("The results are in: A", None),
        ("", None),
        ("Result: A/B", None),  # names both: ambiguous
        ("Result: A or B, hard to say", None),
        ("Result: B. Hmm, Result: A/B", None),  # the last statement decides, even when ambiguous
        ("Result: b is better", "B"),  # "b" is never an article
        ("Result: B, A was worse.", "B"),
        ("Result: a is better", "A"),  # "a" before a verb of preference is the letter
        ("Result: Answer: B", "B"),
        ("**Result:** Answer B", "B"),
    ],
)
def test_parse_verdict(text, verdict):
    assert parse_verdict(text) == verdict


def test_strip_reasoning_handles_prompt_opened_think_blocks():
    assert strip_reasoning("long reasoning, Result: A</think>Result: B") == "Result: B"
    assert parse_verdict("long reasoning, Result: A</think>no verdict here") is None


@pytest.mark.parametrize(
    ("text", "rating"),
    [
        ("Rating: 7", 7.0),
        ("**Rating:** 10/10", 10.0),
        ("rating: 3.5 overall", 3.5),
        ("Rating: 4\nRating: 9", 9.0),
        ("<think>Rating: 2</think>Rating: 8", 8.0),
        ("Rating: 11", None),
        ("I'd give it a ten", None),
        ("", None),
        ("Rating: -3", None),
        ("Rating: 7-8", None),
        ("Rating: 6 to 7", None),
        ("Rating: 10.5", None),
        ("Rating: 8/10.", 8.0),
        ("Rating: 7. Final Rating: 7-8", None),
    ],
)
def test_parse_rating(text, rating):
    assert parse_rating(text) == rating


def test_choice_tokens_of_a_lower_casing_tokenizer(tiny_lm):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_lm)
    chat = [{"role": "user", "content": "Which one?"}]
    letters = read_choices(tokenizer, "Result: {}", ["A", "B"], chat)
    assert letters.context == "chat" and tokenizer.convert_ids_to_tokens(list(letters.prefix)) == ["result", ":"]
    assert letters.paths == {"A": (tokenizer.convert_tokens_to_ids("a"),), "B": (tokenizer.convert_tokens_to_ids("b"),)}
    assert letters.chains == [()] and letters.depth == 1
    ratings = read_choices(tokenizer, "Rating: {}", [str(n) for n in range(11)], chat)
    assert all(len(path) == 1 for path in ratings.paths.values())  # WordPiece has "10" as one token
    assert len(set(ratings.paths.values())) == 11 and tokenizer.decode(list(ratings.paths["10"])) == "10"


# --------------------------------------------------------------------------------------------------
# Figures and records from verdicts
# --------------------------------------------------------------------------------------------------


def test_judge_figures_match_a_hand_computation():
    verdicts = [(1, 1), (1, 0), (0, 0), (-1, 1), (1, -1)]
    subsets = ["Art", "Art", "Society", "Society", "Society"]
    records = [
        {"subset": s, "verdict_chosen_first": a, "verdict_chosen_second": b} for s, (a, b) in zip(subsets, verdicts)
    ]
    figures = judge_figures(records)
    assert figures["accuracy"] == 5 / 10
    assert figures["consistent_accuracy"] == 1 / 5
    assert figures["accuracy_chosen_first"] == 3 / 5 and figures["accuracy_chosen_second"] == 2 / 5
    assert figures["position_bias"] == pytest.approx(1 / 5)
    assert figures["no_verdict"] == figures["ties"] == 2
    assert figures["num_verdicts"] == 10
    assert figures["per_subset"]["Art"] == {
        **figures["per_subset"]["Art"],
        "accuracy": 3 / 4,
        "num_pairs": 2,
        "num_verdicts": 4,
        "ties": 0,
        "no_verdict": 0,
    }
    assert figures["per_subset"]["Society"]["accuracy"] == 2 / 6 and figures["per_subset"]["Society"]["no_verdict"] == 2
    assert figures["macro_accuracy"] == pytest.approx((3 / 4 + 2 / 6) / 2)
    # The interval takes the pair as the unit: Wilson at p = 5/10 with n = 5 pairs, not 10 verdicts.
    assert figures["ci95"] == pytest.approx(_wilson(0.5, 5)) and (figures["ci95_unit"], figures["ci95_method"]) == (
        "pairs",
        "wilson",
    )
    assert figures["ci95"][1] - figures["ci95"][0] > _width(_wilson(0.5, 10))
    assert figures["per_subset"]["Art"]["ci95"] == pytest.approx(_wilson(3 / 4, 2))
    assert figures["per_subset"]["Society"]["ci95"] == pytest.approx(_wilson(2 / 6, 3))


def _wilson(p: float, n: int, z: float = 1.959963984540054) -> list[float]:
    """The Wilson score interval written out independently of the metric module."""
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return [max(0.0, center - half), min(1.0, center + half)]


def _width(interval: list[float]) -> float:
    return interval[1] - interval[0]


def test_generated_verdicts_map_to_chosen_in_both_orders():
    # A judge that always answers "A" prefers chosen in the first order only.
    record = PairwiseJudge._from_texts("Result: A", "**Result:** a")
    assert (record["verdict_chosen_first"], record["verdict_chosen_second"]) == (1, 0)
    assert record["chosen_score"] == 0.0 and record["rejected_score"] == 0.0
    record = PairwiseJudge._from_texts("<think>Result: B</think>Result: A", "Result: B")
    assert (record["verdict_chosen_first"], record["verdict_chosen_second"]) == (1, 1)
    assert record["chosen_score"] == 1.0 and record["rejected_score"] == -1.0
    # No verdict stays no verdict (never "A"), and the long text is kept clipped at its end.
    record = PairwiseJudge._from_texts("x" * 5000 + " undecided", "Result: B")
    assert (record["verdict_chosen_first"], record["verdict_chosen_second"]) == (-1, 1)
    assert record["chosen_score"] == 0.5
    assert len(record["text_chosen_first"]) == 2001 and record["text_chosen_first"].endswith("undecided")


def test_logit_margins_become_verdicts_and_scores():
    record = PairwiseJudge._from_logprobs([{"A": -0.5, "B": -1.5}, {"A": -0.2, "B": -3.0}])
    assert record["margin_chosen_first"] == pytest.approx(1.0) and record["verdict_chosen_first"] == 1
    assert record["margin_chosen_second"] == pytest.approx(-2.8) and record["verdict_chosen_second"] == 0
    assert record["chosen_score"] == pytest.approx((math.tanh(0.5) + math.tanh(-1.4)) / 2)
    tie = PairwiseJudge._from_logprobs([{"A": -1.0, "B": -1.0}, {"A": -1.0, "B": -1.0}])
    assert tie["verdict_chosen_first"] == tie["verdict_chosen_second"] == -1


# --------------------------------------------------------------------------------------------------
# Prompts: both orders really asked, nothing of the answer key
# --------------------------------------------------------------------------------------------------


def test_both_orders_are_asked_and_no_answer_key_leaks(tiny_lm, tmp_path):
    config = _config(tiny_lm, tmp_path / "out", profile_k=2, retriever="bm25")
    items = prepare_items(config, log=lambda _: None).items
    judge = make_scorer(config)
    plan = judge.plan(items)  # (checks the shared prefix on a slice of the first prompts once)
    asked: list[list[list[int]]] = []
    original = judge.backend.next_token_logprobs
    judge.backend.next_token_logprobs = lambda groups, ids, **kw: asked.extend(groups) or original(groups, ids, **kw)
    assert judge.reader.chains == [()]  # so the prompts are asked as they are
    for batch in plan.batches:
        judge.score(plan, batch)
    assert len(asked) == len(items)
    tokenizer = judge.tokenizer
    by_prompt = {tuple(group[0]): group for group in asked}
    rows = {row["id"]: row for rows in load_source("sample").rows.values() for row in rows}
    for item in items:
        first, second = by_prompt[tuple(judge.encode_item(item)[0][0])]
        assert first != second
        chosen = tokenizer(item.chosen, add_special_tokens=False)["input_ids"]
        rejected = tokenizer(item.rejected, add_special_tokens=False)["input_ids"]
        marker_a = tokenizer("[Answer A]", add_special_tokens=False)["input_ids"]
        marker_b = tokenizer("[Answer B]", add_special_tokens=False)["input_ids"]
        for prompt, (answer_a, answer_b) in ((first, (chosen, rejected)), (second, (rejected, chosen))):
            a, b = _contains(prompt, marker_a), _contains(prompt, marker_b)
            assert -1 < a < _contains(prompt, answer_a) < b < _contains(prompt, answer_b)
            assert prompt[-2:] == tokenizer("Result:", add_special_tokens=False)["input_ids"]
            post = tokenizer(item.posts[0].text, add_special_tokens=False)["input_ids"]
            assert len(item.posts) == 2 and _contains(prompt, post) > -1
            row = rows[item.id]
            secrets = [row["narrative"]] + [
                aspect[key] for aspect in row["rubric_aspects"] for key in ("aspect", "evidence", "reason")
            ]
            for secret in secrets:
                assert _contains(prompt, tokenizer(secret, add_special_tokens=False)["input_ids"]) == -1
        for chosen_first in (True, False):
            text = json.dumps(pairwise_chat(item, chosen_first))
            assert rows[item.id]["narrative"] not in text
            assert not any(
                aspect["aspect"] in text or aspect["evidence"] in text for aspect in rows[item.id]["rubric_aspects"]
            )


def test_shared_prefix_logits_equal_full_forward(tiny_lm, tmp_path):
    config = _config(tiny_lm, tmp_path / "out", profile_k=3, retriever="bm25")
    items = prepare_items(config, log=lambda _: None).items
    judge = make_scorer(config)
    backend = judge.backend
    groups = [judge.encode_item(item)[0] for item in items]
    for group in groups:
        length = shared_prefix_length(group)
        assert length > 20 and all(seq[:length] == group[0][:length] for seq in group)
    vocab = list(range(len(judge.tokenizer)))
    shared = torch.tensor(backend.next_token_logprobs(groups, vocab, shared_prefix=True))
    assert backend.stats["prefix_tokens_reused"] > 0
    full = torch.tensor(backend.next_token_logprobs(groups, vocab, shared_prefix=False))
    assert shared.shape == (len(items), 2, 1, len(vocab))
    assert (shared - full).abs().max().item() < 1e-4
    alone = torch.tensor(backend.next_token_logprobs([[groups[0][1]]], vocab, shared_prefix=False))[0, 0]
    assert (alone - shared[0, 1]).abs().max().item() < 1e-4  # padding does not move anything
    # The last three positions at once: row k is the next-token distribution after the prompt cut k - 2 tokens short.
    three = torch.tensor(backend.next_token_logprobs(groups, vocab, shared_prefix=True, last=3))
    assert three.shape == (len(items), 2, 3, len(vocab)) and (three[:, :, -1:] - shared).abs().max().item() < 1e-4
    cut = torch.tensor(backend.next_token_logprobs([[groups[1][0][:-2]]], vocab, shared_prefix=False))[0, 0, 0]
    assert (cut - three[1, 0, 0]).abs().max().item() < 1e-4
    stats = backend.runtime_stats()
    assert 0 < stats["padding_fraction"] < 1 and stats["shared_prefix"] is True and "shared_prefix_note" not in stats


def test_batched_greedy_generation_equals_one_by_one(tiny_lm, tmp_path):
    config = _config(tiny_lm, tmp_path / "out", judge_mode="generate")
    items = prepare_items(config, log=lambda _: None).items
    judge = make_scorer(config)
    prompts = [judge.encode_item(item)[0][0] for item in items[:3]]
    assert len(set(map(len, prompts))) > 1  # really padded
    batched = judge.backend.generate(prompts, 6)
    assert batched == [judge.backend.generate([prompt], 6)[0] for prompt in prompts]
    assert all(text for text in batched)


def test_expected_rating():
    assert ScoreJudge._expected({"0": math.log(0.5), "10": math.log(0.5)}) == pytest.approx(5.0)
    assert ScoreJudge._expected({"2": math.log(0.1), "4": math.log(0.3), "9": -math.inf}) == pytest.approx(3.5)


# --------------------------------------------------------------------------------------------------
# End to end through the CLI
# --------------------------------------------------------------------------------------------------


def test_pairwise_logits_run_reports_figures_from_its_verdicts(pairwise_logits_run):
    results, records = pairwise_logits_run
    assert len(records) == 6 and results["model_type"] == "judge-pairwise"
    assert results["protocol"]["judge_mode"] == "logits" and results["protocol"]["judge_prompt"] == "pairwise-v1"
    assert results["protocol"]["backend"] == "transformers" and results["protocol"]["dtype"] == "float32"
    assert "max_new_tokens" not in results["protocol"]
    first = [r["verdict_chosen_first"] for r in records]
    second = [r["verdict_chosen_second"] for r in records]
    for record in records:
        for order in ("first", "second"):
            margin, verdict = record[f"margin_chosen_{order}"], record[f"verdict_chosen_{order}"]
            assert verdict == (1 if margin > 0 else 0 if margin < 0 else -1)
        expected = (math.tanh(record["margin_chosen_first"] / 2) + math.tanh(record["margin_chosen_second"] / 2)) / 2
        assert record["chosen_score"] == pytest.approx(expected) and record["rejected_score"] == pytest.approx(
            -expected
        )
    verdicts = first + second
    assert results["accuracy"] == sum(v == 1 for v in verdicts) / 12
    assert results["consistent_accuracy"] == sum(a == b == 1 for a, b in zip(first, second)) / 6
    assert results["position_bias"] == pytest.approx(sum(v == 1 for v in first) / 6 - sum(v == 1 for v in second) / 6)
    assert results["no_verdict"] == sum(v == -1 for v in verdicts)
    assert results["num_pairs"] == 6 and results["num_verdicts"] == 12
    for subset, figures in results["per_subset"].items():
        mine = [
            v for r in records if r["subset"] == subset for v in (r["verdict_chosen_first"], r["verdict_chosen_second"])
        ]
        assert figures["accuracy"] == sum(v == 1 for v in mine) / len(mine) and figures["num_verdicts"] == 4
    assert results["ci95"] == pytest.approx(_wilson(results["accuracy"], 6))  # per pair, not per verdict


def test_pairwise_generate_reports_unparsable_answers_as_no_verdict(tiny_lm, tmp_path):
    results, records = _run(
        _args(tiny_lm, tmp_path / "out", "judge-pairwise", "--judge-mode", "generate", "--max-new-tokens", "8")
    )
    assert results["protocol"]["judge_mode"] == "generate" and results["protocol"]["max_new_tokens"] == 8
    for record in records:
        assert record["margin_chosen_first"] is None and record["margin_chosen_second"] is None
        for order, chosen_letter in (("first", "A"), ("second", "B")):
            letter = parse_verdict(record[f"text_chosen_{order}"])
            assert record[f"verdict_chosen_{order}"] == (-1 if letter is None else int(letter == chosen_letter))
    verdicts = [r[f"verdict_chosen_{order}"] for r in records for order in ("first", "second")]
    assert results["no_verdict"] == results["ties"] == verdicts.count(-1) > 0
    assert results["accuracy"] == verdicts.count(1) / 12


def test_score_judge_logits_gives_expected_ratings(tiny_lm, tmp_path):
    results, records = _run(_args(tiny_lm, tmp_path / "out", "judge-score"))
    assert results["model_type"] == "judge-score" and results["protocol"]["judge_prompt"] == "score-v1"
    assert results["protocol"]["rating_tokens"] == "0-10"
    for record in records:
        assert 0.0 <= record["chosen_score"] <= 10.0 and record["chosen_score"] == record["rating_chosen"]
        assert record["rejected_score"] == record["rating_rejected"] and record["no_verdict"] == 0
    wins = sum(r["chosen_score"] > r["rejected_score"] for r in records)
    assert results["accuracy"] == wins / 6 and results["no_verdict"] == 0


def test_score_judge_generate_counts_missing_ratings_as_ties(tiny_lm, tmp_path):
    results, records = _run(
        _args(tiny_lm, tmp_path / "out", "judge-score", "--judge-mode", "generate", "--max-new-tokens", "8")
    )
    for record in records:
        assert record["rating_chosen"] == parse_rating(record["text_chosen"])
        assert record["no_verdict"] == (record["rating_chosen"] is None) + (record["rating_rejected"] is None)
        if record["no_verdict"]:
            assert record["chosen_score"] == record["rejected_score"] == NO_RATING_SCORE
    assert results["no_verdict"] == sum(r["no_verdict"] for r in records) > 0
    assert results["no_verdict_pairs"] == results["ties"] == sum(1 for r in records if r["no_verdict"])


def test_interrupted_judge_run_resumes_to_the_same_results(tiny_lm, tmp_path, pairwise_logits_run):
    output = tmp_path / "out"
    config = _config(tiny_lm, output, batch_tokens=1)
    scorer = make_scorer(config)
    score, calls = scorer.score, []

    def crash_after_first_batch(items, batch):
        if calls:
            raise RuntimeError("simulated crash")
        calls.append(batch)
        return score(items, batch)

    scorer.score = crash_after_first_batch
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_evaluation(config, scorer=scorer, log=lambda _: None)
    (partial,) = output.rglob("rank-0.jsonl")
    assert len(partial.read_text().splitlines()) == 1
    results, records = _run(_args(tiny_lm, output, "judge-pairwise", "--batch-tokens", "1"))
    reference_results, reference_records = pairwise_logits_run
    assert records == reference_records
    assert _stable(results) == _stable(reference_results)
    assert results["runtime"]["pairs_scored"] == 5


def test_vllm_backend_without_vllm_fails_in_one_line(tiny_lm, tmp_path, capsys):
    assert cli.main(_args(tiny_lm, tmp_path / "out", "judge-pairwise", "--backend", "vllm")) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "vllm" in error and error.startswith("prbench: error:")


def test_bad_judge_settings_fail_in_one_line(tiny_lm, tmp_path, capsys):
    assert cli.main(_args(tiny_lm, tmp_path / "out", "judge-score", "--max-new-tokens", "0")) == 2
    assert capsys.readouterr().err.count("\n") == 1
    with pytest.raises(UserError, match="judge type"):
        make_judge(judge_settings(_config(tiny_lm, tmp_path / "x")), resolve_spec(str(tiny_lm)), "judge-listwise")


def test_leaderboard_lists_judges_beside_other_scorers(pairwise_logits_run, tmp_path):
    results, _ = pairwise_logits_run
    run_folder = tmp_path / "board"
    assert (
        cli.main(
            [
                "evaluate",
                "--model",
                "baseline:length",
                "--data",
                "sample",
                "--limit",
                "2",
                "--output",
                str(run_folder),
                "--no-progress",
            ]
        )
        == 0
    )
    judge_results = run_folder / "judge" / "results.json"
    judge_results.parent.mkdir(parents=True)
    judge_results.write_text(json.dumps(results))
    rows = {row["type"]: row for row in leaderboard_rows(run_folder)}
    assert set(rows) == {"baseline", "judge-pairwise"}
    assert (
        rows["judge-pairwise"]["protocol"].endswith("logits")
        and rows["judge-pairwise"]["accuracy"] == results["accuracy"]
    )


# --------------------------------------------------------------------------------------------------
# Generated verdicts end to end through the engine (a stub backend with canned texts)
# --------------------------------------------------------------------------------------------------

# Per item in dataset order: (chosen shown as A, chosen shown as B) -> expected verdicts.
CANNED = [
    ("<think>Result: B? no.</think> **Result:** a", "Result: B", (1, 1)),
    ("Result: B", "Result: B", (0, 1)),
    ("I cannot decide between them.", "**Result:** b", (-1, 1)),
    ("Result: A", "Result: A", (1, 0)),
    ("Result: A/B", "<think>long reasoning</think>\nResult: b is better", (-1, 1)),
    ("Result: Answer: B", "Result: A", (0, 0)),
]


class CannedBackend:
    """The judge backend interface, answering `generate` from a table of canned texts per prompt."""

    name = "canned"

    def __init__(self):
        from personalized_rewardbench.testing.tiny_models import make_tokenizer

        self.tokenizer = make_tokenizer()
        self.revision, self.device, self.max_length, self.shared_prefix_note = "canned", "cpu", 2048, ""
        self.texts: dict[tuple[int, ...], str] = {}

    def describe(self) -> dict:
        return {"dtype": "none"}

    def runtime_stats(self, counters=None) -> dict:
        return {"generated_tokens": 0}

    def generate(self, sequences: list[list[int]], max_new_tokens: int, counters=None) -> list[str]:
        return [self.texts[tuple(seq)] for seq in sequences]

    def next_token_logprobs(self, *args, **kwargs):
        raise AssertionError("generate mode reads no logits")


def test_canned_generations_give_hand_computed_figures(tmp_path):
    config = _config(Path("canned-judge"), tmp_path / "out", judge_mode="generate", max_new_tokens=16)
    judge = PairwiseJudge(judge_settings(config), resolve_spec("canned-judge"), CannedBackend())
    items = prepare_items(config, log=lambda _: None).items
    assert [item.subset.split("_")[0] for item in items] == [
        "Art",
        "Art",
        "Lifestyle",
        "Lifestyle",
        "Society",
        "Society",
    ]
    for item, (first, second, _) in zip(items, CANNED):
        prompts = judge.encode_item(item)[0]
        judge.backend.texts[tuple(prompts[0])], judge.backend.texts[tuple(prompts[1])] = first, second
    outcome = run_evaluation(config, scorer=judge, log=lambda _: None)
    results, records = outcome.results, outcome.records
    assert [(r["verdict_chosen_first"], r["verdict_chosen_second"]) for r in records] == [v for _, _, v in CANNED]
    assert [r["chosen_score"] for r in records] == [1.0, 0.0, 0.5, 0.0, 0.5, -1.0]
    # By hand: first order right 2 of 6, second order right 4 of 6; only the first pair right in both.
    assert results["accuracy"] == 6 / 12 and results["consistent_accuracy"] == 1 / 6
    assert results["accuracy_chosen_first"] == 2 / 6 and results["accuracy_chosen_second"] == 4 / 6
    assert results["position_bias"] == pytest.approx(-2 / 6)
    assert results["no_verdict"] == results["ties"] == 2 and results["accuracy_ties_half"] == 7 / 12
    assert results["num_pairs"] == 6 and results["num_verdicts"] == 12
    assert results["ci95"] == pytest.approx(_wilson(0.5, 6))
    expected = {"Art": (3 / 4, 0), "Lifestyle": (2 / 4, 1), "Society": (1 / 4, 1)}
    for subset, figures in results["per_subset"].items():
        accuracy, no_verdict = expected[subset.split("_")[0]]
        assert (figures["accuracy"], figures["no_verdict"], figures["num_pairs"], figures["num_verdicts"]) == (
            accuracy,
            no_verdict,
            2,
            4,
        )
        assert figures["ci95"] == pytest.approx(_wilson(accuracy, 2))
    assert results["macro_accuracy"] == pytest.approx(0.5)
    on_disk = json.loads((outcome.run_dir / "results.json").read_text())
    assert on_disk["accuracy"] == 0.5 and on_disk["no_verdict"] == 2 and on_disk["protocol"]["backend"] == "canned"
    # The console table counts pairs and verdicts apart: no "6 pairs, 12 ties".
    from personalized_rewardbench.runs.results import format_table

    header, *rows = format_table(results).splitlines()
    assert header.split()[1:5] == ["pairs", "verdicts", "no", "verdict"]
    assert rows[-2].split()[2:6] == ["6", "12", "2", "50.00%"]


# --------------------------------------------------------------------------------------------------
# Refusals and notices
# --------------------------------------------------------------------------------------------------


def test_a_checkpoint_without_language_model_head_is_refused(tmp_path, capsys):
    from personalized_rewardbench.testing.tiny_models import build_tiny_reward_model

    model = build_tiny_reward_model(tmp_path / "tiny-rm")
    capsys.readouterr()
    assert cli.main(_args(model, tmp_path / "out", "judge-pairwise")) == 2
    error, hint = user_error(capsys.readouterr().err)
    assert "lm_head.weight is missing" in error and "not tied" in error and "--model-type classifier" in hint


def test_max_new_tokens_must_leave_room_for_the_prompt(tiny_lm, tmp_path, capsys):
    assert (
        cli.main(
            _args(tiny_lm, tmp_path / "out", "judge-pairwise", "--judge-mode", "generate", "--max-new-tokens", "2048")
        )
        == 2
    )
    error = capsys.readouterr().err
    assert (
        error.count("\n") == 1
        and "--max-new-tokens 2048 leaves no room" in error
        and "takes at most 2048 tokens" in error
    )


def test_shared_prefix_fallback_is_announced_and_recorded(tiny_lm, tmp_path, monkeypatch, pairwise_logits_run):
    from personalized_rewardbench.scoring.shared_prefix import Support

    recurrent = Support(False, "the model's cache is not a plain DynamicCache (recurrent or linear-attention layers)")
    monkeypatch.setattr(judge_backends, "shared_prefix_support", lambda model: recurrent)
    logged: list[str] = []
    outcome = run_evaluation(_config(tiny_lm, tmp_path / "out"), log=logged.append)
    assert any(
        line.startswith("shared prefix: off -- the model's cache is not a plain DynamicCache") for line in logged
    )
    assert logged == [n for n in outcome.notices if n in logged]
    runtime = outcome.results["runtime"]
    assert runtime["shared_prefix"] is False and "not a plain DynamicCache" in runtime["shared_prefix_note"]
    assert (
        runtime["full_forward_calls"] > 0
        and runtime["shared_prefix_calls"] == 0
        and 0 <= runtime["padding_fraction"] < 1
    )
    reference = pairwise_logits_run[1]
    for mine, theirs in zip(outcome.records, reference):
        assert mine["margin_chosen_first"] == pytest.approx(theirs["margin_chosen_first"], abs=1e-4)


# --------------------------------------------------------------------------------------------------
# Registry quirks
# --------------------------------------------------------------------------------------------------


def test_registry_patterns_and_judge_entries():
    assert resolve_spec("internlm/internlm2-7b-reward").trust_remote_code
    assert resolve_spec("internlm/internlm2-1_8b-reward").trust_remote_code
    assert not resolve_spec("internlm/internlm2-7b").trust_remote_code
    assert resolve_spec("Qwen/Qwen2.5-1.5B-Instruct").model_type == "judge-pairwise"
    assert resolve_spec("Qwen/Qwen3-4B").logits_template_kwargs == {"enable_thinking": False}
    assert resolve_spec("Qwen/Qwen2.5-1.5B-Instruct").logits_template_kwargs == {}
    assert resolve_spec("Skywork/Skywork-Reward-V2-Qwen3-0.6B").model_type == "classifier"


def test_template_switches_come_from_the_registry(tiny_lm, tmp_path):
    from dataclasses import replace

    from personalized_rewardbench.testing.tiny_models import CHAT_TEMPLATE

    # A Qwen3-like template: an empty think block in the generation prompt when enable_thinking is false.
    thinking = CHAT_TEMPLATE.replace(
        "{{ '<|im_start|>assistant\n' }}",
        "{{ '<|im_start|>assistant\n' }}"
        "{% if enable_thinking is defined and not enable_thinking %}{{ '<think>\n\n</think>\n\n' }}{% endif %}",
    )
    assert thinking != CHAT_TEMPLATE
    spec = replace(
        resolve_spec(str(tiny_lm)), chat_template=thinking, logits_template_kwargs={"enable_thinking": False}
    )
    item = prepare_items(_config(tiny_lm, tmp_path / "out"), log=lambda _: None).items[0]
    logits = make_judge(judge_settings(_config(tiny_lm, tmp_path / "a")), spec, "judge-pairwise")
    prompt = logits.tokenizer.decode(logits.encode_item(item)[0][0])
    assert prompt.replace(" ", "").replace("\n", "").endswith("assistant<think></think>result:")
    assert logits.protocol()["chat_template_kwargs"] == {"enable_thinking": False}
    generate = make_judge(
        judge_settings(_config(tiny_lm, tmp_path / "b", judge_mode="generate")), spec, "judge-pairwise"
    )
    assert "think" not in generate.tokenizer.decode(generate.encode_item(item)[0][0])
    assert "chat_template_kwargs" not in generate.protocol()


def test_a_template_that_drops_assistant_turns_falls_back_to_plain_tokenization(tiny_lm, tmp_path):
    from dataclasses import replace

    from personalized_rewardbench.testing.tiny_models import CHAT_TEMPLATE

    user_only = CHAT_TEMPLATE.replace(
        "{% for message in messages %}", "{% for message in messages if message['role'] != 'assistant' %}"
    )
    spec = replace(resolve_spec(str(tiny_lm)), chat_template=user_only)
    config = _config(tiny_lm, tmp_path / "out")
    judge = make_judge(judge_settings(config), spec, "judge-pairwise")
    assert judge.reader.context == "text" and judge.protocol()["forced_prefix_context"] == "text"
    assert judge.protocol()["forced_prefix"] == "result :"  # "Result: A" alone, lower-cased by WordPiece
    plan = judge.plan(prepare_items(config, log=lambda _: None).items)
    assert any("cannot end on an assistant message" in notice for notice in judge.notices(plan))
