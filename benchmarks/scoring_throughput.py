"""Scoring throughput: the straightforward hand-written path versus the engine, on the same model and pairs.

(a) straightforward — what a user writes by hand and the upstream evaluator does: every answer scored
    on its own, in dataset order (all chosen answers, then all rejected ones), fixed batches of 8,
    padded to the longest, question + profile rendered through the chat template;
(b) engine — the scorer `prbench evaluate` builds by default (`make_scorer(RunConfig(model=...))`, on
    the CPU): shared prefix and token-budget batching with the automatic `--batch-tokens` budget
    (2048 on CPU), through its `plan()` / `score()` exactly as `prbench evaluate` runs them.
    `--batch-tokens N` measures another budget instead.

Both paths score the same synthetic items (`bench_model.make_items`: 10 profile posts of 150-400
tokens, question 40-150 tokens, answers 60-130 tokens) with the same randomly initialised Llama-style
reward model (4 layers, hidden 512, 30.5k vocabulary), float32 on CPU, at profile-k 10 and at k 0.

Method: each measurement is a separate subprocess (load, one warm-up forward, then the timed pass),
so that its peak memory is its own: `resource.getrusage(RUSAGE_SELF).ru_maxrss` (peak resident set,
which sees torch's allocations, unlike tracemalloc) at the end of the timed pass. The two paths run
alternately (a b, b a, ...) and `--repeats` times; throughput is the best (fastest) repeat of each
path, which is the measurement least disturbed by other work on the machine. Time includes
tokenization and, for the engine, planning (its one shared-prefix check, once per model, runs in the
warm-up plan).

    .venv/bin/python benchmarks/scoring_throughput.py            # about 3-5 minutes on 2 CPU cores

The last line printed is one JSON object (speedups, max |score difference|, decisions identical,
peak-memory ratios engine / straightforward, each the larger of k 10 and k 0: of the peak resident set,
and of its growth above the resident set after loading).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


def _items(count: int, k: int):
    from bench_model import make_items

    return [item.with_posts(k) for item in make_items(count, seed=0)]


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _straightforward(model_dir: str, items):
    """Each answer scored separately in dataset order, batches of 8 padded to the longest."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from personalized_rewardbench.scoring.prompts import reward_chat

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32).eval()

    def score(chats, counts):
        scores = []
        for start in range(0, len(chats), 8):
            batch = tokenizer.apply_chat_template(
                chats[start : start + 8], tokenize=True, padding=True, return_dict=True, return_tensors="pt"
            )
            counts[0] += int(batch["attention_mask"].numel() - batch["attention_mask"].sum())
            counts[1] += int(batch["attention_mask"].numel())
            with torch.inference_mode():
                scores += model(**batch).logits[:, 0].float().tolist()
        return scores

    score([reward_chat(items[0], "warm up")], [0, 0])
    after_load = _peak_mib()
    started = time.perf_counter()
    counts = [0, 0]
    chosen = score([reward_chat(item, item.chosen) for item in items], counts)
    rejected = score([reward_chat(item, item.rejected) for item in items], counts)
    seconds = time.perf_counter() - started
    return (
        chosen,
        rejected,
        {"seconds": seconds, "padding_fraction": counts[0] / counts[1], "rss_after_load_mib": after_load},
    )


def _engine(model_dir: str, items, batch_tokens: int | None = None):
    from personalized_rewardbench.data.eval_items import EvalItem
    from personalized_rewardbench.runs.config import RunConfig
    from personalized_rewardbench.runs.scorer_factory import make_scorer

    # the scorer `prbench evaluate --model MODEL_DIR --device cpu [--batch-tokens N]` builds
    # (dtype auto: float32 on CPU)
    scorer = make_scorer(RunConfig(model=model_dir, device="cpu", batch_tokens=batch_tokens))
    warm = EvalItem("warm", items[0].subset, "warm up", (), "yes", "no")
    warm_plan = scorer.plan([warm])
    scorer.score(warm_plan, warm_plan.batches[0])
    after_load = _peak_mib()
    started = time.perf_counter()
    records = {}
    plan = scorer.plan(items)
    for batch in plan.batches:
        records.update(zip(batch, scorer.score(plan, batch)))
    seconds = time.perf_counter() - started
    stats = scorer.runtime_stats(plan)
    chosen = [records[i]["chosen_score"] for i in range(len(items))]
    rejected = [records[i]["rejected_score"] for i in range(len(items))]
    return (
        chosen,
        rejected,
        {
            "seconds": seconds,
            "padding_fraction": stats["padding_fraction"],
            "rss_after_load_mib": after_load,
            "shared_prefix": stats["shared_prefix"],
            "batch_tokens": scorer.batch_tokens,
        },
    )


def worker(path: str, model_dir: str, count: int, k: int, batch_tokens: int | None) -> None:
    import torch

    items = _items(count, k)
    if path == "engine":
        chosen, rejected, figures = _engine(model_dir, items, batch_tokens)
    else:
        chosen, rejected, figures = _straightforward(model_dir, items)
    figures.update(
        peak_rss_mib=_peak_mib(), pairs=len(items), threads=torch.get_num_threads(), chosen=chosen, rejected=rejected
    )
    print(json.dumps(figures))


def _measure(path: str, model_dir: Path, count: int, k: int, batch_tokens: int | None) -> dict:
    command = [
        sys.executable,
        __file__,
        "--worker",
        path,
        "--model",
        str(model_dir),
        "--items",
        str(count),
        "--k",
        str(k),
    ]
    if batch_tokens is not None:
        command += ["--batch-tokens", str(batch_tokens)]
    done = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    )
    if done.returncode != 0:
        sys.exit(f"{path} worker failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(model_dir: Path, count: int, k: int, repeats: int, batch_tokens: int | None = None) -> dict:
    runs: dict[str, list[dict]] = {"straightforward": [], "engine": []}
    for repeat in range(repeats):
        for path in ("straightforward", "engine") if repeat % 2 == 0 else ("engine", "straightforward"):
            runs[path].append(_measure(path, model_dir, count, k, batch_tokens))
            print(f"  k={k} {path:<15} {runs[path][-1]['pairs'] / runs[path][-1]['seconds']:7.2f} pairs/s", flush=True)
    best = {path: min(results, key=lambda r: r["seconds"]) for path, results in runs.items()}
    straight, engine = best["straightforward"], best["engine"]
    diffs = [abs(a - b) for key in ("chosen", "rejected") for a, b in zip(straight[key], engine[key])]
    decisions = [c > r for c, r in zip(straight["chosen"], straight["rejected"])] == [
        c > r for c, r in zip(engine["chosen"], engine["rejected"])
    ]
    peak = {path: max(r["peak_rss_mib"] for r in results) for path, results in runs.items()}
    above_load = {
        path: max(r["peak_rss_mib"] - r["rss_after_load_mib"] for r in results) for path, results in runs.items()
    }
    return {
        "k": k,
        "pairs": count,
        "pairs_per_second": {path: best[path]["pairs"] / best[path]["seconds"] for path in best},
        "median_seconds": {
            path: sorted(r["seconds"] for r in results)[len(results) // 2] for path, results in runs.items()
        },
        "speedup": straight["seconds"] / engine["seconds"],
        "padding_fraction": {path: best[path]["padding_fraction"] for path in best},
        "peak_rss_mib": peak,
        "peak_above_load_mib": above_load,
        "max_abs_score_diff": max(diffs),
        "decisions_identical": decisions,
        "engine_shared_prefix": engine["shared_prefix"],
        "engine_batch_tokens": engine["batch_tokens"],
        "threads": engine["threads"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items-k10", type=int, default=12, help="pairs scored at profile-k 10")
    parser.add_argument("--items-k0", type=int, default=120, help="pairs scored at profile-k 0")
    parser.add_argument("--repeats", type=int, default=3, help="alternating repeats of each path")
    parser.add_argument(
        "--batch-tokens", type=int, help="the engine's token budget (default: prbench's automatic one, 2048 on CPU)"
    )
    parser.add_argument("--worker", choices=["straightforward", "engine"], help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--items", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--k", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.model, args.items, args.k, args.batch_tokens)
        return

    from bench_model import build_model

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="prbench-bench-") as folder:
        model_dir = build_model(Path(folder) / "rm")
        print(f"model: random Llama RM, 4 layers, hidden 512, float32, CPU; {os.cpu_count()} cores", flush=True)
        results = {
            k: compare(model_dir, count, k, args.repeats, args.batch_tokens)
            for k, count in ((10, args.items_k10), (0, args.items_k0))
        }
    for k, r in results.items():
        pps, pad, peak, above = (
            r["pairs_per_second"],
            r["padding_fraction"],
            r["peak_rss_mib"],
            r["peak_above_load_mib"],
        )
        print(f"\nprofile-k {k}: {r['pairs']} pairs, best of {args.repeats} alternating runs, {r['threads']} threads")
        print(f"  {'':<16}{'pairs/s':>9}{'padding':>9}{'peak RSS':>11}{'above load':>12}")
        for path in ("straightforward", "engine"):
            print(f"  {path:<16}{pps[path]:9.2f}{pad[path]:9.1%}{peak[path]:8.0f} MiB{above[path]:8.0f} MiB")
        print(
            f"  peak memory engine / straightforward: {peak['engine'] / peak['straightforward']:.2f}x total RSS, "
            f"{above['engine'] / above['straightforward']:.2f}x above load"
        )
        median_ratio = r["median_seconds"]["straightforward"] / r["median_seconds"]["engine"]
        print(
            f"  speedup {r['speedup']:.2f}x (median-time ratio {median_ratio:.2f}x); "
            f"engine shared_prefix={r['engine_shared_prefix']}, batch_tokens={r['engine_batch_tokens']}; "
            f"max |score diff| {r['max_abs_score_diff']:.2e}; decisions identical: {r['decisions_identical']}"
        )
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    summary = {
        "speedup_k10": round(results[10]["speedup"], 3),
        "speedup_k0": round(results[0]["speedup"], 3),
        "max_abs_score_diff": max(r["max_abs_score_diff"] for r in results.values()),
        "decisions_identical": all(r["decisions_identical"] for r in results.values()),
        "peak_memory_ratio": round(
            max(r["peak_rss_mib"]["engine"] / r["peak_rss_mib"]["straightforward"] for r in results.values()), 3
        ),
        "peak_memory_ratio_above_load": round(
            max(
                r["peak_above_load_mib"]["engine"] / r["peak_above_load_mib"]["straightforward"]
                for r in results.values()
            ),
            3,
        ),
        "engine_batch_tokens": results[0]["engine_batch_tokens"],
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
