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
    from personalized_rewardbench.release_build import build_release

    source = build_release(
        args.source, args.version, Path(args.out), force=args.force, changelog=args.changelog, notes=args.notes
    )
    counts = ", ".join(f"{subset}: {len(rows)}" for subset, rows in source.rows.items())
    print(f"release v{args.version.removeprefix('v')} of {source.spec} ({counts})")
    print(Path(args.out).resolve())
    return 0


def _release_push(args: argparse.Namespace) -> int:
    from personalized_rewardbench.release_push import plan_push, push_release

    plan = plan_push(Path(args.dir), args.repo, args.tag)
    print(plan.describe())
    if args.dry_run:
        print("dry run: nothing was uploaded or tagged")
        return 0
    commit = push_release(plan)
    print(f"pushed {plan.repo_id} at {commit}, tagged {plan.tag}")
    return 0


def _release_show(args: argparse.Namespace) -> int:
    from personalized_rewardbench.release_show import show_release

    show_release(Path(args.dir))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prbench", description="Personalized RewardBench tools.")
    parser.add_argument("--version", action="version", version=f"personalized-rewardbench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    release = commands.add_parser("release", help="build, inspect and publish versioned Hub dataset releases")
    release_commands = release.add_subparsers(dest="release_command", required=True)
    build = release_commands.add_parser("build", help="write a complete Hub dataset folder")
    build.add_argument("--source", default="sample", help="sample | FOLDER | hub:OWNER/NAME[@REVISION] (default: sample)")
    build.add_argument("--version", required=True, help="semantic version X.Y.Z")
    build.add_argument("--out", required=True, help="folder to create")
    build.add_argument("--force", action="store_true", help="replace --out if it exists")
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `prbench`; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except UserError as error:
        print(f"prbench: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("prbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
