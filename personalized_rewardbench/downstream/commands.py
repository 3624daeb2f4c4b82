"""`prbench bon generate|score|judge|curve` and `prbench correlate`: thin parsing over `downstream`.

`bon score` takes `evaluate`'s options, generated from `RunConfig` (`personalized_rewardbench.options`),
but the data selection and the output folder, which come from the candidates folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _group():
    from personalized_rewardbench.runs.distributed import process_group, single_launch_notice

    if notice := single_launch_notice():
        print(notice.replace(" evaluate ", " bon ... "), file=sys.stderr)
    return process_group


def _sampling(args: argparse.Namespace):
    from personalized_rewardbench.downstream.generation import Sampling

    return Sampling(temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens)


def _generate(args: argparse.Namespace) -> int:
    from personalized_rewardbench.downstream.candidates import GenerateConfig, generate_candidates

    config = GenerateConfig(
        policy=args.policy,
        output=Path(args.output),
        n=args.n,
        profile_k=args.profile_k,
        data=args.data,
        subsets=[] if args.subset == "all" else [args.subset],
        limit=args.limit,
        retriever=args.retriever,
        seed=args.seed,
        sampling=_sampling(args),
        backend=args.backend,
        base_url=args.base_url,
        revision=args.revision,
        device=args.device,
        dtype=args.dtype,
        batch_size=args.batch_size,
        concurrency=args.concurrency,
        cache_dir=args.cache_dir,
        progress=not args.no_progress,
    )
    with _group()(args.device) as group:
        records = generate_candidates(config, rank=group.rank, world_size=group.world_size, barrier=group.barrier)
    if records is not None:
        print(f"{len(records)} items x {config.n} candidates")
        print(config.output / "candidates.jsonl")
    return 0


#: RunConfig fields `bon score` does not take: the data come from the candidates folder, outputs go into it.
_NOT_FOR_SCORE = ("data", "subsets", "limit", "output")


def _score(args: argparse.Namespace) -> int:
    from personalized_rewardbench.downstream.bon_scores import BonScoreConfig, score_candidates
    from personalized_rewardbench.options import config_from_args
    from personalized_rewardbench.runs.config import RunConfig

    # data fields are placeholders: score_candidates replaces them with the candidates folder's data
    run = config_from_args(RunConfig, args, data="sample", subsets=[], limit=None, output=Path("results"))
    config = BonScoreConfig(Path(args.candidates), run, groups_per_batch=args.groups_per_batch)
    with _group()(run.device) as group:
        folder, records = score_candidates(config, rank=group.rank, world_size=group.world_size, barrier=group.barrier)
    if records is not None:
        print(f"{len(records)} items scored by {run.model}")
        print(folder / "scores.jsonl")
    return 0


def _judge(args: argparse.Namespace) -> int:
    from personalized_rewardbench.downstream.rubric_judge import JudgeConfig, judge_candidates

    config = JudgeConfig(
        judge=args.judge,
        candidates=Path(args.candidates),
        backend=args.backend,
        base_url=args.base_url,
        revision=args.revision,
        device=args.device,
        dtype=args.dtype,
        max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size,
        concurrency=args.concurrency,
        progress=not args.no_progress,
    )
    with _group()(args.device) as group:
        outcome = judge_candidates(config, rank=group.rank, world_size=group.world_size, barrier=group.barrier)
    if outcome.records is not None:
        unparsable = sum(1 for record in outcome.records if record["quality"] is None)
        print(
            f"{len(outcome.records)} unique candidates judged ({outcome.judged_now} in this run); "
            f"unparsable (excluded, never defaulted): {unparsable}"
        )
        print(outcome.folder / "judgments.jsonl")
    return 0


def _curve(args: argparse.Namespace) -> int:
    from personalized_rewardbench.downstream.curves import ORACLE, RANDOM, write_curves

    curves, json_path, png_path = write_curves(Path(args.dir), args.judge)
    ks = curves["k_values"]
    print(f"best-of-k judge quality over {curves['items']} items ({curves['items_excluded']} excluded: unparsable)")
    print(f"{'model':<40} " + " ".join(f"{'k=' + str(k):>7}" for k in ks) + f" {'gain':>7}")
    rows = [*curves["models"].items(), (ORACLE, curves[ORACLE])]
    for name, figures in rows:
        cells = " ".join(f"{figures['k'][str(k)]['mean']:>7.3f}" for k in ks)
        print(f"{name[-40:]:<40} {cells} {figures['gain_at_n']['mean']:>+7.3f}")
    print(f"{RANDOM:<40} {curves[RANDOM]['mean']:>7.3f}")
    print(json_path)
    print(png_path)
    return 0


def _correlate(args: argparse.Namespace) -> int:
    from personalized_rewardbench.downstream.correlation import run_correlation
    from personalized_rewardbench.downstream.rank_stats import STATISTICS

    report, json_path, png_path = run_correlation(
        Path(args.benchmark),
        Path(args.downstream),
        profile_k=args.profile_k,
        template=args.template,
        others=args.other or [],
        judge=args.judge,
        replicates=args.bootstrap,
        seed=args.seed,
        output=Path(args.output) if args.output else None,
    )
    print(f"{'benchmark':<28} {'target':<12} " + " ".join(f"{s:>22}" for s in STATISTICS))
    for row in report["rows"]:
        if "note" in row:
            print(f"{row['benchmark']:<28} {row['note']}")
            continue
        cells = " ".join(
            f"{row[s]['value']:>6.3f} [{row[s]['ci95'][0]:>6.3f},{row[s]['ci95'][1]:>6.3f}]" for s in STATISTICS
        )
        print(f"{row['benchmark'][:28]:<28} {row['target']:<12} {cells}")
    print(json_path)
    print(png_path)
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--revision", help="model revision on the Hub")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--dtype", default="auto", help="auto | float32 | bfloat16 | float16")
    parser.add_argument("--no-progress", action="store_true")


def _backend(parser: argparse.ArgumentParser, max_new_tokens: int, batch_size: int) -> None:
    parser.add_argument("--backend", default="transformers", choices=["transformers", "vllm", "server"])
    parser.add_argument("--base-url", help="OpenAI-compatible server (implies --backend server)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight (server backend)")
    parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens)
    parser.add_argument("--batch-size", type=int, default=batch_size, help="chats per generation call")


def register(commands) -> None:
    """Add `bon` (generate, score, judge, curve) and `correlate` to the `prbench` subcommands."""
    from personalized_rewardbench.data.retrieval import RETRIEVERS
    from personalized_rewardbench.data.schema import SUBSETS
    from personalized_rewardbench.options import add_options
    from personalized_rewardbench.runs.config import RunConfig

    bon = commands.add_parser("bon", help="Best-of-N downstream experiment: generate, score, judge, curve")
    steps = bon.add_subparsers(dest="bon_command", required=True)

    generate = steps.add_parser("generate", help="N sampled answers per item from a chat policy")
    generate.add_argument("--policy", required=True, help="chat model: Hub id or local folder (or the server's name)")
    generate.add_argument("--n", type=int, default=16, help="candidates per item")
    generate.add_argument("--profile-k", type=int, default=10, help="profile posts the policy sees")
    generate.add_argument("--data", help="sample | FOLDER | hub:OWNER/NAME[@REV] (default: the upstream Hub dataset)")
    generate.add_argument("--subset", default="all", help=f"all | {' | '.join(SUBSETS)}")
    generate.add_argument("--limit", type=int, help="first N items per subset")
    generate.add_argument("--retriever", default="contriever", help=" | ".join(RETRIEVERS))
    generate.add_argument("--temperature", type=float, default=0.8)
    generate.add_argument("--top-p", type=float, default=0.9)
    generate.add_argument("--seed", type=int, default=42, help="sample j of item i is seeded from (seed, id, j)")
    generate.add_argument("--output", required=True, help="candidates folder")
    generate.add_argument("--cache-dir", type=Path, help="profile-ranking cache")
    _backend(generate, 512, 16)
    _common(generate)
    generate.set_defaults(handler=_generate)

    score = steps.add_parser(
        "score", help="score every candidate with a reward model (any `evaluate` scorer, its protocol options)"
    )
    score.add_argument("--candidates", required=True, help="candidates folder of `bon generate`")
    score.add_argument("--groups-per-batch", type=int, default=4, help="items (N candidates each) per batch")
    add_options(score, RunConfig, exclude=_NOT_FOR_SCORE)
    score.set_defaults(handler=_score)

    judge = steps.add_parser("judge", help="rate every unique candidate on its item's rubric (0/1/2 per aspect)")
    judge.add_argument("--judge", required=True, help="chat model: Hub id or local folder (or the server's name)")
    judge.add_argument("--candidates", required=True, help="candidates folder of `bon generate`")
    _backend(judge, 512, 8)
    _common(judge)
    judge.set_defaults(handler=_judge)

    curve = steps.add_parser("curve", help="best-of-k quality per reward model: curves.json and curves.png")
    curve.add_argument("dir", help="candidates folder (scored and judged)")
    curve.add_argument("--judge", help="judge run (name or folder) when there are several")
    curve.set_defaults(handler=_curve)

    correlate = commands.add_parser("correlate", help="benchmark ranking of reward models vs their Best-of-N ranking")
    correlate.add_argument("--benchmark", required=True, help="results folder of `prbench evaluate`")
    correlate.add_argument("--downstream", required=True, help="candidates folder (scored and judged)")
    correlate.add_argument("--profile-k", type=int, default=0, help="benchmark protocol: profile K of the runs")
    correlate.add_argument("--template", default="default", help="benchmark protocol: prompt template")
    correlate.add_argument("--other", action="append", metavar="NAME=FILE", help="another benchmark's model,score")
    correlate.add_argument("--judge", help="judge run when there are several")
    correlate.add_argument("--bootstrap", type=int, default=1000, help="bootstrap replicates over items")
    correlate.add_argument("--seed", type=int, default=0)
    correlate.add_argument("--output", help="folder for correlation.json/png (default: the downstream folder)")
    correlate.set_defaults(handler=_correlate)
