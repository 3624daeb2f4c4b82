"""The split suffix pass (`scoring.prefix_attention`): each prefix attended once per group, merged exactly with the
suffix's own causal attention; it gives full-forward scores, leaves other forwards alone, and a model it cannot
serve keeps the plain pass."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
from transformers import LlamaForSequenceClassification
from transformers.models.llama import modeling_llama

from personalized_rewardbench.data.eval_items import EvalItem, ProfilePost
from personalized_rewardbench.scoring import prefix_attention
from personalized_rewardbench.scoring import shared_prefix as prefix_scoring
from personalized_rewardbench.scoring.base import AnswerGroup
from personalized_rewardbench.scoring.classifier import ClassifierScorer
from personalized_rewardbench.scoring.model_loading import attention_implementation
from personalized_rewardbench.scoring.registry import ModelSpec
from personalized_rewardbench.testing.tiny_models import build_tiny_reward_model

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def sharp_rm(tmp_path_factory) -> Path:
    """A tiny grouped-query Llama RM (4 heads, 2 KV heads) with large weights: every position moves its scores."""
    folder = tmp_path_factory.mktemp("models") / "sharp-gqa-rm"
    return build_tiny_reward_model(folder, seed=3, initializer_range=0.3, num_hidden_layers=3)


def _groups(seed: int = 5):
    """Groups of 1-4 suffixes of different lengths after prefixes of different lengths (padded prefixes)."""
    generator = torch.Generator().manual_seed(seed)
    tokens = lambda n: torch.randint(5, 3000, (n,), generator=generator).tolist()  # noqa: E731
    return [
        (tokens(70), [tokens(9)]),
        (tokens(41), [tokens(30), tokens(5), tokens(17), tokens(22)]),
        (tokens(55), [tokens(12), tokens(3)]),
    ]


def _alone(model, groups) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([model(torch.tensor([p + s])).logits for p, suffixes in groups for s in suffixes])


def test_split_pass_equals_full_forwards_and_the_plain_pass(sharp_rm):
    model = LlamaForSequenceClassification.from_pretrained(sharp_rm, dtype=torch.float32).eval()
    assert prefix_attention.split_supported(model, "cpu")
    groups, pad = _groups(), model.config.pad_token_id
    split = prefix_scoring.pooled_logits(model, groups, pad, "cpu", split=True)
    plain = prefix_scoring.pooled_logits(model, groups, pad, "cpu")
    alone = _alone(model, groups)
    assert split.shape == alone.shape == (7, 1)
    assert (split - alone).abs().max().item() < TOLERANCE
    assert (split - plain).abs().max().item() < TOLERANCE
    assert alone.std().item() > 100 * TOLERANCE  # sharp enough that a wrong column or merge shows
    assert model.config._attn_implementation == "sdpa"  # restored after the pass


def test_split_attention_merges_both_parts_exactly():
    """The merge by log-sum-exp equals one softmax over prefix + causal suffix, with grouped-query heads."""
    torch.manual_seed(0)
    query = torch.randn(3, 4, 6, 8)
    key, value = torch.randn(3, 2, 6, 8), torch.randn(3, 2, 6, 8)
    prefix_keys, prefix_values = torch.randn(2, 2, 10, 8), torch.randn(2, 2, 10, 8)
    states = [[(prefix_keys[:1], prefix_values[:1])], [(prefix_keys[1:, :, :7], prefix_values[1:, :, :7])]]
    prefix = prefix_attention.SplitPrefix(states, [1, 2])
    out = prefix_attention.split_attention(query, key, value, prefix, 0, 0.35)
    for row, (group, columns) in enumerate([(0, slice(0, 10)), (1, slice(0, 7)), (1, slice(0, 7))]):
        keys = torch.cat([prefix_keys[group, :, columns], key[row]], dim=1).repeat_interleave(2, dim=0)
        values = torch.cat([prefix_values[group, :, columns], value[row]], dim=1).repeat_interleave(2, dim=0)
        width = keys.shape[1] - 6
        allowed = torch.ones(6, keys.shape[1], dtype=torch.bool)
        allowed[:, width:] = torch.ones(6, 6, dtype=torch.bool).tril()
        weights = (query[row] @ keys.transpose(-1, -2) * 0.35).masked_fill(~allowed, float("-inf")).softmax(-1)
        assert torch.allclose(out[row], weights @ values, atol=1e-5)


def test_other_forwards_during_a_split_pass_keep_sdpa(sharp_rm):
    """While one thread is inside a split forward (the model's configs name the split attention), another thread's
    masked, padded forward on the same model gets sdpa's own mask and attention: the same logits as before."""
    model = LlamaForSequenceClassification.from_pretrained(sharp_rm, dtype=torch.float32).eval()
    rows = [list(range(10, 40)), list(range(50, 62))]
    ids, mask = prefix_scoring.pad_rows(rows, model.config.pad_token_id, "left")
    with torch.no_grad():
        before = model(input_ids=ids, attention_mask=mask).logits
    during: list[torch.Tensor] = []
    empty = prefix_attention.SplitPrefix([], [])

    def other_thread():
        with torch.no_grad():
            during.append(model(input_ids=ids, attention_mask=mask).logits)

    with prefix_attention.split_forward(model, empty):
        assert model.config._attn_implementation == prefix_attention.ATTENTION
        assert attention_implementation(model) == "sdpa"  # what results.json and /info report meanwhile
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
    assert torch.equal(during[0], before)
    assert model.config._attn_implementation == "sdpa"


def test_split_passes_in_two_threads_at_once_score_as_they_do_alone(sharp_rm):
    """Two threads run split passes on one model at once: both enter their suffix forward (a barrier at layer 0),
    the first ends while the second waits at layer 1, and the second must still run its other layers with the
    split attention (the first thread's end must not switch the model back under it)."""
    model = LlamaForSequenceClassification.from_pretrained(sharp_rm, dtype=torch.float32).eval()
    groups, other = _groups(5), _groups(6)
    pad = model.config.pad_token_id
    alone = [prefix_scoring.pooled_logits(model, g, pad, "cpu", split=True) for g in (groups, other)]
    both_inside, first_inside, first_done = threading.Barrier(2, timeout=60), threading.Event(), threading.Event()
    results: dict[int, torch.Tensor] = {}

    def at_layer_0(*_args) -> None:
        if prefix_attention._ACTIVE.get() is not None:  # in a split forward
            first_inside.set()
            both_inside.wait()

    def at_layer_1(*_args) -> None:
        if prefix_attention._ACTIVE.get() is not None and threading.current_thread().name == "second":
            assert first_done.wait(60)

    def score(n: int, g) -> None:
        results[n] = prefix_scoring.pooled_logits(model, g, pad, "cpu", split=True)
        if n == 0:
            first_done.set()

    hooks = [
        model.base_model.layers[0].register_forward_pre_hook(at_layer_0),
        model.base_model.layers[1].register_forward_pre_hook(at_layer_1),
    ]
    threads = [
        threading.Thread(target=score, args=(n, g), name=("first", "second")[n]) for n, g in enumerate((groups, other))
    ]
    try:
        threads[0].start()
        assert first_inside.wait(60)  # the first thread switched the model before the second starts
        threads[1].start()
        for thread in threads:
            thread.join(120)
    finally:
        for hook in hooks:
            hook.remove()
    assert sorted(results) == [0, 1]
    assert max((results[n] - alone[n]).abs().max().item() for n in (0, 1)) < 1e-6
    assert model.config._attn_implementation == "sdpa"


class _DirectSdpaAttention(modeling_llama.LlamaAttention):
    """Attention that calls sdpa itself instead of the configured attention function (as some remote-code models
    do): the split pass cannot reach it."""

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None, past_key_values=None, **kwargs):
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        query = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        key = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        value = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        query, key = modeling_llama.apply_rotary_pos_emb(query, key, *position_embeddings)
        if past_key_values is not None:
            key, value = past_key_values.update(key, value, self.layer_idx)
        out, _ = sdpa_attention_forward(self, query, key, value, attention_mask, scaling=self.scaling)
        return self.o_proj(out.reshape(*hidden_states.shape[:-1], -1)), None


def test_a_model_the_split_pass_cannot_reach_keeps_the_plain_pass(sharp_rm):
    """The check before the first shared batch catches a model whose attention ignores the split attention: the
    scorer keeps sharing prefixes with the plain pass, and its scores equal full scoring."""
    spec = ModelSpec(max_length=2048)
    scorer = ClassifierScorer(str(sharp_rm), spec, device="cpu", dtype="float32")
    assert scorer._split
    for layer in scorer.model.base_model.layers:
        layer.self_attn.__class__ = _DirectSdpaAttention
    broken = prefix_scoring.pooled_logits(scorer.model, _groups(), scorer.tokenizer.pad_token_id, "cpu", split=True)
    assert (broken - _alone(scorer.model, _groups())).abs().max().item() > 100 * TOLERANCE  # it really is wrong
    posts = tuple(ProfilePost("travel", f"post {n} about trains and maps " * 3) for n in range(3))
    item = EvalItem("split_0", "Art_and_Entertainment", "Which route should I take?", posts, "The coast.", "No.")
    answers = ("Take the coastal line, it has the views you like.", "Fly.", "The night train, as before.")
    scores = scorer.score_answers([AnswerGroup(item, answers)])[0].scores
    assert scorer.shared_prefix and not scorer._split
    assert scorer.split_note.startswith("split attention differed from full scores")
    full = ClassifierScorer(str(sharp_rm), spec, device="cpu", dtype="float32", shared_prefix=False)
    for layer in full.model.base_model.layers:
        layer.self_attn.__class__ = _DirectSdpaAttention
    expected = full.score_answers([AnswerGroup(item, answers)])[0].scores
    assert max(abs(a - b) for a, b in zip(scores, expected)) < TOLERANCE


def test_the_split_pass_is_used_only_where_it_is_exact(sharp_rm):
    model = LlamaForSequenceClassification.from_pretrained(sharp_rm, dtype=torch.float32).eval()
    assert prefix_attention.split_supported(model, "cpu")
    assert not prefix_attention.split_supported(model, "cuda")  # no log-sum-exp kernel wired there: plain pass
    eager = LlamaForSequenceClassification.from_pretrained(sharp_rm, attn_implementation="eager").eval()
    assert not prefix_attention.split_supported(eager, "cpu")
