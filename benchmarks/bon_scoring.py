"""Best-of-N scoring: N candidates of an item on one shared prompt against each candidate scored in full.

Both paths are the scorer `prbench bon score --model MODEL --device cpu` builds
(`make_scorer(RunConfig(model=MODEL, device="cpu"))`), called through `Scorer.score_answers` with one
`AnswerGroup` (the item and its N candidates) per item:

(a) full — `--no-shared-prefix`: every candidate runs with its whole prompt;
(b) shared — the default: the prompt (question + top-k posts) runs once, the N candidates on its KV cache.

Inputs (`bench_model.py`, offline): the random Llama-style reward model (4 layers, hidden 512, 30.5k
vocabulary, float32 on CPU), synthetic items with 10 profile posts of 150-400 tokens (prompts of about
2,800 tokens at k 10) and N synthetic candidates of 250-350 tokens per item. The same model, items and
candidates for both paths, in one process; after a warm-up, the paths alternate `--repeats` times and
each keeps its fastest repeat. Scores are compared candidate by candidate (max |difference|) and by the
ranking of each item's candidates (the order best-of-k uses).

    .venv/bin/python benchmarks/bon_scoring.py --items 4 --n 16      # several minutes on 2 CPU cores

The last line printed is one JSON object with the speedup.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=4)
    parser.add_argument("--n", type=int, default=16, help="candidates per item")
    parser.add_argument("--k", type=int, default=10, help="profile posts in the prompt")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    import torch
    from alternating import alternate, fastest
    from bench_model import build_model, make_answers, make_items

    from personalized_rewardbench.runs.config import RunConfig
    from personalized_rewardbench.runs.scorer_factory import make_scorer
    from personalized_rewardbench.scoring.base import AnswerGroup

    folder = Path(tempfile.mkdtemp(prefix="bon-bench-")) / "rm"
    build_model(folder)
    items = [item.with_posts(args.k) for item in make_items(args.items, seed=0)]
    answers = make_answers(args.items * args.n, seed=1)
    groups = [AnswerGroup(item, tuple(answers[i * args.n : (i + 1) * args.n])) for i, item in enumerate(items)]
    scorers = {
        "full": make_scorer(RunConfig(model=str(folder), device="cpu", shared_prefix=False)),
        "shared": make_scorer(RunConfig(model=str(folder), device="cpu")),
    }
    tokenizer = scorers["shared"].tokenizer
    from personalized_rewardbench.scoring.prompts import user_message

    prompt_tokens = [
        len(tokenizer.apply_chat_template([{"role": "user", "content": user_message(i)}], tokenize=True)["input_ids"])
        for i in items
    ]
    answer_tokens = [len(tokenizer(a, add_special_tokens=False)["input_ids"]) for a in answers]
    for scorer in scorers.values():  # warm-up
        scorer.score_answers(groups[:1])

    def measure(path: str) -> dict:
        started = time.perf_counter()
        scores = [result.scores for result in scorers[path].score_answers(groups)]
        return {"seconds": time.perf_counter() - started, "scores": scores}

    def show(path: str, result: dict) -> None:
        print(f"  {path:<6} {args.items * args.n / result['seconds']:7.2f} candidates/s", flush=True)

    fastest_runs = fastest(alternate(["full", "shared"], args.repeats, measure, show))
    best = {path: run["seconds"] for path, run in fastest_runs.items()}
    scores = {path: run["scores"] for path, run in fastest_runs.items()}
    diff = max(abs(a - b) for f, s in zip(scores["full"], scores["shared"]) for a, b in zip(f, s))
    order = lambda values: sorted(range(len(values)), key=lambda j: (-values[j], j))  # noqa: E731
    identical = all(order(f) == order(s) for f, s in zip(scores["full"], scores["shared"]))
    print(
        json.dumps(
            {
                "items": args.items,
                "n": args.n,
                "profile_k": args.k,
                "prompt_tokens_mean": round(sum(prompt_tokens) / len(prompt_tokens)),
                "answer_tokens_mean": round(sum(answer_tokens) / len(answer_tokens)),
                "threads": torch.get_num_threads(),
                "seconds_full": round(best["full"], 3),
                "seconds_shared": round(best["shared"], 3),
                "speedup": round(best["full"] / best["shared"], 2),
                "max_abs_score_diff": diff,
                "rankings_identical": identical,
            }
        )
    )


if __name__ == "__main__":
    main()
