"""The `prbench` command line: thin argument parsing over the library; one-line errors, non-zero exit."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from personalized_rewardbench import __version__
from personalized_rewardbench.errors import UserError

Handler = Callable[[argparse.Namespace], int]


def _release_build(args: argparse.Namespace) -> int:
    from personalized_rewardbench.release.build import build_release

    source = build_release(
        args.source,
        args.version,
        Path(args.out),
        force=args.force,
        changelog=args.changelog,
        notes=args.notes,
        repo_id=args.repo,
    )
    counts = ", ".join(f"{subset}: {len(rows)}" for subset, rows in source.rows.items())
    print(f"release v{args.version.removeprefix('v')} of {source.spec} ({counts})")
    print(Path(args.out).resolve())
    return 0


def _release_push(args: argparse.Namespace) -> int:
    from personalized_rewardbench.release.push import plan_push, push_release

    plan = plan_push(Path(args.dir), args.repo, args.tag)
    print(plan.describe())
    if args.dry_run:
        print("dry run: nothing was uploaded or tagged")
        return 0
    commit = push_release(plan)
    print(f"pushed {plan.repo_id} at {commit}, tagged {plan.tag}")
    return 0


def _release_show(args: argparse.Namespace) -> int:
    from personalized_rewardbench.release.show import show_release

    show_release(Path(args.dir))
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from personalized_rewardbench.runs.config import RunConfig
    from personalized_rewardbench.runs.engine import run_evaluation
    from personalized_rewardbench.runs.results import format_table

    config = RunConfig(
        model=args.model,
        data=args.data,
        subsets=[] if args.subset == "all" else [args.subset],
        limit=args.limit,
        profile_k=args.profile_k,
        retriever=args.retriever,
        template=args.template,
        protocol=args.protocol,
        upstream_prompts=args.upstream_prompts,
        model_type=args.model_type,
        revision=args.revision,
        dtype=args.dtype,
        device=args.device,
        trust_remote_code=args.trust_remote_code,
        max_length=args.max_length,
        batch_tokens=args.batch_tokens,
        seed=args.seed,
        judge_mode=args.judge_mode,
        backend=args.backend,
        max_new_tokens=args.max_new_tokens,
        shared_prefix=not args.no_shared_prefix,
        output=Path(args.output),
        cache_dir=args.cache_dir,
        progress=not args.no_progress,
    )
    from personalized_rewardbench.runs.distributed import process_group, single_launch_notice

    if notice := single_launch_notice():
        print(notice, file=sys.stderr)
    with process_group(config.device) as group:
        outcome = run_evaluation(config, rank=group.rank, world_size=group.world_size, barrier=group.barrier)
    if outcome.results is None:
        return 0
    results = outcome.results
    if outcome.reused:
        print("this run was already complete; showing the stored results")
    if results.get("demo_sample"):
        print("note: demo sample (written for this package) -- not benchmark data, not benchmark results")
    print(f"{results['model']} ({results['model_type']}) on {results['dataset']}, profile_k={config.profile_k}")
    print(format_table(results))
    if "consistent_accuracy" in results:
        print(
            f"judge: accuracy over {results['num_verdicts']} verdicts (both orders); consistent in both orders "
            f"{100 * results['consistent_accuracy']:.2f}%; position bias {100 * results['position_bias']:+.2f} points; "
            f"no verdict: {results['no_verdict']}"
        )
    elif "no_verdict" in results:
        print(f"judge: answers without a rating: {results['no_verdict']} (their pairs count as ties: wrong)")
    if results.get("truncated_pairs") and config.protocol == "upstream":
        print(
            f"cut pairs (an input cut at {results['protocol']['max_length']} tokens, as the reference does): {results['truncated_pairs']}"
        )
    elif results.get("truncated_pairs"):
        print(
            f"truncated pairs (lowest-ranked profile posts dropped to fit the max length): {results['truncated_pairs']}"
        )
    if results.get("shortened_questions"):
        print(
            f"shortened questions (too long even without posts: the question's end cut, marked '…'; "
            f"answers never cut): {results['shortened_questions']}"
        )
    print(outcome.run_dir / "results.json")
    return 0


def _leaderboard(args: argparse.Namespace) -> int:
    from personalized_rewardbench.runs.leaderboard import leaderboard_rows, print_leaderboard, write_chart

    folder = Path(args.dir)
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder of results; pass the --output folder of 'prbench evaluate'")
    rows = leaderboard_rows(folder)
    print_leaderboard(rows)
    if rows:
        print(write_chart(rows, folder / "leaderboard.png"))
    return 0


def _space_build(args: argparse.Namespace) -> int:
    from personalized_rewardbench.space.bundle import build_space_bundle

    print(build_space_bundle(Path(args.out), force=args.force))
    return 0


def _space_push(args: argparse.Namespace) -> int:
    from personalized_rewardbench.space.bundle import push_space_bundle

    commit = push_space_bundle(Path(args.dir), args.repo, hardware=None if args.no_hardware else "zero-a10g")
    print(f"pushed Space {args.repo} at {commit}")
    return 0


def _add_space_parser(commands) -> None:
    space = commands.add_parser("space", help="bundle and publish the Gradio Space")
    space_commands = space.add_subparsers(dest="space_command", required=True)
    build = space_commands.add_parser("build", help="write a self-contained Space folder (app + library + metric)")
    build.add_argument("--out", required=True)
    build.add_argument("--force", action="store_true", help="replace --out if it exists")
    build.set_defaults(handler=_space_build)
    push = space_commands.add_parser("push", help="upload a built Space folder and request ZeroGPU hardware")
    push.add_argument("--dir", required=True)
    push.add_argument("--repo", required=True, help="OWNER/NAME of the Space")
    push.add_argument("--no-hardware", action="store_true", help="do not request zero-a10g hardware")
    push.set_defaults(handler=_space_push)


def _add_evaluate_parser(commands) -> None:
    from personalized_rewardbench.data.retrieval import RETRIEVERS
    from personalized_rewardbench.data.schema import SUBSETS
    from personalized_rewardbench.runs.config import RunConfig
    from personalized_rewardbench.scoring.prompts import TEMPLATES
    from personalized_rewardbench.scoring.protocols import DEFAULT_PROTOCOL, PROTOCOLS

    evaluate = commands.add_parser("evaluate", help="score a reward model or judge on the benchmark")
    evaluate.add_argument(
        "--model", default="baseline:embedding", help="Hub id, local folder, or baseline:length|random|embedding"
    )
    evaluate.add_argument("--revision", help="model revision (branch, tag or commit) on the Hub")
    evaluate.add_argument(
        "--model-type", default="auto", choices=["auto", "classifier", "judge-pairwise", "judge-score"]
    )
    evaluate.add_argument(
        "--data",
        help="sample | FOLDER | hub:OWNER/NAME[@REV] (default: sample for the default model, else the upstream Hub dataset)",
    )
    evaluate.add_argument("--subset", default="all", help=f"all | {' | '.join(SUBSETS)}")
    evaluate.add_argument("--limit", type=int, help="first N items per subset")
    evaluate.add_argument("--profile-k", type=int, default=0, help="profile posts added to the question (0: none)")
    evaluate.add_argument(
        "--retriever",
        default="contriever",
        help=f"profile ranking: {' | '.join(RETRIEVERS)} (default contriever, the upstream protocol; minilm when it cannot be loaded)",
    )
    evaluate.add_argument(
        "--template", default="default", help=f"user-turn wording under --protocol prbench: {' | '.join(TEMPLATES)}"
    )
    evaluate.add_argument(
        "--protocol",
        default=DEFAULT_PROTOCOL,
        choices=PROTOCOLS,
        help=RunConfig.__dataclass_fields__["protocol"].metadata["help"],
    )
    evaluate.add_argument(
        "--upstream-prompts",
        type=Path,
        metavar="DIR",
        help=RunConfig.__dataclass_fields__["upstream_prompts"].metadata["help"],
    )
    evaluate.add_argument("--dtype", default="auto", help="auto | float32 | bfloat16 | float16")
    evaluate.add_argument("--device", default="auto", help="auto | cpu | cuda")
    evaluate.add_argument("--trust-remote-code", action="store_true")
    evaluate.add_argument(
        "--max-length", type=int, help="input token limit (default: the model registry's, capped by the model)"
    )
    evaluate.add_argument(
        "--batch-tokens", type=int, help="token budget per forward batch (default: auto, 2048 on CPU, 16384 on CUDA)"
    )
    evaluate.add_argument(
        "--no-shared-prefix", action="store_true", help="score every input in full (no KV-cache reuse)"
    )
    evaluate.add_argument("--judge-mode", default="logits", choices=["logits", "generate"])
    evaluate.add_argument("--backend", default="transformers", choices=["transformers", "vllm"])
    evaluate.add_argument("--max-new-tokens", type=int, default=512, help="judge generation limit")
    evaluate.add_argument("--seed", type=int, default=42)
    evaluate.add_argument("--output", default="results", help="results folder (default: ./results)")
    evaluate.add_argument(
        "--cache-dir", type=Path, help="profile-ranking cache (default: $PRBENCH_CACHE or ~/.cache/prbench)"
    )
    evaluate.add_argument("--no-progress", action="store_true")
    evaluate.set_defaults(handler=_evaluate)
    board = commands.add_parser("leaderboard", help="one row per run found under DIR, plus a bar chart PNG")
    board.add_argument("dir", nargs="?", default="results")
    board.set_defaults(handler=_leaderboard)


def build_parser() -> argparse.ArgumentParser:
    from personalized_rewardbench.release.card import DEFAULT_REPO_ID

    parser = argparse.ArgumentParser(prog="prbench", description="Personalized RewardBench tools.")
    parser.add_argument("--version", action="version", version=f"personalized-rewardbench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    _add_evaluate_parser(commands)
    _add_space_parser(commands)
    release = commands.add_parser("release", help="build, inspect and publish versioned Hub dataset releases")
    release_commands = release.add_subparsers(dest="release_command", required=True)
    build = release_commands.add_parser("build", help="write a complete Hub dataset folder")
    build.add_argument(
        "--source", default="sample", help="sample | FOLDER | hub:OWNER/NAME[@REVISION] (default: sample)"
    )
    build.add_argument("--version", required=True, help="semantic version X.Y.Z")
    build.add_argument("--out", required=True, help="folder to create")
    build.add_argument("--force", action="store_true", help="replace --out if it is a release folder")
    build.add_argument(
        "--repo", default=DEFAULT_REPO_ID, help=f"Hub dataset repo the card loads from (default {DEFAULT_REPO_ID})"
    )
    build.add_argument("--changelog", type=Path, help="previous CHANGELOG.md to extend")
    build.add_argument("--notes", help="one line for this version's changelog entry")
    build.set_defaults(handler=_release_build)
    push = release_commands.add_parser("push", help="upload a release folder to the Hub and tag it")
    push.add_argument("--dir", required=True, help="release folder")
    push.add_argument("--repo", required=True, help="OWNER/NAME of the Hub dataset repo")
    push.add_argument("--tag", required=True, help="vX.Y.Z, equal to the release version")
    push.add_argument("--dry-run", action="store_true", help="print the plan, touch nothing")
    push.set_defaults(handler=_release_push)
    show = release_commands.add_parser("show", help="load every config of a release with datasets and print it")
    show.add_argument("dir", help="release folder")
    show.set_defaults(handler=_release_show)
    return parser


def _quiet_libraries() -> None:
    """Keep library chatter (load reports, weight-loading bars) off the console; our own bars stay."""
    import datasets
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `prbench`; returns the exit status."""
    args = build_parser().parse_args(argv)
    _quiet_libraries()
    try:
        return args.handler(args)
    except UserError as error:
        print(f"prbench: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a folder or file the user named cannot be read or written
        where = f": {error.filename}" if error.filename else ""
        print(f"prbench: error: {error.strerror or error}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("prbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
