"""Reading a judge's choice from next-token probabilities with a byte-level BPE tokenizer.

Byte-level BPE tokenizers with the Qwen2 pre-tokenizer regex (Qwen2/2.5/3; Llama-3 is alike) write
"Rating: 7" as ``Rating`` ``:`` ``Ġ`` ``7`` and "Rating: 10" as ``Rating`` ``:`` ``Ġ`` ``1`` ``0``: the
judge must be asked after the lone space, and 10 read over two positions. A small such tokenizer is
trained here offline (tokenizers' BpeTrainer) and put on a tiny random Llama causal LM.
"""

from __future__ import annotations

import doctest
import math
from pathlib import Path

import pytest
import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

from personalized_rewardbench.data.sources import load_source
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.engine import prepare_items, run_evaluation
from personalized_rewardbench.runs.scorer_factory import make_scorer
from personalized_rewardbench.scoring import judge_backends, judges, registry, verdicts
from personalized_rewardbench.scoring.judge_prompts import PAIRWISE_SYSTEM, SCORE_SYSTEM
from personalized_rewardbench.scoring.verdicts import choice_logprobs, read_choices
from personalized_rewardbench.testing.tiny_models import CHAT_TEMPLATE, llama_config

QWEN2_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]


def make_bpe_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer with the Qwen2 split regex (digits one by one), ChatML template."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    rows = [row for rows in load_source("sample").rows.values() for row in rows]
    corpus = [
        PAIRWISE_SYSTEM,
        SCORE_SYSTEM,
        "Rating: 10",
        "Rating: 7",
        "Result: A",
        "Result: B",
        " ".join(map(str, range(11))),
    ]
    corpus += [row[key] for row in rows for key in ("question", "chosen", "rejected")]
    trainer = trainers.BpeTrainer(
        vocab_size=1500,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus * 3, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<|im_start|>", eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


@pytest.fixture(scope="module")
def bpe_lm(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bpe") / "bpe-lm"
    torch.manual_seed(1)
    tokenizer = make_bpe_tokenizer()
    LlamaForCausalLM(llama_config(tokenizer, max_position_embeddings=8192)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PRBENCH_CACHE", str(tmp_path / "prbench-cache"))


def _config(model: Path, output: Path, model_type: str, **overrides) -> RunConfig:
    settings = dict(
        model=str(model),
        model_type=model_type,
        data="sample",
        limit=1,
        output=output,
        cache_dir=output.parent / "cache",
        dtype="float32",
        progress=False,
    )
    return RunConfig(**{**settings, **overrides})


def test_the_tokenizer_splits_like_qwen():
    tokenizer = make_bpe_tokenizer()
    pieces = lambda text: tokenizer.convert_ids_to_tokens(tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    assert pieces("Rating: 7") == ["Rating", ":", "Ġ", "7"]
    assert pieces("Rating: 10") == ["Rating", ":", "Ġ", "1", "0"]
    assert pieces("Result: A") == ["Result", ":", "ĠA"]


def test_forced_prefix_ends_where_the_choices_part():
    tokenizer = make_bpe_tokenizer()
    chat = [{"role": "system", "content": "Judge."}, {"role": "user", "content": "Which one?"}]
    ratings = read_choices(tokenizer, "Rating: {}", [str(n) for n in range(11)], chat)
    assert ratings.context == "chat"
    assert tokenizer.convert_ids_to_tokens(list(ratings.prefix)) == ["Rating", ":", "Ġ"]  # the lone space is forced
    token = tokenizer.convert_tokens_to_ids
    assert ratings.paths["7"] == (token("7"),) and ratings.paths["10"] == (token("1"), token("0"))
    assert ratings.chains == [(token("1"),)] and ratings.depth == 2  # one extra position reads the "0" of 10
    letters = read_choices(tokenizer, "Result: {}", ["A", "B"], chat)
    assert tokenizer.convert_ids_to_tokens(list(letters.prefix)) == ["Result", ":"]
    assert letters.paths == {"A": (token("ĠA"),), "B": (token("ĠB"),)} and letters.depth == 1


def test_choice_probabilities_along_multi_token_paths():
    # P(1) = P("1") * (1 - P("0" | "1")); P(10) = P("1") * P("0" | "1"); a choice others do not extend keeps its mass.
    table = {(): {1: math.log(0.6), 2: math.log(0.3)}, (1,): {0: math.log(0.25), 2: math.log(0.5)}}
    got = choice_logprobs({"1": (1,), "2": (2,), "10": (1, 0)}, lambda node, token: table[node][token])
    assert {c: math.exp(v) for c, v in got.items()} == pytest.approx({"1": 0.45, "2": 0.3, "10": 0.15})
    got = choice_logprobs({"1": (1,), "10": (1, 0)}, lambda node, token: {(): {1: 0.0}, (1,): {0: 0.0}}[node][token])
    assert got["1"] == -math.inf and got["10"] == 0.0


def test_score_judge_reads_ratings_after_the_space_and_ten_over_two_tokens(bpe_lm, tmp_path):
    config = _config(bpe_lm, tmp_path / "out", "judge-score")
    judge = make_scorer(config)
    token = judge.tokenizer.convert_tokens_to_ids
    protocol = judge.protocol()
    assert protocol["forced_prefix"] == "Rating: " and protocol["multi_token_choices"] == ["10"]
    assert protocol["rating_tokens"] == "0-10" and protocol["forced_prefix_context"] == "chat"
    outcome = run_evaluation(config, scorer=judge, log=lambda _: None)
    items = prepare_items(config, log=lambda _: None).items
    model = judge.backend.model
    for item, record in zip(items, outcome.records):
        prompts = judge.encode_item(item).prompts
        for prompt, score in zip(prompts, (record["chosen_score"], record["rejected_score"])):
            assert judge.tokenizer.convert_ids_to_tokens(prompt[-3:]) == ["Rating", ":", "Ġ"]
            with torch.no_grad():  # by hand: one full forward over the prompt followed by "1"
                logprobs = model(torch.tensor([prompt + [token("1")]])).logits[0, -2:].log_softmax(-1)
            root, after_one = logprobs[0].exp(), logprobs[1].exp()
            mass = {n: root[token(str(n))].item() for n in range(10)}
            mass[10] = mass[1] * after_one[token("0")].item()
            mass[1] -= mass[10]
            assert score == pytest.approx(sum(n * p for n, p in mass.items()) / sum(mass.values()), abs=1e-4)
    assert outcome.results["protocol"]["forced_prefix"] == "Rating: "
    assert (
        outcome.results["runtime"]["shared_prefix_calls"] > 0 and outcome.results["runtime"]["full_forward_calls"] == 0
    )


def test_pairwise_judge_with_byte_level_letters(bpe_lm, tmp_path):
    config = _config(bpe_lm, tmp_path / "out", "judge-pairwise")
    judge = make_scorer(config)
    assert judge.protocol()["forced_prefix"] == "Result:" and judge.protocol()["multi_token_choices"] == []
    items = prepare_items(config, log=lambda _: None).items
    plan = judge.plan(items)
    record = judge.score(plan, [0])[0]
    first, _second = judge.encode_item(items[0])[0]
    with torch.no_grad():
        logprobs = judge.backend.model(torch.tensor([first])).logits[0, -1].log_softmax(-1)
    token = judge.tokenizer.convert_tokens_to_ids
    assert record["margin_chosen_first"] == pytest.approx(
        (logprobs[token("ĠA")] - logprobs[token("ĠB")]).item(), abs=1e-4
    )


@pytest.mark.parametrize("module", [verdicts, registry, judges, judge_backends])
def test_module_examples(module):
    assert doctest.testmod(module).failed == 0
