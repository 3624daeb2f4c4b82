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

Each path runs once after a warm-up; its time includes tokenization, fitting and HTTP. Scores are compared
between the paths (max |difference|). Run at reduced size with `--prompts 4 --completions 4` or
`--layers 2 --hidden 256` when time is short (and say so).

    .venv/bin/python benchmarks/reward_throughput.py      # about 5-10 minutes on 2 CPU cores

The last line is one JSON object: `grpo_shared_vs_full` (a) and `server_concurrent_vs_sequential` (b)
speed ratios, plus the sizes and seconds behind them.
"""

from __future__ import annotations

import argparse
import json
import random
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


def _timed(function):
    started = time.perf_counter()
    result = function()
    return result, time.perf_counter() - started


def grpo_batch(model_dir: Path, entries) -> dict:
    from personalized_rewardbench.rewards.entries import score_entries

    results = {}
    for name, shared in (("full", False), ("shared", True)):
        _settings, scorer = _scorer(model_dir, shared)
        score_entries(scorer, entries[:2])  # warm-up (and the shared-prefix check)
        scores, seconds = _timed(lambda scorer=scorer: [s.score for s in score_entries(scorer, entries)])
        results[name] = {"seconds": seconds, "scores": scores}
        print(f"(a) {name:6s}: {len(entries)} completions in {seconds:.1f} s", flush=True)
    diff = max(abs(a - b) for a, b in zip(results["full"]["scores"], results["shared"]["scores"]))
    return {
        "ratio": results["full"]["seconds"] / results["shared"]["seconds"],
        "seconds_full": results["full"]["seconds"],
        "seconds_shared": results["shared"]["seconds"],
        "max_abs_score_diff": diff,
    }


def _payload(entry) -> bytes:
    posts = [{"category": p.category, "text": p.text} for p in entry.item.posts]
    return json.dumps([{"question": entry.item.question, "posts": posts, "response": entry.answer}]).encode()


def _post(url: str, body: bytes) -> float:
    request = urllib.request.Request(url + "/score", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())["scores"][0]


def _serve(model_dir: Path, limits):
    """A reward server on a free port of 127.0.0.1 in a thread: (service, server, its thread, url)."""
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
    return service, server, thread, f"http://127.0.0.1:{port}"


def server_passes(model_dir: Path, entries, clients: int, cache_tokens: int) -> dict:
    """One request at a time, then `clients` at once, on one server (`cache_tokens` 0: no prefix cache); the
    cache starts empty for each pass."""
    from personalized_rewardbench.rewards.server import ServerLimits

    service, server, thread, url = _serve(model_dir, ServerLimits(prefix_cache_tokens=cache_tokens))
    label = f"cache {cache_tokens}" if cache_tokens else "no cache"
    bodies = [_payload(entry) for entry in entries]

    def fresh_cache() -> None:
        if service.prefix_cache is not None:
            service.prefix_cache.clear()

    try:
        _post(url, bodies[0])  # warm-up
        fresh_cache()
        sequential, seconds_sequential = _timed(lambda: [_post(url, body) for body in bodies])
        print(f"(b) {label}, one at a time: {len(bodies)} requests in {seconds_sequential:.1f} s", flush=True)
        fresh_cache()
        batches_before = service.batcher.stats.batches
        with ThreadPoolExecutor(max_workers=clients) as pool:
            concurrent, seconds_concurrent = _timed(lambda: list(pool.map(lambda body: _post(url, body), bodies)))
        batches = service.batcher.stats.batches - batches_before
        print(
            f"(b) {label}, {clients} clients: {len(bodies)} requests in {seconds_concurrent:.1f} s, {batches} calls",
            flush=True,
        )
    finally:
        server.should_exit = True
        thread.join(10)
    return {
        "seconds_sequential": seconds_sequential,
        "seconds_concurrent": seconds_concurrent,
        "scoring_calls_concurrent": batches,
        "scores_sequential": sequential,
        "scores_concurrent": concurrent,
    }


def server_clients(model_dir: Path, entries, clients: int) -> dict:
    """(b): the default server (prefix cache on) under `clients` concurrent clients against one request at a time
    with nothing kept between requests (the reference server's shape), plus the two other combinations."""
    from personalized_rewardbench.rewards.server import ServerLimits

    plain = server_passes(model_dir, entries, clients, 0)
    cached = server_passes(model_dir, entries, clients, ServerLimits().prefix_cache_tokens)
    scores = [plain["scores_sequential"], plain["scores_concurrent"], cached["scores_sequential"]]
    return {
        "ratio": plain["seconds_sequential"] / cached["seconds_concurrent"],
        "micro_batching_alone": plain["seconds_sequential"] / plain["seconds_concurrent"],
        "prefix_cache_one_at_a_time": plain["seconds_sequential"] / cached["seconds_sequential"],
        "seconds_sequential_no_cache": plain["seconds_sequential"],
        "seconds_concurrent_no_cache": plain["seconds_concurrent"],
        "seconds_sequential_cache": cached["seconds_sequential"],
        "seconds_concurrent_cache": cached["seconds_concurrent"],
        "scoring_calls_concurrent": cached["scoring_calls_concurrent"],
        "max_abs_score_diff": max(abs(a - b) for other in scores for a, b in zip(other, cached["scores_concurrent"])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--completions", type=int, default=8, help="completions per prompt (GRPO group size)")
    parser.add_argument("--clients", type=int, default=32, help="concurrent server clients")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--skip", choices=["a", "b"], help="run only the other part")
    args = parser.parse_args()

    from bench_model import build_model
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    entries = _entries(args.prompts, args.completions)
    result: dict = {"prompts": args.prompts, "completions_per_prompt": args.completions, "clients": args.clients}
    with tempfile.TemporaryDirectory() as folder:
        model_dir = build_model(Path(folder) / "rm", layers=args.layers, hidden=args.hidden)
        _settings, scorer = _scorer(model_dir, True)
        prompt_tokens = len(scorer.encode_prompt(entries[0].item))
        answer_tokens = len(scorer.tokenizer(entries[0].answer, add_special_tokens=False)["input_ids"])
        print(f"prompt ≈ {prompt_tokens} tokens, completion ≈ {answer_tokens} tokens", flush=True)
        result.update(
            prompt_tokens=prompt_tokens, completion_tokens=answer_tokens, layers=args.layers, hidden=args.hidden
        )
        del scorer
        if args.skip != "a":
            grpo = grpo_batch(model_dir, entries)
            result["grpo_shared_vs_full"] = round(grpo.pop("ratio"), 2)
            result["grpo"] = grpo
        if args.skip != "b":
            served = server_clients(model_dir, entries, args.clients)
            result["server_concurrent_vs_sequential"] = round(served.pop("ratio"), 2)
            result["server"] = {
                key: round(value, 2) if key != "max_abs_score_diff" else value for key, value in served.items()
            }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
