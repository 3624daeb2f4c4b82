"""The `prbench` command line: thin argument parsing over the library; one error line (+ hint), exit 2.

Adding a subcommand: the subpackage that owns it gets a `commands.py` with `register(commands)`, which
adds its parser(s) to the `prbench` subparsers and sets `handler=` to a function `(args) -> exit status`;
then one line in `REGISTRARS` below wires it in. Keep imports of heavy libraries inside the handlers,
and raise `UserError` for anything the user can fix (this module prints it; no traceback).

    REGISTRARS = (..., "personalized_rewardbench.downstream.commands")  # adds `prbench bon`

`prbench evaluate`'s options are generated from `RunConfig`'s fields (see `personalized_rewardbench.options`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from personalized_rewardbench import __version__
from personalized_rewardbench.errors import UserError

#: Modules exposing `register(commands)`, in the order their subcommands appear in `prbench --help`.
REGISTRARS = (
    "personalized_rewardbench.runs.commands",  # evaluate, leaderboard
    "personalized_rewardbench.cli",  # space (build, push): see register() below
    "personalized_rewardbench.release.commands",  # release (build, push, show)
    "personalized_rewardbench.downstream.commands",  # bon (generate, score, judge, curve), correlate
    "personalized_rewardbench.rewards.cli",  # serve-reward, reward-data
)


def register(commands: argparse._SubParsersAction) -> None:
    """`prbench space build | push` (kept here so that the Space face's package stays free of CLI code)."""
    space = commands.add_parser("space", help="bundle and publish the Gradio Space")
    space_commands = space.add_subparsers(dest="space_command", required=True)
    build = space_commands.add_parser("build", help="write a self-contained Space folder (app + library + metric)")
    build.add_argument("--out", required=True, help="folder to create")
    build.add_argument("--force", action="store_true", help="replace --out if it exists")
    build.set_defaults(handler=_space_build)
    push = space_commands.add_parser("push", help="upload a built Space folder and request ZeroGPU hardware")
    push.add_argument("--dir", required=True, help="a folder written by 'prbench space build'")
    push.add_argument("--repo", required=True, help="OWNER/NAME of the Space")
    push.add_argument("--no-hardware", action="store_true", help="do not request zero-a10g hardware")
    push.set_defaults(handler=_space_push)


def _space_build(args: argparse.Namespace) -> int:
    from personalized_rewardbench.space.bundle import build_space_bundle

    print(build_space_bundle(Path(args.out), force=args.force))
    return 0


def _space_push(args: argparse.Namespace) -> int:
    from personalized_rewardbench.space.bundle import push_space_bundle

    commit = push_space_bundle(Path(args.dir), args.repo, hardware=None if args.no_hardware else "zero-a10g")
    print(f"pushed Space {args.repo} at {commit}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prbench", description="Personalized RewardBench tools.")
    parser.add_argument("--version", action="version", version=f"personalized-rewardbench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for module in REGISTRARS:
        importlib.import_module(module).register(commands)
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
    try:
        args = build_parser().parse_args(argv)
        _quiet_libraries()
        return args.handler(args)
    except UserError as error:
        print(error.render(), file=sys.stderr)
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
