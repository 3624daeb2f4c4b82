"""Scoring throughput: the straightforward path at its best batch size versus the engine, on the same model and pairs.

(a) straightforward -- what the reference evaluator does and a user writes by hand: each answer scored on
    its own in the reference's order (chosen, then rejected, of each item together), fixed batches padded
    to the longest, question + profile through the chat template. Its batch size is swept over
    1, 2, 4, 8, 16 answers (`--batch-sizes`); the fastest one is the **baseline**;
(b) engine -- the scorer `prbench evaluate` builds by default (`make_scorer(RunConfig(model=...))`, on the
    CPU): shared-prefix KV reuse and length-sorted token-budget batching with the automatic
    `--batch-tokens` budget, through `plan()` / `score()` exactly as `prbench evaluate` runs them;
(c) engine without prefix reuse -- the same with `--no-shared-prefix`: token-budget batching alone.

(a) -> (c) is what batching buys, (c) -> (b) what prefix reuse buys; (a) -> (b) is the engine against the
best-tuned baseline. Both sides feed the model the same token ids (the prbench protocol's direct chat
tokenization), so scores agree up to float rounding.

Items: `bench_model.make_items` (10 profile posts of 150-400 tokens, so inputs of about 3,000 tokens at
k 10 as on the real benchmark; question 40-150 tokens, answers 60-130 tokens), with a randomly initialised
Llama-style reward model (4 layers, hidden 512, 30.5k vocabulary), float32 on CPU, at profile-k 10 and k 0.

Method: each measurement is a separate subprocess (load, one warm-up forward, then the timed pass), so its
peak memory is its own: `resource.getrusage(RUSAGE_SELF).ru_maxrss` (peak resident set, which sees torch's
allocations, unlike tracemalloc). The paths run in alternating order (forward, then reversed) `--repeats`
times; throughput is each path's best (fastest) repeat, the measurement least disturbed by other work on
the machine. Time includes tokenization and, for the engine, planning (its one shared-prefix check, once per
model, runs in the warm-up plan).

    .venv/bin/python benchmarks/scoring_throughput.py            # about 10-15 minutes on 2 CPU cores

The last line printed is one JSON object: the best baseline's batch size at k 10 and k 0, the engine's
speedup against it (and against batch 8), the batching / prefix-reuse split, max |score difference|,
decisions identical, and peak-memory ratios engine / best baseline.
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


def _straightforward(model_dir: str, items, batch_size: int):
    """Each answer scored separately in the reference's order (chosen, rejected, next item, ...),
    fixed batches of `batch_size` answers padded to the longest."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from personalized_rewardbench.scoring.prompts import reward_chat

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32).eval()

    def score(chats, counts):
        scores = []
        for start in range(0, len(chats), batch_size):
            batch = tokenizer.apply_chat_template(
                chats[start : start + batch_size], tokenize=True, padding=True, return_dict=True, return_tensors="pt"
            )
            counts[0] += int(batch["attention_mask"].numel() - batch["attention_mask"].sum())
            counts[1] += int(batch["attention_mask"].numel())
            with torch.inference_mode():
                scores += model(**batch).logits[:, 0].float().tolist()
        return scores

    score([reward_chat(items[0], "warm up")], [0, 0])
    after_load = _peak_mib()
    started, cpu_started = time.perf_counter(), time.process_time()
    counts = [0, 0]
    scores = score([reward_chat(item, answer) for item in items for answer in (item.chosen, item.rejected)], counts)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    return (
        scores[0::2],
        scores[1::2],
        {
            "seconds": seconds,
            "cpu_seconds": cpu_seconds,
            "padding_fraction": counts[0] / counts[1],
            "rss_after_load_mib": after_load,
        },
    )


def _engine(model_dir: str, items, batch_tokens: int | None = None, shared_prefix: bool = True):
    from personalized_rewardbench.data.eval_items import EvalItem
    from personalized_rewardbench.runs.config import RunConfig
    from personalized_rewardbench.runs.scorer_factory import make_scorer

    # what `prbench evaluate --model DIR --device cpu [--batch-tokens N] [--no-shared-prefix]` builds (float32 on CPU)
    config = RunConfig(model=model_dir, device="cpu", batch_tokens=batch_tokens, shared_prefix=shared_prefix)
    scorer = make_scorer(config)
    warm = EvalItem("warm", items[0].subset, "warm up", (), "yes", "no")
    warm_plan = scorer.plan([warm])
    scorer.score(warm_plan, warm_plan.batches[0])
    after_load = _peak_mib()
    started, cpu_started = time.perf_counter(), time.process_time()
    records = {}
    plan = scorer.plan(items)
    for batch in plan.batches:
        records.update(zip(batch, scorer.score(plan, batch)))
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    stats = scorer.runtime_stats(plan)
    chosen = [records[i]["chosen_score"] for i in range(len(items))]
    rejected = [records[i]["rejected_score"] for i in range(len(items))]
    return (
        chosen,
        rejected,
        {
            "seconds": seconds,
            "cpu_seconds": cpu_seconds,
            "padding_fraction": stats["padding_fraction"],
            "rss_after_load_mib": after_load,
            "shared_prefix": stats["shared_prefix"],
            "batch_tokens": scorer.batch_tokens,
        },
    )


def worker(path: str, model_dir: str, count: int, k: int, batch_tokens: int | None) -> None:
    import torch

    items = _items(count, k)
    if path.startswith("engine"):
        chosen, rejected, figures = _engine(model_dir, items, batch_tokens, shared_prefix=path == "engine")
    else:
        chosen, rejected, figures = _straightforward(model_dir, items, int(path.split(":")[1]))
    figures.update(
        peak_rss_mib=_peak_mib(), pairs=len(items), threads=torch.get_num_threads(), chosen=chosen, rejected=rejected
    )
    print(json.dumps(figures))


def _measure(path: str, model_dir: Path, count: int, k: int, batch_tokens: int | None) -> dict:
    command = [sys.executable, __file__, "--worker", path, "--model", str(model_dir), "--items", str(count)]
    command += ["--k", str(k)] + (["--batch-tokens", str(batch_tokens)] if batch_tokens is not None else [])
    done = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    )
    if done.returncode != 0:
        sys.exit(f"{path} worker failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _decisions(result: dict) -> list[bool]:
    return [c > r for c, r in zip(result["chosen"], result["rejected"])]


def compare(
    model_dir: Path, count: int, k: int, repeats: int, batch_sizes: list[int], batch_tokens: int | None
) -> dict:
    from alternating import alternate, fastest

    paths = [f"straightforward:{size}" for size in batch_sizes] + ["engine-no-prefix", "engine"]

    def show(path: str, result: dict) -> None:
        print(f"  k={k} {path:<20} {result['pairs'] / result['seconds']:7.2f} pairs/s", flush=True)

    runs = alternate(paths, repeats, lambda path: _measure(path, model_dir, count, k, batch_tokens), show)
    best = fastest(runs)
    peak = {path: max(r["peak_rss_mib"] for r in results) for path, results in runs.items()}
    baseline = min(paths[: len(batch_sizes)], key=lambda path: best[path]["seconds"])
    engine, batching = best["engine"], best["engine-no-prefix"]
    diffs = [
        abs(a - b)
        for other in paths[:-1]
        for key in ("chosen", "rejected")
        for a, b in zip(best[other][key], engine[key])
    ]
    cpu = {path: run["cpu_seconds"] for path, run in fastest(runs, "cpu_seconds").items()}
    cpu_baseline = min(paths[: len(batch_sizes)], key=lambda path: cpu[path])
    return {
        "cpu_best_baseline_batch_size": int(cpu_baseline.split(":")[1]),
        "cpu_speedup_vs_best_baseline": cpu[cpu_baseline] / cpu["engine"],
        "cpu_batching_gain": cpu[cpu_baseline] / cpu["engine-no-prefix"],
        "cpu_prefix_reuse_gain": cpu["engine-no-prefix"] / cpu["engine"],
        "cpu_pairs_per_second": {path: count / cpu[path] for path in paths},
        "k": k,
        "pairs": count,
        "pairs_per_second": {path: best[path]["pairs"] / best[path]["seconds"] for path in paths},
        "padding_fraction": {path: best[path]["padding_fraction"] for path in paths},
        "peak_rss_mib": peak,
        "best_baseline": baseline,
        "best_baseline_batch_size": int(baseline.split(":")[1]),
        "speedup_vs_best_baseline": best[baseline]["seconds"] / engine["seconds"],
        "speedup_vs_batch8": best["straightforward:8"]["seconds"] / engine["seconds"]
        if "straightforward:8" in best
        else None,
        "batching_gain": best[baseline]["seconds"] / batching["seconds"],
        "prefix_reuse_gain": batching["seconds"] / engine["seconds"],
        "peak_memory_ratio": peak["engine"] / peak[baseline],
        "max_abs_score_diff": max(diffs),
        "decisions_identical": all(_decisions(best[path]) == _decisions(engine) for path in paths),
        "engine_shared_prefix": engine["shared_prefix"],
        "engine_batch_tokens": engine["batch_tokens"],
        "threads": engine["threads"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items-k10", type=int, default=12, help="pairs scored at profile-k 10")
    parser.add_argument("--items-k0", type=int, default=120, help="pairs scored at profile-k 0")
    parser.add_argument("--repeats", type=int, default=2, help="alternating repeats of each path")
    parser.add_argument("--batch-sizes", default="1,2,4,8,16", help="straightforward batch sizes swept (answers)")
    parser.add_argument(
        "--batch-tokens", type=int, help="the engine's token budget (default: prbench's automatic one, 2048 on CPU)"
    )
    parser.add_argument("--layers", type=int, default=4, help="layers of the random reward model")
    parser.add_argument("--hidden", type=int, default=512, help="hidden size of the random reward model")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--items", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--k", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.model, args.items, args.k, args.batch_tokens)
        return

    from bench_model import build_model

    sizes = [int(size) for size in args.batch_sizes.split(",")]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="prbench-bench-") as folder:
        model_dir = build_model(Path(folder) / "rm", layers=args.layers, hidden=args.hidden)
        shape = f"{args.layers} layers, hidden {args.hidden}"
        print(f"model: random Llama RM, {shape}, float32, CPU; {os.cpu_count()} cores", flush=True)
        results = {
            k: compare(model_dir, count, k, args.repeats, sizes, args.batch_tokens)
            for k, count in ((10, args.items_k10), (0, args.items_k0))
        }
    for k, r in results.items():
        print(f"\nprofile-k {k}: {r['pairs']} pairs, best of {args.repeats} alternating runs, {r['threads']} threads")
        print(f"  {'':<22}{'pairs/s':>9}{'padding':>9}{'peak RSS':>11}")
        for path, pps in r["pairs_per_second"].items():
            mark = "  <- best baseline" if path == r["best_baseline"] else ""
            print(f"  {path:<22}{pps:9.2f}{r['padding_fraction'][path]:9.1%}{r['peak_rss_mib'][path]:8.0f} MiB{mark}")
        print(
            f"  engine vs best baseline (batch {r['best_baseline_batch_size']}): {r['speedup_vs_best_baseline']:.2f}x "
            f"= batching {r['batching_gain']:.2f}x * prefix reuse {r['prefix_reuse_gain']:.2f}x; "
            f"peak memory {r['peak_memory_ratio']:.2f}x; max |score diff| {r['max_abs_score_diff']:.2e}; "
            f"decisions identical: {r['decisions_identical']}"
        )
        print(
            f"  by CPU time (less sensitive to other work on the machine): best baseline batch "
            f"{r['cpu_best_baseline_batch_size']}, engine {r['cpu_speedup_vs_best_baseline']:.2f}x = batching "
            f"{r['cpu_batching_gain']:.2f}x * prefix reuse {r['cpu_prefix_reuse_gain']:.2f}x"
        )
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    summary = {
        "best_baseline_batch_size_k10": results[10]["best_baseline_batch_size"],
        "best_baseline_batch_size_k0": results[0]["best_baseline_batch_size"],
        "speedup_vs_best_baseline_k10": round(results[10]["speedup_vs_best_baseline"], 3),
        "speedup_vs_best_baseline_k0": round(results[0]["speedup_vs_best_baseline"], 3),
        "batching_gain_k10": round(results[10]["batching_gain"], 3),
        "prefix_reuse_gain_k10": round(results[10]["prefix_reuse_gain"], 3),
        "batching_gain_k0": round(results[0]["batching_gain"], 3),
        "prefix_reuse_gain_k0": round(results[0]["prefix_reuse_gain"], 3),
        "cpu_best_baseline_batch_size_k10": results[10]["cpu_best_baseline_batch_size"],
        "cpu_speedup_vs_best_baseline_k10": round(results[10]["cpu_speedup_vs_best_baseline"], 3),
        "cpu_batching_gain_k10": round(results[10]["cpu_batching_gain"], 3),
        "cpu_prefix_reuse_gain_k10": round(results[10]["cpu_prefix_reuse_gain"], 3),
        "cpu_speedup_vs_best_baseline_k0": round(results[0]["cpu_speedup_vs_best_baseline"], 3),
        "speedup_vs_batch8_k10": round(results[10]["speedup_vs_batch8"] or 0, 3),
        "max_abs_score_diff": max(r["max_abs_score_diff"] for r in results.values()),
        "decisions_identical": all(r["decisions_identical"] for r in results.values()),
        "peak_memory_ratio": round(max(r["peak_memory_ratio"] for r in results.values()), 3),
        "engine_batch_tokens": results[0]["engine_batch_tokens"],
        "items_k10": args.items_k10,
        "items_k0": args.items_k0,
        "model": f"{args.layers} layers, hidden {args.hidden}",
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
