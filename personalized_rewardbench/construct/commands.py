"""`prbench construct`: thin parsing over `construct.pipeline`; prints the counts and the cost report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

#: The model name sent to a server when --base-url is given without --generator (TGI-style servers ignore it).
SERVER_MODEL = "default"


def _construct(args: argparse.Namespace) -> int:
    from personalized_rewardbench.construct.pipeline import ConstructConfig, run_construction
    from personalized_rewardbench.construct.verify import VerifyConfig
    from personalized_rewardbench.downstream.generation import Sampling
    from personalized_rewardbench.errors import UserError
    from personalized_rewardbench.runs.distributed import process_group, single_launch_notice

    if not args.generator and not args.base_url:
        raise UserError("name the generator: --generator MODEL (Hub id or folder) or --base-url URL (a server)")
    verify = VerifyConfig(
        margin=args.margin,
        min_length_ratio=args.min_length_ratio,
        max_length_ratio=args.max_length_ratio,
        max_words=args.max_words,
        leak_ngram=args.leak_ngram,
        quality_check=args.quality_check,
        min_quality=args.min_quality,
    )
    config = ConstructConfig(
        source=args.source,
        out=Path(args.out),
        generator=args.generator or SERVER_MODEL,
        split=args.split,
        base_url=args.base_url,
        judge=args.judge,
        judge_base_url=args.judge_base_url,
        subsets=[] if args.subset == "all" else [args.subset],
        limit=args.limit,
        profile_k=args.profile_k,
        retriever=args.retriever,
        seed=args.seed,
        sampling=Sampling(temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens),
        judge_max_new_tokens=args.judge_max_new_tokens,
        backend=args.backend,
        revision=args.revision,
        device=args.device,
        dtype=args.dtype,
        batch_size=args.batch_size,
        concurrency=args.concurrency,
        verify=verify,
        cache_dir=args.cache_dir,
        progress=not args.no_progress,
    )
    if notice := single_launch_notice():
        print(notice.replace(" evaluate ", " construct "), file=sys.stderr)
    with process_group(args.device) as group:
        outcome = run_construction(config, rank=group.rank, world_size=group.world_size, barrier=group.barrier)
    if outcome.summary is not None:
        print_summary(outcome.summary)
        print(outcome.out / "construct.json")
    return 0


def print_summary(summary: dict[str, Any]) -> None:
    """Counts kept and dropped by reason, and the cost per kept pair."""
    counts, cost = summary["counts"], summary["cost"]
    if summary.get("demo_sample"):
        print("note: built from the demo sample (written for this package) -- these pairs are not benchmark data")
    print(f"split {summary['split']}: kept {counts['kept']} of {counts['items']} items")
    for reason, number in counts["dropped_by_reason"].items():
        print(f"  dropped, {reason}: {number}")
    unit = cost["unit"]
    per_pair = cost["per_kept_pair"]
    if per_pair["generated"] is None:
        print(
            f"cost: {cost['generated']:,} {unit['generated']} generated, "
            f"{cost['judged']:,} {unit['judged']} judged; no pair kept"
        )
    else:
        print(
            f"cost per kept pair: {per_pair['generated']:,} {unit['generated']} generated, "
            f"{per_pair['judged']:,} {unit['judged']} judged (total {cost['generated']:,} + {cost['judged']:,})"
        )


def register(commands) -> None:
    """Add `construct` to the `prbench` subcommands."""
    from personalized_rewardbench.construct.verify import VerifyConfig
    from personalized_rewardbench.data.retrieval import RETRIEVERS
    from personalized_rewardbench.data.schema import SPLITS, SUBSETS

    rules = VerifyConfig()
    parser = commands.add_parser(
        "construct", help="generate and verify personalized preference pairs from LaMP-QA-style rows"
    )
    parser.add_argument("--source", required=True, help="FOLDER | hub:OWNER/NAME[@REV] | sample (rows need no answers)")
    parser.add_argument("--split", default="test", choices=SPLITS, help="which <Config>/<split>-* files to read")
    parser.add_argument("--subset", default="all", help=f"all | {' | '.join(SUBSETS)}")
    parser.add_argument("--limit", type=int, help="first N items per subset")
    parser.add_argument("--out", required=True, help="construction folder (rerun the same command to resume)")
    parser.add_argument("--generator", help="chat model: Hub id or local folder (with --base-url: the served name)")
    parser.add_argument("--base-url", help="OpenAI-compatible server of the generator (implies --backend server)")
    parser.add_argument("--backend", default="transformers", choices=["transformers", "vllm", "server"])
    parser.add_argument("--revision", help="generator revision on the Hub")
    parser.add_argument("--judge", help="rubric judge chat model (default: the generator)")
    parser.add_argument("--judge-base-url", help="OpenAI-compatible server of the judge")
    parser.add_argument("--profile-k", type=int, default=10, help="profile posts the generator sees")
    parser.add_argument("--retriever", default="contriever", help=" | ".join(RETRIEVERS))
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-p", type=float, default=0.9)
    parser.add_argument("--max-new-tokens", type=int, default=256, help="generation limit per answer")
    parser.add_argument("--judge-max-new-tokens", type=int, default=512)
    parser.add_argument("--seed", type=int, default=42, help="answer j of item i is seeded from (seed, id, j)")
    parser.add_argument("--batch-size", type=int, default=8, help="items per generation call")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight (server backend)")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--dtype", default="auto", help="auto | float32 | bfloat16 | float16")
    checks = parser.add_argument_group("verification")
    checks.add_argument("--margin", type=float, default=rules.margin, help="rubric quality chosen - rejected (0-2)")
    checks.add_argument("--min-length-ratio", type=float, default=rules.min_length_ratio, help="chosen/rejected words")
    checks.add_argument("--max-length-ratio", type=float, default=rules.max_length_ratio)
    checks.add_argument("--max-words", type=int, default=rules.max_words, help="per answer (the prompts ask for it)")
    checks.add_argument("--leak-ngram", type=int, default=rules.leak_ngram, help="words shared with the answer key")
    checks.add_argument("--quality-check", action="store_true", help="also rate general quality on the question alone")
    checks.add_argument("--min-quality", type=float, default=rules.min_quality, help="with --quality-check (0-2)")
    parser.add_argument("--cache-dir", type=Path, help="profile-ranking cache (default: $PRBENCH_CACHE)")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(handler=_construct)
