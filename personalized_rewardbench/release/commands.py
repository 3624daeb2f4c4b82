"""`prbench release build | push | show`: thin faces over release building, publishing and inspection."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(commands: argparse._SubParsersAction) -> None:
    """Add `release` and its three subcommands to the `prbench` subcommands."""
    from personalized_rewardbench.release.card import DEFAULT_REPO_ID

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
    build.set_defaults(handler=build_command)
    push = release_commands.add_parser("push", help="upload a release folder to the Hub and tag it")
    push.add_argument("--dir", required=True, help="release folder")
    push.add_argument("--repo", required=True, help="OWNER/NAME of the Hub dataset repo")
    push.add_argument("--tag", required=True, help="vX.Y.Z, equal to the release version")
    push.add_argument("--dry-run", action="store_true", help="print the plan, touch nothing")
    push.set_defaults(handler=push_command)
    show = release_commands.add_parser("show", help="load every config of a release with datasets and print it")
    show.add_argument("dir", help="release folder")
    show.set_defaults(handler=show_command)


def build_command(args: argparse.Namespace) -> int:
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


def push_command(args: argparse.Namespace) -> int:
    from personalized_rewardbench.release.push import plan_push, push_release

    plan = plan_push(Path(args.dir), args.repo, args.tag)
    print(plan.describe())
    if args.dry_run:
        print("dry run: nothing was uploaded or tagged")
        return 0
    commit = push_release(plan)
    print(f"pushed {plan.repo_id} at {commit}, tagged {plan.tag}")
    return 0


def show_command(args: argparse.Namespace) -> int:
    from personalized_rewardbench.release.show import show_release

    show_release(Path(args.dir))
    return 0
