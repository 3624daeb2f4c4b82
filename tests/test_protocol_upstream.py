"""`--protocol upstream` reproduces the reference code's classifier inputs token for token, and its scores.

The reference route is the tests' own rewrite (tests/reference_route.py); both sides get the same ranked
posts (one bm25 ranking, shared), on tiny models whose tokenizers add a BOS, add [CLS]/[SEP], have no
chat template, have pad == EOS, or have no pad token.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import reference_route

from personalized_rewardbench.cli import main
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.engine import prepare_items
from personalized_rewardbench.runs.scorer_factory import make_scorer
from personalized_rewardbench.scoring import registry
from personalized_rewardbench.scoring.registry import ModelSpec
from personalized_rewardbench.testing.tiny_models import CHAT_TEMPLATE
from personalized_rewardbench.testing.tokenizer_kinds import build_kind_model

SCORING_KINDS = ("bos", "cls-sep", "pad-eos", "no-pad")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("kinds")
    return {kind: build_kind_model(kind, root / kind) for kind in (*SCORING_KINDS, "no-template")}


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PRBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _config(model: Path, cache: Path, k: int, **overrides) -> RunConfig:
    settings = dict(
        model=str(model),
        data="sample",
        limit=3,
        profile_k=k,
        retriever="bm25",
        protocol="upstream",
        device="cpu",
        progress=False,
        cache_dir=cache,
    )
    return RunConfig(**(settings | overrides))


def _ours(config: RunConfig):
    """(items, scorer, each input's ids in reference order, each input's score) through plan() / score()."""
    items = prepare_items(config, log=lambda _m: None).items
    scorer = make_scorer(config)
    records = {}
    plan = scorer.plan(items)
    for batch in plan.batches:
        records.update(zip(batch, scorer.score(plan, batch)))
    ids = [ids for item in items for ids in scorer.fit(item).inputs]
    scores = [records[i][key] for i in range(len(items)) for key in ("chosen_score", "rejected_score")]
    return items, scorer, ids, scores


def _reference(model: Path, items, max_length: int = reference_route.MAX_LENGTH):
    entries = [
        reference_route.ReferenceInput(
            item.question, [{"category": p.category, "text": p.text} for p in item.posts], answer
        )
        for item in items
        for answer in (item.chosen, item.rejected)
    ]
    return reference_route.score(str(model), entries, max_length=max_length)


@pytest.mark.parametrize("kind", SCORING_KINDS)
@pytest.mark.parametrize("k", [0, 3])
def test_upstream_inputs_and_scores_equal_the_reference_route(models, cache, kind, k):
    items, scorer, ids, scores = _ours(_config(models[kind], cache, k))
    reference_ids, reference_scores = _reference(models[kind], items)
    assert ids == reference_ids
    assert scores == pytest.approx(reference_scores, abs=1e-5)
    assert all(len(item.posts) == k for item in items)
    if k:  # the profile follows the question directly, posts joined by one newline
        text = scorer.tokenizer.decode(ids[0])
        assert "post 1 ( category :" in text and text.index("post 1") > text.index("user")


def test_what_each_tokenizer_kind_does_to_the_upstream_input(models, cache):
    bos_items, bos_scorer, bos_ids, _ = _ours(_config(models["bos"], cache, 0))
    bos = bos_scorer.tokenizer.bos_token_id
    assert bos_ids[0][:3].count(bos) == 2  # rendered BOS + the tokenizer's own
    prbench = make_scorer(_config(models["bos"], cache, 0, protocol="prbench"))
    assert prbench.fit(bos_items[0]).inputs[0] == bos_ids[0][1:]  # prbench: the same ids with one BOS

    _, bert, bert_ids, _ = _ours(_config(models["cls-sep"], cache, 0))
    assert bert_ids[0][0] == bert.tokenizer.cls_token_id and bert_ids[0][-1] == bert.tokenizer.sep_token_id

    for kind in ("pad-eos", "no-pad"):
        _, scorer, ids, _ = _ours(_config(models[kind], cache, 0))
        eos = scorer.tokenizer.eos_token_id
        assert scorer.tokenizer.pad_token_id == eos == scorer.model.config.pad_token_id
        assert ids[0][-1] == eos and ids[0][-2] != eos  # pooling reads the token before the final EOS
        assert scorer.protocol()["eos_pad"] is (kind == "no-pad")


def test_upstream_cuts_at_the_max_length_like_the_reference(models, cache):
    items, scorer, ids, scores = _ours(_config(models["bos"], cache, 3, max_length=64))
    reference_ids, reference_scores = _reference(models["bos"], items, max_length=64)
    assert ids == reference_ids and all(len(x) == 64 for x in ids)
    assert scores == pytest.approx(reference_scores, abs=1e-5)
    assert all(scorer.fit(item).truncated for item in items)  # recorded as truncated
    assert all(len(item.posts) == 3 for item in items)  # no post dropped: the cut takes the answer


def test_no_chat_template_fails_like_the_reference_and_a_registry_template_restores_identity(
    models, cache, monkeypatch, capsys
):
    folder = models["no-template"]
    with pytest.raises(ValueError, match="chat_template is not set"):
        _reference(folder, prepare_items(_config(folder, cache, 0), log=lambda _m: None).items[:1])
    with pytest.raises(UserError, match="has no chat template"):
        make_scorer(_config(folder, cache, 0))
    capsys.readouterr()
    assert (
        main(["evaluate", "--model", str(folder), "--data", "sample", "--protocol", "upstream", "--no-progress"]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("prbench: error: --protocol upstream:") and "\n" not in err

    monkeypatch.setitem(registry.REGISTRY, str(folder), ModelSpec(chat_template=CHAT_TEMPLATE))
    items, _, ids, scores = _ours(_config(folder, cache, 3))
    with_template = folder.parent / "no-template-with-template"
    if not with_template.exists():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.chat_template = CHAT_TEMPLATE
        tokenizer.save_pretrained(with_template)
        for file in folder.iterdir():
            if not (with_template / file.name).exists():
                (with_template / file.name).write_bytes(file.read_bytes())
    reference_ids, reference_scores = _reference(with_template, items)
    assert ids == reference_ids and scores == pytest.approx(reference_scores, abs=1e-5)


def test_template_choice_belongs_to_prbench(cache):
    with pytest.raises(UserError, match="applies to --protocol prbench"):
        RunConfig(protocol="upstream", template="posts-first")
    with pytest.raises(UserError, match="--template upstream is gone"):
        RunConfig(template="upstream")
    with pytest.raises(UserError, match="unknown --protocol"):
        RunConfig(protocol="paper")
