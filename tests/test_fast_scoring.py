"""Fast scoring: the shared prefix gives the full-scoring scores; token-budget batches; padding in results.json."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from transformers import (
    AutoTokenizer,
    BertConfig,
    BertForSequenceClassification,
    MistralForCausalLM,
    MistralForSequenceClassification,
)

from personalized_rewardbench.cli import main
from personalized_rewardbench.data.sources import load_source
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.engine import prepare_items, run_evaluation
from personalized_rewardbench.runs.scorer_factory import make_scorer
from personalized_rewardbench.scoring import shared_prefix as prefix_scoring
from personalized_rewardbench.scoring.base import row_forwards
from personalized_rewardbench.scoring.devices import select_attn_implementation
from personalized_rewardbench.scoring.shared_prefix import shared_prefix_cost
from personalized_rewardbench.testing.tiny_models import (
    build_tiny_mistral,
    build_tiny_reward_model,
    make_tokenizer,
)

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory) -> Path:
    return build_tiny_reward_model(tmp_path_factory.mktemp("models") / "tiny-rm")


@pytest.fixture(scope="module")
def sharp_rm(tmp_path_factory) -> Path:
    """The tiny model with larger random weights: its scores depend strongly on every position, so a wrong
    position id, mask or pooled token moves them far beyond the tolerance."""
    return build_tiny_reward_model(tmp_path_factory.mktemp("models") / "sharp-rm", seed=1, initializer_range=0.3)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PRBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _run(
    model: Path,
    out: Path,
    cache: Path,
    *,
    shared: bool,
    k: int = 3,
    limit: int | None = None,
    batch_tokens: int = 1500,
    log=None,
):
    config = RunConfig(
        model=str(model),
        data="sample",
        limit=limit,
        profile_k=k,
        retriever="bm25",
        batch_tokens=batch_tokens,
        shared_prefix=shared,
        output=out,
        cache_dir=cache,
        progress=False,
    )
    return run_evaluation(config, log=log or (lambda _message: None))


def _assert_same_scores(fast, full) -> None:
    assert [r["id"] for r in fast.records] == [r["id"] for r in full.records]
    for a, b in zip(fast.records, full.records):
        assert abs(a["chosen_score"] - b["chosen_score"]) <= TOLERANCE
        assert abs(a["rejected_score"] - b["rejected_score"]) <= TOLERANCE
        assert (a["chosen_score"] > a["rejected_score"]) == (b["chosen_score"] > b["rejected_score"])
    assert fast.results["accuracy"] == full.results["accuracy"]


@pytest.mark.parametrize("k", [3, 0])
@pytest.mark.parametrize("model", ["tiny_rm", "sharp_rm"])
def test_shared_prefix_scores_equal_full_scores(request, tmp_path, cache, model, k):
    folder = request.getfixturevalue(model)
    fast = _run(folder, tmp_path / "fast", cache, shared=True, k=k)
    full = _run(folder, tmp_path / "full", cache, shared=False, k=k)
    runtime = fast.results["runtime"]
    assert (runtime["shared_prefix"], runtime["shared_prefix_pairs"], runtime["shared_prefix_fallbacks"]) == (
        True,
        24,
        0,
    )
    assert runtime["shared_prefix_attention"] == "split"  # a CPU sdpa model: each prompt attended once per pair
    assert full.results["runtime"]["shared_prefix"] is False
    assert "shared_prefix_attention" not in full.results["runtime"]
    _assert_same_scores(fast, full)
    margins = [abs(r["chosen_score"] - r["rejected_score"]) for r in full.records]
    assert sorted(margins)[len(margins) // 2] > 100 * TOLERANCE or model == "tiny_rm"  # decisions are not ties


def test_shared_batches_mix_prefix_lengths(tiny_rm, cache):
    """The plan really batches pairs of different prefix lengths (padded prefixes with holes in the mask)."""
    config = RunConfig(
        model=str(tiny_rm),
        data="sample",
        profile_k=3,
        retriever="bm25",
        batch_tokens=1500,
        cache_dir=cache,
        progress=False,
    )
    scorer, items = make_scorer(config), prepare_items(config).items
    plan = scorer.plan(items)
    mixed = [batch for batch in plan.batches if len({plan.encodings[i].layout.prefix for i in batch}) > 1]
    assert mixed and len(plan.batches) > 2


def _merging_template_model(tmp_path: Path) -> Path:
    """No separator between the role and the content: `assistant` + `Start ...` tokenizes as `assistants`, `##tart`."""
    folder = build_tiny_reward_model(tmp_path / "merging-rm")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.chat_template = (
        "{% for message in messages %}"
        "{{ '<|im_start|>' + message['role'] + message['content'] + '<|im_end|>' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant' }}{% endif %}"
    )
    tokenizer.save_pretrained(folder)
    return folder


def test_prompt_that_is_not_a_token_prefix_falls_back_and_says_so(tmp_path, cache):
    folder = _merging_template_model(tmp_path)
    rows = [row for rows in load_source("sample").rows.values() for row in rows]
    merging = {
        row["id"] for row in rows if row["chosen"].lower().startswith("s") or row["rejected"].lower().startswith("s")
    }
    assert 0 < len(merging) < len(rows)
    messages: list[str] = []
    fast = _run(folder, tmp_path / "fast", cache, shared=True, k=2, log=messages.append)
    full = _run(folder, tmp_path / "full", cache, shared=False, k=2)
    runtime = fast.results["runtime"]
    assert runtime["shared_prefix"] == "partial"
    assert runtime["shared_prefix_fallbacks"] == len(merging)
    assert runtime["shared_prefix_pairs"] == len(rows) - len(merging)
    assert "not a prefix" in runtime["shared_prefix_note"]
    [notice] = [m for m in messages if m.startswith("shared prefix")]
    assert f"{len(merging)} of {len(rows)} pairs scored in full" in notice and notice in fast.notices
    _assert_same_scores(fast, full)


def test_sliding_window_models_share_exactly_beyond_the_window(tmp_path, cache):
    """Inputs far longer than a 24-token window share their prefix and score what full forwards score."""
    window = 24
    folder = build_tiny_mistral(tmp_path / "tiny-mistral", window)
    fast = _run(folder, tmp_path / "fast", cache, shared=True, k=2, batch_tokens=1200)
    full = _run(folder, tmp_path / "full", cache, shared=False, k=2, batch_tokens=1200)
    plan_config = RunConfig(model=str(folder), data="sample", profile_k=2, retriever="bm25", cache_dir=cache)
    scorer = make_scorer(replace(plan_config, progress=False))
    plan = scorer.plan(prepare_items(plan_config).items)
    assert min(group.layout.prefix for group in plan.encodings) > 4 * window  # the window really cuts the prefix
    runtime = fast.results["runtime"]
    assert (runtime["shared_prefix"], runtime["shared_prefix_fallbacks"]) == (True, 0)
    _assert_same_scores(fast, full)
    margins = [abs(r["chosen_score"] - r["rejected_score"]) for r in full.records]
    assert sorted(margins)[len(margins) // 2] > 100 * TOLERANCE  # sharp enough to catch a shifted window


def test_one_mechanism_for_both_readers_on_a_sliding_window_model(tmp_path):
    """The classifier reader and the judge reader of `shared_prefix` equal full forwards on a tiny Mistral with a
    16-token window, with groups of 1 to 4 suffixes of different lengths in one batch (float32, 1e-4)."""
    rm = MistralForSequenceClassification.from_pretrained(build_tiny_mistral(tmp_path / "rm", 16), dtype=torch.float32)
    lm = MistralForCausalLM.from_pretrained(
        build_tiny_mistral(tmp_path / "lm", 16, causal_lm=True), dtype=torch.float32
    )
    generator = torch.Generator().manual_seed(5)
    tokens = lambda n: torch.randint(5, 300, (n,), generator=generator).tolist()  # noqa: E731
    groups = [(tokens(70), [tokens(9)]), (tokens(41), [tokens(30), tokens(5), tokens(17), tokens(22)])]
    groups.append((tokens(55), [tokens(12), tokens(3)]))
    inputs = [prefix + suffix for prefix, suffixes in groups for suffix in suffixes]
    pad = 0
    assert pad not in {t for ids in inputs for t in ids}
    shared = prefix_scoring.pooled_logits(rm.eval(), groups, pad, "cpu")
    with torch.no_grad():
        alone = torch.cat([rm(torch.tensor([ids])).logits for ids in inputs])
    assert shared.shape == alone.shape and (shared - alone).abs().max().item() < TOLERANCE
    assert alone.std().item() > 100 * TOLERANCE
    last = prefix_scoring.last_logits(lm.eval(), groups, pad, "cpu", last=3)
    with torch.no_grad():
        reference = torch.stack([lm(torch.tensor([ids])).logits[0, -3:] for ids in inputs])
    assert last.shape == reference.shape and (last - reference).abs().max().item() < TOLERANCE
    assert prefix_scoring.padding_sides(rm, "pooled") == ("left", "right")


def test_encoder_models_are_scored_in_full_and_say_so(tmp_path, cache):
    torch.manual_seed(0)
    folder = tmp_path / "tiny-bert"
    tokenizer = make_tokenizer()
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    messages: list[str] = []
    outcome = _run(folder, tmp_path / "out", cache, shared=True, k=0, limit=1, log=messages.append)
    runtime = outcome.results["runtime"]
    assert (runtime["shared_prefix"], runtime["shared_prefix_fallbacks"]) == (False, 3)
    assert "not a decoder-only model" in runtime["shared_prefix_note"]
    assert any(m.startswith("shared prefix: off -- 3 of 3 pairs scored in full") for m in messages)


def test_a_failed_check_before_scoring_turns_sharing_off(tmp_path, cache, monkeypatch, tiny_rm):
    original = prefix_scoring.pooled_logits
    monkeypatch.setattr(
        "personalized_rewardbench.scoring.classifier.pooled_logits",
        lambda *args, **kwargs: original(*args, **kwargs) + 1.0,
    )
    outcome = _run(tiny_rm, tmp_path / "broken", cache, shared=True, k=2, limit=1)
    runtime = outcome.results["runtime"]
    assert (runtime["shared_prefix"], runtime["shared_prefix_fallbacks"]) == (False, 3)
    assert "check before scoring" in runtime["shared_prefix_note"]
    monkeypatch.undo()
    full = _run(tiny_rm, tmp_path / "full", cache, shared=False, k=2, limit=1)
    assert [r["chosen_score"] for r in outcome.records] == [r["chosen_score"] for r in full.records]


@pytest.mark.parametrize("shared", [True, False])
def test_token_budget_batches_respect_the_budget_and_the_padding_is_measured(tiny_rm, cache, shared):
    budget = 1200
    config = RunConfig(
        model=str(tiny_rm),
        data="sample",
        profile_k=3,
        retriever="bm25",
        batch_tokens=budget,
        shared_prefix=shared,
        cache_dir=cache,
        progress=False,
    )
    scorer, items = make_scorer(config), prepare_items(config).items
    plan = scorer.plan(items)
    assert sorted(i for batch in plan.batches for i in batch) == list(range(len(items)))
    pad = scorer.tokenizer.pad_token_id
    forwards: list[tuple[int, int]] = []  # (positions computed, of which padding) per base-model forward
    rows: list[int] = []  # rows per base-model forward

    def record(_module, args, kwargs):
        ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
        forwards.append((ids.numel(), int((ids == pad).sum())))
        rows.append(ids.shape[0])

    handle = scorer.model.base_model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        for batch in plan.batches:
            before = len(forwards)
            scorer.score(plan, batch)
            computed = sum(n for n, _ in forwards[before:])
            if shared:  # the prompts once, then the answers: a lone group's within the budget
                assert computed <= budget or len(batch) == 1
                suffix_forwards = 1
                if len(batch) == 1:
                    group = plan.encodings[batch[0]]
                    suffixes = [len(ids) - group.layout.prefix for ids in group.inputs]
                    suffix_forwards = len(row_forwards(suffixes, budget))
                    assert all(n <= budget or r == 1 for (n, _), r in zip(forwards[before + 1 :], rows[before + 1 :]))
                assert len(forwards) - before == 1 + suffix_forwards
            else:  # full scoring: every forward within the budget, a lone over-long answer excepted
                assert all(n <= budget or r == 1 for (n, _), r in zip(forwards[before:], rows[before:]))
                lengths = [len(ids) for i in batch for ids in plan.encodings[i].inputs]
                assert len(forwards) - before == len(row_forwards(lengths, budget))
    finally:
        handle.remove()
    stats = scorer.runtime_stats(plan)
    observed = sum(p for _, p in forwards) / sum(n for n, _ in forwards)
    assert stats["padding_fraction"] == pytest.approx(observed, abs=1e-4)
    assert stats["tokens_computed"] == sum(n for n, _ in forwards)
    assert 0 < stats["padding_fraction"] < 0.25  # pairs sorted by length: little padding
    if shared:
        assert all(
            shared_prefix_cost([plan.encodings[i].shape for i in batch]) <= budget or len(batch) == 1
            for batch in plan.batches
        )


def test_results_json_runtime_reports_padding_and_batch_tokens(tmp_path, cache, tiny_rm):
    out = tmp_path / "results"
    args = [
        "evaluate",
        "--model",
        str(tiny_rm),
        "--data",
        "sample",
        "--limit",
        "2",
        "--batch-tokens",
        "900",
        "--output",
        str(out),
        "--no-progress",
    ]
    assert main(args) == 0
    [path] = list(out.rglob("results.json"))
    results = json.loads(path.read_text())
    runtime = results["runtime"]
    assert runtime["batch_tokens"] == 900 and runtime["shared_prefix"] is True
    assert isinstance(runtime["padding_fraction"], float) and 0 <= runtime["padding_fraction"] < 1
    assert results["protocol"]["attn_implementation"] == "sdpa"


def test_attention_implementation_choice(monkeypatch):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object() if name == "flash_attn" else None)
    assert select_attn_implementation(cuda, torch.bfloat16) == "flash_attention_2"
    assert select_attn_implementation(cuda, torch.float32) == "sdpa"  # flash-attention needs half precision
    assert select_attn_implementation(cpu, torch.bfloat16) == "sdpa"
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    assert select_attn_implementation(cuda, torch.bfloat16) == "sdpa"


@pytest.mark.parametrize("kind", ["causal", "encoder"])
def test_right_padded_batches_go_without_a_mask_only_on_a_causal_model(tmp_path, cache, kind):
    """A causal decoder's right padding is invisible to its real tokens, so its padded batches skip the mask
    (attention's causal kernel); an encoder sees padding, fails the once-only check and keeps its mask."""
    from personalized_rewardbench.data.eval_items import EvalItem
    from personalized_rewardbench.scoring.shared_prefix import pad_rows
    from personalized_rewardbench.testing.tiny_models import build_tiny_encoder_reward_model

    if kind == "causal":
        folder = build_tiny_reward_model(tmp_path / "rm")
    else:
        folder = build_tiny_encoder_reward_model(tmp_path / "encoder", max_positions=512, initializer_range=0.2)
    config = RunConfig(model=str(folder), data="sample", shared_prefix=False, cache_dir=cache, progress=False)
    scorer = make_scorer(config)
    items = prepare_items(config).items[:4]
    scorer.plan([EvalItem("warm", items[0].subset, "hi", (), "yes", "no")])  # too short to tell: decides nothing
    plan = scorer.plan(items)
    rows = [ids for i in range(4) for ids in plan.encodings[i].inputs]
    assert len(set(map(len, rows))) > 1  # the batch is padded

    masks = []
    handle = scorer.model.register_forward_pre_hook(
        lambda _module, _args, kwargs: masks.append(kwargs.get("attention_mask")), with_kwargs=True
    )
    try:
        batched = scorer.score_sequences(rows)
    finally:
        handle.remove()
    assert len(masks) == 1 and (masks[0] is None) == (kind == "causal")

    ids, mask = pad_rows(rows, scorer.tokenizer.pad_token_id, "right")
    with torch.inference_mode():
        masked = scorer.model(input_ids=ids, attention_mask=mask).logits[:, 0].tolist()
    alone = [scorer.score_sequences([row])[0] for row in rows]  # no padding at all
    assert batched == pytest.approx(masked, abs=1e-6)
    assert batched == pytest.approx(alone, abs=1e-5)
    if kind == "encoder":  # the check is needed: without its mask the encoder scores padded rows differently
        with torch.inference_mode():
            unmasked = scorer.model(input_ids=ids).logits[:, 0].tolist()
        assert max(abs(a - b) for a, b in zip(unmasked, masked)) > 1e-3 * max(map(abs, masked))
