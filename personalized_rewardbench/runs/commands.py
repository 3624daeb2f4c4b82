"""`prbench evaluate` and `prbench leaderboard`: thin faces over the engine and the leaderboard.

`evaluate`'s options are generated from `RunConfig`'s fields; nothing here repeats a default or a choice.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from personalized_rewardbench.errors import UserError

EVALUATE_EXAMPLES = """\
examples:
  prbench evaluate                                   # the embedding baseline on the bundled demo sample
  prbench evaluate --model baseline:length --profile-k 3 --limit 50
  prbench evaluate --model OWNER/REWARD-MODEL --subset Society_and_Culture --dtype bfloat16
  prbench evaluate --model OWNER/CHAT-MODEL --model-type judge-pairwise --judge-mode generate
  accelerate launch --num_processes 2 -m personalized_rewardbench evaluate --model OWNER/REWARD-MODEL
"""


def register(commands: argparse._SubParsersAction) -> None:
    """Add `evaluate` (options from RunConfig) and `leaderboard` to the `prbench` subcommands."""
    from personalized_rewardbench.options import add_options
    from personalized_rewardbench.runs.config import RunConfig

    evaluate = commands.add_parser(
        "evaluate",
        help="score a reward model or judge on the benchmark",
        description="Score a reward model or LLM judge on Personalized RewardBench and write results.json.",
        epilog=EVALUATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(evaluate, RunConfig)
    evaluate.set_defaults(handler=evaluate_command)
    board = commands.add_parser("leaderboard", help="one row per run found under DIR, plus a bar chart PNG")
    board.add_argument("dir", nargs="?", default="results", help="folder of runs (default: results)")
    board.set_defaults(handler=leaderboard_command)


def evaluate_command(args: argparse.Namespace) -> int:
    from personalized_rewardbench.options import config_from_args
    from personalized_rewardbench.runs.config import RunConfig
    from personalized_rewardbench.runs.distributed import process_group, single_launch_notice
    from personalized_rewardbench.runs.engine import run_evaluation
    from personalized_rewardbench.runs.results import format_table

    config = config_from_args(RunConfig, args)
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
            f"{100 * results['consistent_accuracy']:.2f}%; "
            f"position bias {100 * results['position_bias']:+.2f} points; no verdict: {results['no_verdict']}"
        )
    elif "no_verdict" in results:
        print(f"judge: answers without a rating: {results['no_verdict']} (their pairs count as ties: wrong)")
    if results.get("truncated_pairs") and results["protocol"].get("name") == "upstream":
        limit = results["protocol"].get("max_length")
        print(f"cut pairs (an input cut at {limit} tokens, as the reference code does): {results['truncated_pairs']}")
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


def leaderboard_command(args: argparse.Namespace) -> int:
    from personalized_rewardbench.runs.leaderboard import leaderboard_rows, print_leaderboard, write_chart

    folder = Path(args.dir)
    if not folder.is_dir():
        raise UserError("not a folder of results", "pass the --output folder of 'prbench evaluate'", where=folder)
    notices: list[str] = []
    rows = leaderboard_rows(folder, notices)
    for notice in notices:
        print(f"prbench: {notice}", file=sys.stderr)
    print_leaderboard(rows)
    if rows:
        print(write_chart(rows, folder / "leaderboard.png"))
    return 0
