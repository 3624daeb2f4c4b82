"""PersonalizedReward inside a real TRL GRPOTrainer run (tiny policy, tiny reward model, CPU), and on its own."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from transformers import TrainerCallback

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.rewards import PersonalizedReward, trl_prompt_dataset
from personalized_rewardbench.rewards.entries import parse_posts
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.scorer_factory import make_scorer
from personalized_rewardbench.scoring.base import AnswerGroup
from personalized_rewardbench.testing.tiny_models import build_tiny_causal_lm, build_tiny_reward_model

trl = pytest.importorskip("trl")

K = 2


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("rl-models")
    return build_tiny_causal_lm(root / "policy", seed=1), build_tiny_reward_model(root / "rm", seed=2)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("rl-cache")


def _direct_scorer(rm, **overrides):
    """A separate scorer, built as `prbench evaluate` builds it."""
    options = dict(model=str(rm), profile_k=K, retriever="bm25", device="cpu", dtype="float32", progress=False)
    return make_scorer(RunConfig(**{**options, **overrides}))


def _item(row) -> EvalItem:
    return EvalItem(row["id"], row["subset"], row["question"], parse_posts(row["posts"]), "", "")


def test_grpo_run_changes_the_policy_and_logs_the_direct_scores(models, cache, tmp_path):
    policy, rm = models
    dataset = trl_prompt_dataset("sample", limit=2, profile_k=K, retriever="bm25", cache_dir=cache)
    reward = PersonalizedReward(str(rm), profile_k=K, retriever="bm25", device="cpu", dtype="float32", cache_dir=cache)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=12,
        max_steps=2,
        logging_steps=1,
        learning_rate=5e-2,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        seed=0,
    )
    trainer = trl.GRPOTrainer(model=str(policy), reward_funcs=[reward], args=args, train_dataset=dataset)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    logged: list[dict] = []

    class Snapshot(TrainerCallback):
        def on_log(self, _args, state, _control, logs=None, **_kwargs):
            if logs and "reward" in logs:
                logged.append(
                    {
                        "logs": dict(logs),
                        "prompts": list(trainer._logs["prompt"]),
                        "completions": list(trainer._logs["completion"]),
                        "rewards": list(trainer._logs["rewards"]["personalized_reward"]),
                    }
                )

    trainer.add_callback(Snapshot())
    trainer.train()

    changed = [name for name, p in trainer.model.named_parameters() if not torch.equal(p.detach(), before[name])]
    assert changed, "two GRPO steps left every policy parameter unchanged"
    assert len(logged) == 2

    rows = {row["prompt"][0]["content"]: row for row in dataset}
    direct = _direct_scorer(rm)
    for step in logged:
        assert len(step["rewards"]) == 8
        direct_scores = []
        for prompt, completion, trl_reward in zip(step["prompts"], step["completions"], step["rewards"]):
            row = rows[prompt[0]["content"]]
            answer = completion[0]["content"]
            # one answer alone, no shared prompt: the same score the GRPO group got from its shared prompt
            (alone,) = direct.score_answers([AnswerGroup(_item(row), (answer,))])
            assert trl_reward == pytest.approx(alone.scores[0], rel=1e-4, abs=1e-5)
            direct_scores.append(alone.scores[0])
        mean = sum(direct_scores) / len(direct_scores)
        assert step["logs"]["rewards/personalized_reward/mean"] == pytest.approx(mean, rel=1e-4, abs=1e-5)
        assert step["logs"]["personalized_reward/mean"] == pytest.approx(mean, rel=1e-4, abs=1e-5)
        assert step["logs"]["personalized_reward/truncated"] == 0.0
    assert len({round(r, 6) for step in logged for r in step["rewards"]}) > 1, "the reward model gave one score"


def test_reward_equals_evaluate_scores_and_takes_text_completions(models, cache):
    _policy, rm = models
    dataset = trl_prompt_dataset("sample", limit=1, profile_k=K, retriever="bm25", cache_dir=cache)
    row = dataset[0]
    reward = PersonalizedReward(str(rm), profile_k=K, retriever="bm25", device="cpu", dtype="float32")
    answers = ["Watch Mushishi first.", "Try the manga instead, it is calmer."]
    columns = {name: [row[name]] * 2 for name in ("question", "posts", "id")}
    text_scores = reward([row["prompt"]] * 2, answers, **columns)
    chat_scores = reward([row["prompt"]] * 2, [[{"role": "assistant", "content": a}] for a in answers], **columns)
    assert text_scores == chat_scores
    # prbench evaluate's own path: the pair (chosen, rejected) through plan + score
    scorer = _direct_scorer(rm)
    item = replace(_item(row), chosen=answers[0], rejected=answers[1])
    plan = scorer.plan([item])
    (record,) = scorer.score(plan, plan.batches[0])
    assert text_scores == pytest.approx([record["chosen_score"], record["rejected_score"]], rel=1e-4, abs=1e-5)
    assert text_scores[0] != text_scores[1]


def test_full_profile_column_is_ranked_like_evaluate(models, cache):
    """A `profile` column is ranked with the retriever: the same scores as the dataset's ranked `posts`."""
    from personalized_rewardbench.data.sources import load_source

    _policy, rm = models
    source = load_source("sample")
    raw = source.rows["Art_and_Entertainment"][0]
    ranked = trl_prompt_dataset(
        "sample", subsets=["Art_and_Entertainment"], limit=1, profile_k=K, retriever="bm25", cache_dir=cache
    )[0]
    reward = PersonalizedReward(str(rm), profile_k=K, retriever="bm25", device="cpu", dtype="float32")
    answers = ["One answer.", "Another, longer answer about anime."]
    from_profile = reward(
        None, answers, question=[raw["question"]] * 2, profile=[raw["profile"]] * 2, id=[raw["id"]] * 2
    )
    from_posts = reward(None, answers, question=[ranked["question"]] * 2, posts=[ranked["posts"]] * 2)
    assert from_profile == from_posts


def test_truncation_is_reported_and_logged(models):
    _policy, rm = models
    long_posts = [{"category": "anime", "text": "word " * 300} for _ in range(3)]
    reward = PersonalizedReward(str(rm), profile_k=3, retriever="bm25", device="cpu", dtype="float32", max_length=400)
    metrics: dict[str, float] = {}
    extra: dict[str, list] = {}
    scores = reward(
        None,
        ["A short answer.", "Another short answer."],
        question=["Which anime should I watch?"] * 2,
        posts=[long_posts] * 2,
        log_metric=metrics.__setitem__,
        log_extra=extra.__setitem__,
    )
    assert metrics["personalized_reward/truncated"] == 1.0
    assert extra["personalized_reward/truncated"] == [True, True]
    assert metrics["personalized_reward/mean"] == pytest.approx(sum(scores) / 2)
    scorer = _direct_scorer(rm, profile_k=3, max_length=400)
    item = EvalItem(
        "x", "", "Which anime should I watch?", parse_posts(long_posts), "A short answer.", "Another short answer."
    )
    plan = scorer.plan([item])
    (record,) = scorer.score(plan, plan.batches[0])
    assert record["truncated"] is True
    assert scores == pytest.approx([record["chosen_score"], record["rejected_score"]], rel=1e-4, abs=1e-5)


def test_judge_score_model_gives_rewards(models):
    policy, _rm = models  # a causal LM serves as a (random) 0-10 score judge
    reward = PersonalizedReward(str(policy), model_type="judge-score", profile_k=0, device="cpu", dtype="float32")
    scores = reward(None, ["Yes.", "No, never."], question=["Is Mushishi calm?"] * 2)
    assert len(scores) == 2 and all(isinstance(s, float) for s in scores)
    assert all(0.0 <= s <= 10.0 for s in scores)


def test_bad_setups_are_one_line_errors(models):
    policy, rm = models
    with pytest.raises(UserError, match="pairwise judge"):
        PersonalizedReward(str(policy), model_type="judge-pairwise", device="cpu")
    reward = PersonalizedReward(str(rm), profile_k=K, retriever="bm25", device="cpu", dtype="float32")
    with pytest.raises(UserError, match="'question' column"):
        reward(None, ["answer"], posts=[[]])
    with pytest.raises(UserError, match="'posts' or 'profile' column"):
        reward(None, ["answer"], question=["q?"])
