"""`Scorer.score_answers`: N answers on one prompt (Best-of-N, RL rewards) score what the pairwise path and full
forwards score; the classifier runs the prompt once (shared prefix) and falls back to full scoring."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.engine import prepare_items
from personalized_rewardbench.runs.scorer_factory import make_scorer
from personalized_rewardbench.scoring import classifier as classifier_module
from personalized_rewardbench.scoring.base import AnswerGroup, AnswerScores
from personalized_rewardbench.testing.tiny_models import build_tiny_causal_lm, build_tiny_reward_model

EXTRA = ("A short third answer.", "A fourth answer that goes on for a while, with details about the user's hobby.")


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory) -> Path:
    return build_tiny_reward_model(tmp_path_factory.mktemp("models") / "tiny-rm", seed=3)


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("models") / "tiny-lm", seed=4)


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    config = RunConfig(data="sample", limit=2, profile_k=3, retriever="bm25", cache_dir=cache, progress=False)
    return prepare_items(config, log=lambda _m: None).items


def _config(model, **overrides) -> RunConfig:
    settings = dict(model=str(model), data="sample", dtype="float32", device="cpu", progress=False)
    return RunConfig(**{**settings, **overrides})


def _groups(items) -> list[AnswerGroup]:
    return [AnswerGroup(item, (item.chosen, item.rejected, *EXTRA)) for item in items[:4]]


def _pairs_scored(scorer, items) -> list[tuple[float, float]]:
    plan = scorer.plan(items)
    records = [record for batch in plan.batches for record in scorer.score(plan, batch)]
    order = [i for batch in plan.batches for i in batch]
    by_index = dict(zip(order, records))
    return [(by_index[i]["chosen_score"], by_index[i]["rejected_score"]) for i in range(len(items))]


@pytest.mark.parametrize("name", ["baseline:length", "baseline:random", "baseline:embedding"])
def test_baselines_score_any_number_of_answers_and_the_pair_group_matches_the_pair(name, items):
    scorer = make_scorer(RunConfig(model=name, data="sample", progress=False))
    groups = [AnswerGroup(item, (item.chosen, item.rejected)) for item in items]
    pairs = _pairs_scored(scorer, items)
    assert [result.scores for result in scorer.score_answers(groups)] == pairs
    [four, empty] = scorer.score_answers([_groups(items)[0], AnswerGroup(items[0], ())])
    assert len(four.scores) == 4 and four.scores[:2] == pairs[0] and empty == AnswerScores(())
    if name == "baseline:length":
        assert four.scores == tuple(float(len(answer)) for answer in _groups(items)[0].answers)
    else:
        assert len(set(four.scores)) == 4  # not one value repeated


def test_classifier_groups_share_the_prompt_and_equal_full_forwards(tiny_rm, items, monkeypatch):
    scorer = make_scorer(_config(tiny_rm))
    groups = _groups(items)
    calls = []
    original = classifier_module.pooled_logits
    monkeypatch.setattr(classifier_module, "pooled_logits", lambda *a, **k: calls.append(a[1]) or original(*a, **k))
    results = scorer.score_answers(groups)
    monkeypatch.undo()
    scored = [call for call in calls if len(call[0][1]) == 4]  # the check before scoring uses slices of two
    assert sum(len(call) for call in scored) == len(groups)  # every group: its prompt once, its 4 answers on top
    for group, result in zip(groups, results):
        fitted = scorer.fit(group.item, group.answers)
        full = scorer.score_sequences(list(fitted.inputs))
        assert len(result.scores) == 4
        assert result.scores == pytest.approx(full, abs=1e-4)
        assert len(set(result.scores)) == 4
    pairs = _pairs_scored(scorer, items)
    pair_results = scorer.score_answers([AnswerGroup(item, (item.chosen, item.rejected)) for item in items])
    for pair, result in zip(pairs, pair_results):
        assert result.scores == pytest.approx(pair, abs=1e-5)


def test_classifier_without_shared_prefix_scores_the_same(tiny_rm, items):
    shared = make_scorer(_config(tiny_rm)).score_answers(_groups(items))
    full = make_scorer(_config(tiny_rm, shared_prefix=False)).score_answers(_groups(items))
    for a, b in zip(shared, full):
        assert a.scores == pytest.approx(b.scores, abs=1e-4)


def test_full_scoring_splits_a_group_over_the_token_budget_into_forwards_within_it(tiny_rm, items):
    """A lone group of many long answers (GRPO, Best-of-N) scored in full: each forward stays within
    `batch_tokens` (one over-long answer alone) and the scores are those of one big forward."""
    answers = tuple(f"Answer {n}: " + "about the user's favourite films and books, " * (4 + 3 * n) for n in range(8))
    group = AnswerGroup(items[0], answers)
    one_forward = make_scorer(_config(tiny_rm, shared_prefix=False, batch_tokens=100_000))
    inputs = one_forward.fit(group.item, answers).inputs
    lengths = sorted(map(len, inputs))
    budget = lengths[-1] + lengths[-2] - 1  # the two longest answers no longer fit together; the shortest do
    assert len(inputs) * lengths[-1] > budget and lengths[0] * 2 <= budget
    split = make_scorer(_config(tiny_rm, shared_prefix=False, batch_tokens=budget))
    forwards: list[tuple[int, ...]] = []

    def record(_module, args, kwargs):
        forwards.append(tuple((kwargs["input_ids"] if "input_ids" in kwargs else args[0]).shape))

    split.score_answers([group])  # the model's once-only checks run their own forwards
    handle = split.model.base_model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        [result] = split.score_answers([group])
    finally:
        handle.remove()
    assert len(forwards) > 1 and sum(rows for rows, _ in forwards) == len(answers)
    assert all(rows * columns <= budget or rows == 1 for rows, columns in forwards)
    assert forwards[0] == (1, lengths[-1])  # the longest answer alone
    [whole] = one_forward.score_answers([group])
    assert result.scores == pytest.approx(whole.scores, abs=1e-5)
    assert len(set(result.scores)) == len(answers)


def test_classifier_groups_fit_over_all_answers(tiny_rm, items):
    """Posts go first for the longest answer of the group; then the question is shortened; answers are never cut."""
    scorer = make_scorer(_config(tiny_rm, max_length=200))
    long_answer = "word " * 60
    item = items[0]
    [result] = scorer.score_answers([AnswerGroup(item, (item.chosen, long_answer))])
    fitted = scorer.fit(item, (item.chosen, long_answer))
    assert result.truncated and len(fitted.item.posts) < len(item.posts)
    assert max(map(len, fitted.inputs)) <= 200
    assert result.scores == pytest.approx(scorer.score_sequences(list(fitted.inputs)), abs=1e-4)
    long_question = replace(item, posts=(), question="Why? " * 200)
    [shortened] = scorer.score_answers([AnswerGroup(long_question, ("Yes.", "No.", "Maybe."))])
    assert shortened.question_shortened and not shortened.truncated and len(shortened.scores) == 3
    with pytest.raises(UserError, match="answer 3 of 3 alone takes"):
        scorer.score_answers([AnswerGroup(item, ("Yes.", "No.", "word " * 400))])


def test_score_judge_rates_every_answer_and_the_pair_group_matches_the_pair(tiny_lm, items):
    judge = make_scorer(_config(tiny_lm, model_type="judge-score"))
    pairs = _pairs_scored(judge, items)
    pair_results = judge.score_answers([AnswerGroup(item, (item.chosen, item.rejected)) for item in items])
    for pair, result in zip(pairs, pair_results):
        assert result.scores == pytest.approx(pair, abs=1e-5)
    results = judge.score_answers(_groups(items))
    assert all(len(r.scores) == 4 and all(0 <= s <= 10 for s in r.scores) for r in results)
    for group, result in zip(_groups(items), results):  # each answer alone gives the same rating
        [alone] = judge.score_answers([AnswerGroup(group.item, group.answers[2:3])])
        assert alone.scores[0] == pytest.approx(result.scores[2], abs=1e-4)


def test_score_judge_generate_mode_gives_one_score_per_answer(tiny_lm, items):
    judge = make_scorer(_config(tiny_lm, model_type="judge-score", judge_mode="generate", max_new_tokens=4))
    [result] = judge.score_answers(_groups(items)[:1])
    assert len(result.scores) == 4 and all(s == -1.0 or 0 <= s <= 10 for s in result.scores)


def test_pairwise_judge_refuses_pointwise_scores(tiny_lm, items):
    judge = make_scorer(_config(tiny_lm, model_type="judge-pairwise"))
    with pytest.raises(UserError, match="compares two answers"):
        judge.score_answers(_groups(items))
    assert torch.is_grad_enabled()  # nothing left switched off
