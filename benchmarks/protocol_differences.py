"""Each difference between `--protocol upstream` and `--protocol prbench`, measured one at a time on the
demo sample (24 pairs) with tiny random reward models (`testing/tokenizer_kinds.py`).

Random tiny models say nothing about which protocol is better for real reward models: the figures only
show that each difference changes scores and decisions, and by how much on these inputs. The sample is
not benchmark data. For each difference everything else is held fixed:

- special tokens: render-then-tokenize (upstream) vs the chat template tokenized directly (prbench), same
  messages (k 0), on the `bos` and `cls-sep` tokenizers;
- profile layout: `question + profile` (upstream) vs prbench's labelled posts-first turn, same ranking
  (bm25, k 3), both tokenized directly, on the `bos` tokenizer;
- pad: EOS as pad, so the token before the final EOS is pooled (upstream) vs a distinct pad, the EOS itself
  is pooled (prbench), on the `no-pad` tokenizer, k 0;
- the whole protocol (all of the above at once, k 3, the default max length), per tokenizer;
- truncation at a max length equal to the median input length at k 3 (no sample input reaches 8,192),
  on the `bos` tokenizer: inputs the right cut
  shortens, each losing the end of its answer, and those that lose the whole answer (upstream), vs pairs
  that lose posts and keep every answer whole (prbench).

    .venv/bin/python benchmarks/protocol_differences.py      # about a minute
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from personalized_rewardbench.runs.config import RunConfig  # noqa: E402
from personalized_rewardbench.runs.engine import prepare_items  # noqa: E402
from personalized_rewardbench.runs.scorer_factory import make_scorer  # noqa: E402
from personalized_rewardbench.scoring.prompts import reward_chat  # noqa: E402
from personalized_rewardbench.scoring.protocols import UpstreamInputs, upstream_user_turn  # noqa: E402
from personalized_rewardbench.testing.tokenizer_kinds import build_kind_model  # noqa: E402

#: Weight init of the tiny models: large enough that their random scores depend on the input.
INIT = 0.5


def _items(k: int, cache: Path):
    config = RunConfig(data="sample", profile_k=k, retriever="bm25", progress=False, cache_dir=cache)
    return prepare_items(config, log=lambda _m: None).items


@torch.inference_mode()
def _scores(model, sequences: list[list[int]], pad_id: int | None) -> list[float]:
    """One input at a time (no padding): the model pools the last token that is not `pad_id`."""
    model.config.pad_token_id = pad_id
    out = []
    for ids in sequences:
        logits = model(input_ids=torch.tensor([ids])).logits.float()[0]
        out.append(float(logits[0]) if logits.shape[-1] == 1 else float(torch.softmax(logits, -1)[-1]))
    return out


def _protocol_scores(path: Path, items, protocol: str) -> list[float]:
    """Chosen and rejected scores of every item as `prbench evaluate --protocol PROTOCOL` computes them."""
    scorer = make_scorer(RunConfig(model=str(path), device="cpu", protocol=protocol))
    records = {}
    plan = scorer.plan(items)
    for batch in plan.batches:
        records.update(zip(batch, scorer.score(plan, batch)))
    return [records[i][key] for i in range(len(items)) for key in ("chosen_score", "rejected_score")]


def _direct(tokenizer, chat: list[dict[str, str]]) -> list[int]:
    """prbench's route: the chat template's own tokens."""
    return list(tokenizer.apply_chat_template(chat, tokenize=True, return_dict=True)["input_ids"])


def _compare(a: list[float], b: list[float]) -> dict:
    decide = lambda s: [s[i] > s[i + 1] for i in range(0, len(s), 2)]  # noqa: E731
    return {
        "max_abs_score_diff": round(max(abs(x - y) for x, y in zip(a, b)), 4),
        "decisions_changed": sum(x != y for x, y in zip(decide(a), decide(b))),
        "accuracy_upstream": round(sum(decide(a)) / len(decide(a)), 4),
        "accuracy_prbench": round(sum(decide(b)) / len(decide(b)), 4),
        "pairs": len(decide(a)),
    }


def main() -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    with tempfile.TemporaryDirectory(prefix="prbench-protocols-") as folder:
        root = Path(folder)
        items0, items3 = _items(0, root / "cache"), _items(3, root / "cache")
        results = {}
        for kind in ("bos", "cls-sep", "no-pad"):
            path = build_kind_model(kind, root / kind, initializer_range=INIT)
            tokenizer = AutoTokenizer.from_pretrained(path)
            model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32).eval()
            pad = tokenizer.pad_token_id
            answers = [(item, answer) for item in items0 for answer in (item.chosen, item.rejected)]
            chats = [
                [{"role": "user", "content": upstream_user_turn(i)}, {"role": "assistant", "content": a}]
                for i, a in answers
            ]
            direct = [
                list(tokenizer.apply_chat_template(c, tokenize=True, return_dict=True)["input_ids"]) for c in chats
            ]
            if kind in ("bos", "cls-sep"):
                rendered = [tokenizer(tokenizer.apply_chat_template(c, tokenize=False))["input_ids"] for c in chats]
                results[f"special tokens ({kind})"] = _compare(
                    _scores(model, rendered, pad), _scores(model, direct, pad)
                )
            if kind == "bos":
                answers3 = [(item, answer) for item in items3 for answer in (item.chosen, item.rejected)]
                up = [
                    [{"role": "user", "content": upstream_user_turn(i)}, {"role": "assistant", "content": a}]
                    for i, a in answers3
                ]
                ours = [reward_chat(i, a) for i, a in answers3]
                results["profile layout (k 3)"] = _compare(
                    _scores(model, [_direct(tokenizer, c) for c in up], pad),
                    _scores(model, [_direct(tokenizer, c) for c in ours], pad),
                )
                render = UpstreamInputs(tokenizer, 10**9).render
                lengths = [
                    (len(tokenizer(render(i, None))["input_ids"]), len(tokenizer(render(i, a))["input_ids"]))
                    for i, a in answers3
                ]
                limit = sorted(full for _, full in lengths)[len(lengths) // 2]  # the median input length
                scorer = make_scorer(RunConfig(model=str(path), device="cpu", max_length=limit))
                results["truncation (k 3)"] = {
                    "max_length": limit,
                    "inputs": len(answers3),
                    "upstream_inputs_cut": sum(full > limit for _, full in lengths),  # each loses its answer's end
                    "upstream_answers_lost_entirely": sum(prompt >= limit for prompt, _ in lengths),
                    "prbench_pairs_with_posts_dropped": sum(scorer.fit(item).truncated for item in items3),
                    "prbench_answers_cut": 0,
                }
            whole = [_protocol_scores(path, items3, protocol) for protocol in ("upstream", "prbench")]
            results[f"whole protocol ({kind}, k 3)"] = _compare(*whole)
            if kind == "no-pad":
                eos = tokenizer.eos_token_id
                results["pad (EOS vs distinct)"] = _compare(_scores(model, direct, eos), _scores(model, direct, None))
    width = max(map(len, results))
    for name, figures in results.items():
        print(f"{name:<{width}}  {figures}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
