"""The prefix cache: a prompt run in one scoring call is not run again in the next, and its answers score what
they score without the cache (split and plain suffix passes)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from transformers import LlamaForSequenceClassification

from personalized_rewardbench.data.eval_items import EvalItem, ProfilePost
from personalized_rewardbench.scoring.base import AnswerGroup
from personalized_rewardbench.scoring.classifier import ClassifierScorer
from personalized_rewardbench.scoring.prefix_cache import PrefixCache
from personalized_rewardbench.scoring.registry import ModelSpec
from personalized_rewardbench.scoring.shared_prefix import pooled_logits
from personalized_rewardbench.testing.tiny_models import (
    build_tiny_mistral,
    build_tiny_reward_model,
)

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def sharp_rm(tmp_path_factory) -> Path:
    return build_tiny_reward_model(tmp_path_factory.mktemp("models") / "sharp-rm", seed=4, initializer_range=0.3)


@pytest.fixture(scope="module")
def sliding_rm(tmp_path_factory) -> Path:
    """A Mistral RM with a 16-token window: plain pass, prefixes padded on the left."""
    return build_tiny_mistral(tmp_path_factory.mktemp("models") / "sliding-rm", 16)


def _item(n: int, posts: int) -> EvalItem:
    profile = tuple(
        ProfilePost("cooking", f"note {n}.{p}: slow braises, sharp knives, cast iron " * 2) for p in range(posts)
    )
    return EvalItem(
        f"cache_{n}", "Lifestyle_and_Personal_Development", f"What should I cook tonight ({n})?", profile, "", ""
    )


ANSWERS = ("A braise: you have the time.", "Pasta.", "Something in the cast iron pan.", "Order in.", "Soup again.")


def _scorer(folder: Path, **options) -> ClassifierScorer:
    return ClassifierScorer(str(folder), ModelSpec(max_length=2048), device="cpu", dtype="float32", **options)


class PrefixRows:
    """Counts the rows and tokens every base-model forward embeds (prefix passes are the long ones)."""

    def __init__(self, model):
        self.calls: list[tuple[int, int]] = []
        model.base_model.embed_tokens.register_forward_hook(lambda _m, args, _out: self.calls.append(args[0].shape))


@pytest.mark.parametrize("kind", ["split", "plain", "sliding"])
def test_a_kept_prompt_is_not_run_again_and_scores_the_same(request, kind):
    folder = request.getfixturevalue("sliding_rm" if kind == "sliding" else "sharp_rm")
    scorer = _scorer(folder)
    cache = scorer.keep_prefixes(4096)
    assert isinstance(cache, PrefixCache)
    scorer.score_answers([AnswerGroup(_item(0, 1), ANSWERS[:1])])  # the model's checks run here, before counting
    if kind == "plain":
        scorer._split = False
    assert scorer._split is (kind == "split")
    rows = PrefixRows(scorer.model)
    first = scorer.score_answers([AnswerGroup(_item(1, 3), ANSWERS[:2])])
    assert (cache.hits, cache.misses) == (0, 2)  # item 0's scoring (the check runs without the cache), item 1's
    assert [shape[0] for shape in rows.calls] == [1, 2]  # item 1's prompt, then its 2 answers
    rows.calls.clear()
    # item 1's other answers come in the next call, with a new prompt of another length (padded with item 1's)
    second = scorer.score_answers([AnswerGroup(_item(1, 3), ANSWERS[2:]), AnswerGroup(_item(2, 2), ANSWERS[:2])])
    assert (cache.hits, cache.misses) == (1, 3)
    prompt_run, suffix_run = rows.calls
    assert prompt_run[0] == 1 and suffix_run[0] == 5  # only item 2's prompt runs; 3 + 2 answers on the prompts
    reference = _scorer(folder)  # no cache
    expected = reference.score_answers(
        [
            AnswerGroup(_item(1, 3), ANSWERS[:2]),
            AnswerGroup(_item(1, 3), ANSWERS[2:]),
            AnswerGroup(_item(2, 2), ANSWERS[:2]),
        ]
    )
    full = _scorer(folder, shared_prefix=False).score_answers([AnswerGroup(_item(1, 3), ANSWERS)])[0].scores
    got = [*first[0].scores, *second[0].scores, *second[1].scores]
    want = [score for group in expected for score in group.scores]
    assert got == pytest.approx(want, abs=TOLERANCE)
    assert got[:5] == pytest.approx(list(full), abs=TOLERANCE)
    assert max(got) - min(got) > 100 * TOLERANCE  # the scores tell the answers apart: a wrong prefix would show


def test_the_cache_keeps_at_most_its_tokens_and_only_what_it_is_given(sharp_rm):
    scorer = _scorer(sharp_rm)
    prompt = len(scorer.encode_prompt(_item(0, 1)))
    cache = scorer.keep_prefixes(2 * prompt + prompt // 2)  # room for two of these prompts
    for n in range(4):
        scorer.score_answers([AnswerGroup(_item(n, 1), ANSWERS[:2])])
        assert 0 < cache.tokens <= cache.max_tokens
    assert cache.figures()["prefixes"] == 2 and cache.misses == 4 and cache.hits == 0
    scorer.score_answers([AnswerGroup(_item(3, 1), ANSWERS[2:])])  # the most recent prompts are the ones kept
    assert cache.hits == 1
    scorer.score_answers([AnswerGroup(_item(0, 1), ANSWERS[2:])])
    assert cache.misses == 5
    assert _scorer(sharp_rm, shared_prefix=False).keep_prefixes(300) is None  # nothing to keep without sharing


def test_a_prompt_twice_in_one_batch_runs_once(sharp_rm):
    model = LlamaForSequenceClassification.from_pretrained(sharp_rm, dtype=torch.float32).eval()
    generator = torch.Generator().manual_seed(2)
    tokens = lambda n: torch.randint(5, 3000, (n,), generator=generator).tolist()  # noqa: E731
    prompt, other = tokens(40), tokens(25)
    groups = [(prompt, [tokens(6), tokens(9)]), (other, [tokens(4)]), (prompt, [tokens(7)])]
    rows = PrefixRows(model)
    cache = PrefixCache(1000)
    kept = pooled_logits(model, groups, model.config.pad_token_id, "cpu", split=False, cache=cache)
    assert [shape[0] for shape in rows.calls] == [2, 4]  # two distinct prompts, then the 4 answers
    assert (cache.misses, cache.figures()["prefixes"]) == (3, 2)
    with torch.no_grad():
        alone = torch.cat([model(torch.tensor([p + a])).logits for p, answers in groups for a in answers])
    assert (kept - alone).abs().max().item() < TOLERANCE


@pytest.mark.parametrize("kind", ["split", "plain", "sliding"])
@pytest.mark.parametrize("kept", ["no cache", "a cache", "a cache too small for the prompt"])
def test_a_lone_group_over_the_budget_runs_its_prompt_once_and_its_answers_within_the_budget(request, kind, kept):
    folder = request.getfixturevalue("sliding_rm" if kind == "sliding" else "sharp_rm")
    group = AnswerGroup(_item(5, 3), ANSWERS)
    whole = _scorer(folder, batch_tokens=100_000)
    prompt = len(whole.encode_prompt(group.item))
    suffixes = sorted(len(ids) - prompt for ids in whole.fit(group.item, group.answers).inputs)
    budget = suffixes[-1] + suffixes[-2] - 1  # the two longest answers no longer fit in one forward
    scorer = _scorer(folder, batch_tokens=budget)
    room = {"no cache": None, "a cache": 4096, "a cache too small for the prompt": prompt - 1}[kept]
    cache = None if room is None else scorer.keep_prefixes(room)
    scorer.score_answers([AnswerGroup(_item(0, 1), ANSWERS[:1])])  # the model's checks run here, before counting
    if kind == "plain":
        scorer._split = whole._split = False
    assert scorer._split is (kind == "split")
    rows = PrefixRows(scorer.model)
    [result] = scorer.score_answers([group])
    prompt_run, *suffix_runs = rows.calls
    assert tuple(prompt_run) == (1, prompt)  # the prompt once
    assert len(suffix_runs) > 1 and sum(shape[0] for shape in suffix_runs) == len(ANSWERS)
    assert all(shape[0] * shape[1] <= budget or shape[0] == 1 for shape in suffix_runs)
    if cache is not None:  # one lookup per prompt, however many forwards its answers take: item 0's, then this one
        kept_prompts = 2 if room > prompt else 1  # item 0's short prompt fits in either cache
        assert (cache.hits, cache.misses, cache.figures()["prefixes"]) == (0, 2, kept_prompts)
    [expected] = whole.score_answers([group])
    assert result.scores == pytest.approx(expected.scores, abs=TOLERANCE)
    assert max(result.scores) - min(result.scores) > 100 * TOLERANCE
    # a pair of the two longest answers: its plan's figures count the forwards that run
    lengths = [len(ids) for ids in whole.fit(group.item, group.answers).inputs]
    longest = sorted(range(len(ANSWERS)), key=lambda n: -lengths[n])[:2]
    pair = replace(group.item, chosen=ANSWERS[longest[0]], rejected=ANSWERS[longest[1]])
    plan = scorer.plan([pair])
    if cache is not None:
        cache.clear()
    rows.calls.clear()
    [record] = scorer.score(plan, plan.batches[0])
    assert len(rows.calls) == 3  # the prompt, then each answer alone
    assert plan.stats["tokens_computed"] == sum(shape[0] * shape[1] for shape in rows.calls)
    assert (record["chosen_score"], record["rejected_score"]) == pytest.approx(
        [expected.scores[n] for n in longest], abs=TOLERANCE
    )
