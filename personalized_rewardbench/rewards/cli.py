"""`prbench serve-reward` (the reward server) and `prbench reward-data` (RL prompt files); `register` adds both."""

from __future__ import annotations

import argparse
from pathlib import Path


def _settings(args: argparse.Namespace):
    from personalized_rewardbench.rewards.settings import RewardSettings

    return RewardSettings(
        model=args.model,
        profile_k=args.profile_k,
        retriever=args.retriever,
        template=args.template,
        model_type=args.model_type,
        revision=args.revision,
        device=args.device,
        dtype=args.dtype,
        max_length=args.max_length,
        batch_tokens=args.batch_tokens,
        trust_remote_code=args.trust_remote_code,
        shared_prefix=not args.no_shared_prefix,
        cache_dir=args.cache_dir,
    )


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from personalized_rewardbench.rewards.server import RewardService, ServerLimits, create_app
    from personalized_rewardbench.rewards.settings import build_scorer

    limits = ServerLimits(
        max_items=args.max_items,
        max_bytes=args.max_bytes,
        max_queue=args.max_queue,
        max_wait_ms=args.max_wait_ms,
        micro_batch_tokens=args.micro_batch_tokens,
        prefix_cache_tokens=args.prefix_cache_tokens,
    )
    settings = _settings(args)
    settings.run_config()  # validate the options before loading the model
    service = RewardService(build_scorer(settings), settings, limits)
    print(f"serving {service.scorer.name} ({service.scorer.model_type}) on http://{args.host}:{args.port}")
    uvicorn.run(create_app(service), host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _reward_data(args: argparse.Namespace) -> int:
    from personalized_rewardbench.rewards.datasets import prepare, prompt_rows, write_verl_parquet

    items = prepare(
        args.data,
        subsets=[] if args.subset == "all" else [args.subset],
        limit=args.limit,
        profile_k=args.profile_k,
        retriever=args.retriever,
        cache_dir=args.cache_dir,
        progress=True,
    )
    out = Path(args.out)
    if args.format == "verl":
        write_verl_parquet(items, out, split=args.split, template=args.template)
    else:
        from datasets import Dataset

        from personalized_rewardbench.runs.score_log import write_jsonl_atomic

        if out.suffix == ".parquet":
            out.parent.mkdir(parents=True, exist_ok=True)
            temporary = out.with_name(f".{out.name}.tmp")
            Dataset.from_list(prompt_rows(items, args.template)).to_parquet(str(temporary))
            temporary.replace(out)
        else:
            write_jsonl_atomic(out, prompt_rows(items, args.template))
    print(f"{len(items)} prompts ({args.format}) -> {out}")
    return 0


def _add_reward_options(parser: argparse.ArgumentParser) -> None:
    from personalized_rewardbench.data.retrieval import RETRIEVERS
    from personalized_rewardbench.rewards.settings import DEFAULT_PROFILE_K
    from personalized_rewardbench.scoring.prompts import TEMPLATES

    parser.add_argument(
        "--profile-k", type=int, default=DEFAULT_PROFILE_K, help=f"posts in the prompt (default {DEFAULT_PROFILE_K})"
    )
    parser.add_argument("--retriever", default="contriever", help=f"profile ranking: {' | '.join(RETRIEVERS)}")
    parser.add_argument("--template", default="default", help=f"prompt template: {' | '.join(TEMPLATES)}")
    parser.add_argument("--cache-dir", type=Path, help="profile-ranking cache (default: $PRBENCH_CACHE)")


def register(commands) -> None:
    """Add `serve-reward` and `reward-data` to the `prbench` subcommands."""
    serve = commands.add_parser("serve-reward", help="serve a reward model over HTTP for RL (micro-batched)")
    serve.add_argument("--model", required=True, help="reward model: Hub id or local folder")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--model-type", default="auto", choices=["auto", "classifier", "judge-score"])
    serve.add_argument("--revision")
    serve.add_argument("--device", default="auto", help="auto | cpu | cuda")
    serve.add_argument("--dtype", default="auto", help="auto | float32 | bfloat16 | float16")
    serve.add_argument("--max-length", type=int, help="input token limit (default: the model registry's)")
    serve.add_argument("--batch-tokens", type=int, help="token budget per forward batch (default: auto)")
    serve.add_argument("--no-shared-prefix", action="store_true", help="score every input in full")
    serve.add_argument("--trust-remote-code", action="store_true")
    _add_reward_options(serve)
    serve.add_argument("--max-items", type=int, default=256, help="items per request (default 256)")
    serve.add_argument("--max-bytes", type=int, default=8 * 1024 * 1024, help="request body limit (default 8 MiB)")
    serve.add_argument("--max-queue", type=int, default=256, help="requests waiting for the model (default 256)")
    serve.add_argument("--max-wait-ms", type=float, default=10.0, help="batching wait, 0-20 ms (default 10)")
    serve.add_argument(
        "--micro-batch-tokens", type=int, default=32768, help="tokens gathered per scoring call (default 32768)"
    )
    serve.add_argument(
        "--prefix-cache-tokens",
        type=int,
        default=16384,
        help="prompt tokens whose key/value states are kept for later calls (default 16384; 0: off)",
    )
    serve.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    serve.set_defaults(handler=_serve)

    data = commands.add_parser("reward-data", help="write RL prompt data: TRL (jsonl/parquet) or verl (parquet)")
    data.add_argument("--data", default="sample", help="sample | FOLDER | hub:OWNER/NAME[@REV]")
    data.add_argument("--subset", default="all")
    data.add_argument("--limit", type=int, help="first N items per subset")
    data.add_argument("--format", default="trl", choices=["trl", "verl"])
    data.add_argument("--split", default="train", help="verl extra_info split name")
    data.add_argument("--out", required=True, help="file to write (.jsonl or .parquet)")
    _add_reward_options(data)
    data.set_defaults(handler=_reward_data)
