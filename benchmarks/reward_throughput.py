"""Reward throughput for RL: (a) a GRPO-shaped batch scored with the shared prompt against each completion
in full; (b) the reward server with 32 concurrent clients against one request at a time.

Inputs (`bench_model`, built offline): the randomly initialised Llama-style reward model of realistic
shape scaled to a small CPU (4 layers, hidden 512, 30.5k vocabulary; float32 on CPU) and synthetic items
with upstream-like profiles: 10 posts of 150-400 tokens, so prompts of about 2,800 tokens at k 10.
Completions are synthetic texts of 270-330 tokens. Both parts score the same model and completions.

(a) `--prompts` prompts x `--completions` completions (8 x 8, GRPO's shape), through the reward path
    (`rewards.entries.score_entries` -> `Scorer.score_answers`, one AnswerGroup per prompt):
    - shared: the scorer `prbench evaluate` builds (shared prefix on): each prompt runs once, its
      completions on its KV cache;
    - full: the same model and settings with `--no-shared-prefix`: every completion scored in full.
(b) the reward server (`rewards.server`, uvicorn on 127.0.0.1, default limits) scoring the same
    prompt x completion entries, one completion per request (the reference server's request shape):
    - concurrent: 32 client threads post at once; the micro-batcher groups what arrives together, and the
      prefix cache (on by default) keeps a prompt whose completions land in two consecutive calls;
    - sequential: one request at a time, each waiting for the previous answer, with nothing kept between
      requests (`--prefix-cache-tokens 0`): each request scored on its own, as the reference server does.
    The ratio is sequential / concurrent. Also reported from the same run: both passes without the cache
    (micro-batching alone) and one request at a time with the cache (what the cache alone gives). The cache
    starts empty for every pass.

Every path is warmed up once, then runs `--repeats` times in alternating order (forwards, then backwards;
`alternating.py`, as in `scoring_throughput.py` and `bon_scoring.py`), so that the machine's drift falls on
every path alike. Each ratio is given three ways: by each path's best (fastest) repeat, the headline; by the
median repeats (with 2 repeats, their means); and by process CPU time (server and client threads included).
A pass's time includes tokenization, fitting and HTTP. Scores are compared between all passes (max
|difference|). Both ratios are read against the matmul work ratio printed first (`matmul_work.py`): what
sharing the prompt saves in work, for this model and for an 8B Llama-3 shape. Run at reduced size with
`--prompts 4 --completions 4` or `--layers 2 --hidden 256` when time is short (and say so).

    .venv/bin/python benchmarks/reward_throughput.py      # about 10 minutes on 2 CPU cores (2 repeats)

The last line is one JSON object: `grpo_shared_vs_full` (a) and `server_concurrent_vs_sequential` (b), the
best-repeat speed ratios, plus the median and CPU-time ratios, the sizes and every repeat's seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


def _entries(prompts: int, completions: int, seed: int = 0):
    """GRPO-shaped entries: each prompt's completions follow it; ~300-token completions."""
    from bench_model import _vocabulary, make_items

    from personalized_rewardbench.rewards.entries import RewardEntry, prompt_item
    from personalized_rewardbench.testing.tiny_models import make_tokenizer

    rng = random.Random(seed + 1)
    words = _vocabulary(make_tokenizer())
    entries = []
    for item in make_items(prompts, seed=seed, posts=10):
        prompt = prompt_item(item.question, item.posts, item.id)
        for _ in range(completions):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(270, 330))).capitalize() + "."
            entries.append(RewardEntry(prompt, text))
    return entries


def _scorer(model_dir: Path, shared_prefix: bool):
    from personalized_rewardbench.rewards.settings import RewardSettings, build_scorer

    settings = RewardSettings(str(model_dir), profile_k=10, device="cpu", dtype="float32", shared_prefix=shared_prefix)
    return settings, build_scorer(settings)


def _timed(function) -> dict:
    """{"seconds", "cpu_seconds" (this process, server threads included), "scores": function()}."""
    started, cpu_started = time.perf_counter(), time.process_time()
    scores = function()
    return {
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu_started,
        "scores": scores,
    }


def _ratios(runs: dict[str, list[dict]], slow: str, fast: str) -> dict:
    """slow / fast by each path's best repeat (wall and CPU seconds) and by the median repeats."""
    from alternating import fastest

    wall, cpu = fastest(runs), fastest(runs, "cpu_seconds")
    median = {path: statistics.median(r["seconds"] for r in runs[path]) for path in (slow, fast)}
    return {
        "best": round(wall[slow]["seconds"] / wall[fast]["seconds"], 3),
        "median": round(median[slow] / median[fast], 3),
        "cpu": round(cpu[slow]["cpu_seconds"] / cpu[fast]["cpu_seconds"], 3),
    }


def _seconds(runs: dict[str, list[dict]]) -> dict[str, list[float]]:
    return {path: [round(r["seconds"], 2) for r in results] for path, results in runs.items()}


def _max_diff(runs: dict[str, list[dict]], reference: str) -> float:
    return max(
        abs(a - b)
        for results in runs.values()
        for result in results
        for a, b in zip(result["scores"], runs[reference][0]["scores"])
    )


def _show(part: str, count: int):
    def show(path: str, result: dict) -> None:
        extra = f", {result['calls']} scoring calls" if "calls" in result else ""
        print(f"({part}) {path:<26} {count} completions in {result['seconds']:5.1f} s{extra}", flush=True)

    return show


def _work_ratios(scorer, entries, completions: int) -> dict:
    """`matmul_work.matmul_work_ratio` for the benchmark's model and an 8B Llama-3 shape, on the real token counts."""
    groups = [entries[n : n + completions] for n in range(0, len(entries), completions)]
    prompts = [len(scorer.encode_prompt(group[0].item)) for group in groups]
    answers = [[len(scorer.encode_answer(e.item, e.answer)) - p for e in group] for p, group in zip(prompts, groups)]
    from matmul_work import LLAMA3_8B_SHAPE, matmul_work_ratio

    config = scorer.model.config.to_dict()
    return {
        "this_model": round(matmul_work_ratio(config, prompts, answers), 2),
        "llama3_8b_shape": round(matmul_work_ratio(LLAMA3_8B_SHAPE, prompts, answers), 2),
    }


def grpo_batch(model_dir: Path, entries, repeats: int) -> dict:
    from alternating import alternate

    from personalized_rewardbench.rewards.entries import score_entries

    scorers = {"full": _scorer(model_dir, False)[1], "shared": _scorer(model_dir, True)[1]}
    for scorer in scorers.values():
        score_entries(scorer, entries[:2])  # warm-up (and the shared-prefix check)

    def measure(path: str) -> dict:
        return _timed(lambda: [s.score for s in score_entries(scorers[path], entries)])

    runs = alternate(list(scorers), repeats, measure, _show("a", len(entries)))
    return {
        "ratios": _ratios(runs, "full", "shared"),
        "seconds": _seconds(runs),
        "max_abs_score_diff": _max_diff(runs, "full"),
    }


def _payload(entry) -> bytes:
    posts = [{"category": p.category, "text": p.text} for p in entry.item.posts]
    return json.dumps([{"question": entry.item.question, "posts": posts, "response": entry.answer}]).encode()


def _post(url: str, body: bytes) -> float:
    request = urllib.request.Request(url + "/score", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())["scores"][0]


@contextlib.contextmanager
def _serve(model_dir: Path, limits):
    """A reward server on a free port of 127.0.0.1 in a thread: yields (service, url)."""
    import socket

    import uvicorn

    from personalized_rewardbench.rewards.server import RewardService, create_app

    settings, scorer = _scorer(model_dir, True)
    service = RewardService(scorer, settings, limits)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield service, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


SERVER_PATHS = {  # path: (prefix cache on, concurrent clients)
    "one at a time, no cache": (False, False),
    "32 clients, no cache": (False, True),
    "one at a time, cache": (True, False),
    "32 clients, cache": (True, True),
}


def server_clients(model_dir: Path, entries, clients: int, repeats: int) -> dict:
    """(b): one server without the prefix cache and one with it (the default), each passed the same requests one at
    a time and from `clients` threads at once; the cache starts empty for every pass. Headline: the default server
    under `clients` clients against one request at a time with nothing kept (the reference server's shape)."""
    from alternating import alternate

    from personalized_rewardbench.rewards.server import ServerLimits

    bodies = [_payload(entry) for entry in entries]
    paths = {path.replace("32", str(clients)): shape for path, shape in SERVER_PATHS.items()}
    with contextlib.ExitStack() as stack:
        servers = {
            cached: stack.enter_context(
                _serve(model_dir, ServerLimits() if cached else ServerLimits(prefix_cache_tokens=0))
            )
            for cached in (False, True)
        }
        for _service, url in servers.values():
            _post(url, bodies[0])  # warm-up

        def measure(path: str) -> dict:
            cached, concurrent = paths[path]
            service, url = servers[cached]
            if service.prefix_cache is not None:
                service.prefix_cache.clear()
            calls = service.batcher.stats.batches
            if concurrent:
                with ThreadPoolExecutor(max_workers=clients) as pool:
                    result = _timed(lambda: list(pool.map(lambda body: _post(url, body), bodies)))
            else:
                result = _timed(lambda: [_post(url, body) for body in bodies])
            return {**result, "calls": service.batcher.stats.batches - calls}

        runs = alternate(list(paths), repeats, measure, _show("b", len(entries)))
    named = {shape: path for path, shape in paths.items()}
    sequential = named[False, False]
    return {
        "ratios": _ratios(runs, sequential, named[True, True]),
        "micro_batching_alone": _ratios(runs, sequential, named[False, True])["best"],
        "prefix_cache_one_at_a_time": _ratios(runs, sequential, named[True, False])["best"],
        "seconds": _seconds(runs),
        "scoring_calls": {path: [r["calls"] for r in results] for path, results in runs.items()},
        "max_abs_score_diff": _max_diff(runs, sequential),
    }


def _summary(part: str, figures: dict) -> None:
    ratios = figures["ratios"]
    print(
        f"({part}) best of each path: {ratios['best']:.2f}x; median repeats: {ratios['median']:.2f}x; "
        f"by CPU time: {ratios['cpu']:.2f}x; max |score diff| {figures['max_abs_score_diff']:.1e}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--completions", type=int, default=8, help="completions per prompt (GRPO group size)")
    parser.add_argument("--clients", type=int, default=32, help="concurrent server clients")
    parser.add_argument("--repeats", type=int, default=2, help="alternating repeats of each path")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--skip", choices=["a", "b"], help="run only the other part")
    args = parser.parse_args()

    import torch
    from bench_model import build_model
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    started = time.perf_counter()
    entries = _entries(args.prompts, args.completions)
    result: dict = {"prompts": args.prompts, "completions_per_prompt": args.completions, "clients": args.clients}
    with tempfile.TemporaryDirectory() as folder:
        model_dir = build_model(Path(folder) / "rm", layers=args.layers, hidden=args.hidden)
        _settings, scorer = _scorer(model_dir, True)
        prompt_tokens = len(scorer.encode_prompt(entries[0].item))
        answer_tokens = len(scorer.tokenizer(entries[0].answer, add_special_tokens=False)["input_ids"])
        print(
            f"prompt ≈ {prompt_tokens} tokens, completion ≈ {answer_tokens} tokens; {args.repeats} alternating "
            f"repeats of each path; {torch.get_num_threads()} threads",
            flush=True,
        )
        result.update(
            prompt_tokens=prompt_tokens,
            completion_tokens=answer_tokens,
            layers=args.layers,
            hidden=args.hidden,
            repeats=args.repeats,
        )
        result["matmul_work_full_vs_shared"] = work = _work_ratios(scorer, entries, args.completions)
        print(
            f"matmul work, each completion in full / each prompt once: {work['this_model']:.2f}x on this model, "
            f"{work['llama3_8b_shape']:.2f}x on an 8B Llama-3 shape (both paths equally efficient: the expected ratio)",
            flush=True,
        )
        del scorer
        if args.skip != "a":
            grpo = grpo_batch(model_dir, entries, args.repeats)
            _summary("a", grpo)
            result["grpo_shared_vs_full"] = round(grpo["ratios"]["best"], 2)
            result["grpo"] = grpo
        if args.skip != "b":
            served = server_clients(model_dir, entries, args.clients, args.repeats)
            _summary("b", served)
            result["server_concurrent_vs_sequential"] = round(served["ratios"]["best"], 2)
            result["server"] = served
    print(f"total {time.perf_counter() - started:.0f} s", flush=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
