"""Command-line options declared once, on the fields of a configuration dataclass.

A field made with `option(default, help=...)` carries its help text and, where needed, argparse choices,
a flag name that differs from the field name, and words for a default that is computed later (None).
`add_options(parser, Config)` adds one argparse option per such field, its help ending in the default;
`config_from_args(Config, args)` builds the dataclass back from the parsed namespace. A new run option
is therefore one field in `runs/config.py`, nothing in the CLI.

Flags: `--field-name` (underscores become hyphens); a bool that defaults to False is an on-switch
(`--trust-remote-code`), one that defaults to True an off-switch (`--no-progress`). We keep this small
generator instead of `transformers.HfArgumentParser`, which names flags after the field with
underscores, turns every bool into `--flag [true|false]` plus `--no_flag`, and owns the whole parser
rather than one subcommand's.

>>> import argparse
>>> from dataclasses import dataclass
>>> @dataclass
... class Demo:
...     top_k: int = option(3, help="posts per user")
...     progress: bool = option(True, help="show no progress bar")
>>> parser = argparse.ArgumentParser()
>>> add_options(parser, Demo)
>>> config_from_args(Demo, parser.parse_args(["--top-k", "5", "--no-progress"]))
Demo(top_k=5, progress=False)
>>> parser._option_string_actions["--top-k"].help
'posts per user (default: 3)'
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_META = "prbench_option"


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """What the CLI needs to know about one field beyond its name, type and default."""

    help: str
    choices: Sequence[str] | None = None  # enforced by argparse
    flag: str | None = None  # e.g. "--subset" for the field `subsets`
    default_text: str | None = None  # how to describe the default in --help, e.g. "auto: 2048 on CPU"
    metavar: str | None = None
    cli_default: Any = None  # the CLI's default where it differs from the field's (e.g. "all")
    to_field: Callable[[Any], Any] | None = None  # the CLI value -> the field value


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
    **cli: Any,
) -> Any:
    """A dataclass field that is also a command-line option (see `OptionSpec` for `cli` keywords)."""
    return dataclasses.field(
        default=default, default_factory=default_factory, metadata={_META: OptionSpec(help=help, **cli)}
    )


def _value_type(annotation: Any) -> Any:
    """`int | None` -> int; `Path` -> Path; anything else -> str."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
    return annotation if annotation in (int, float, Path) else str


def _flag(name: str, spec: OptionSpec, default: Any) -> str:
    if spec.flag:
        return spec.flag
    stem = name.replace("_", "-")
    return f"--no-{stem}" if default is True else f"--{stem}"


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    return field.default_factory() if field.default_factory is not dataclasses.MISSING else None


def option_fields(config_type: type) -> list[tuple[dataclasses.Field, OptionSpec]]:
    """The fields of `config_type` that are command-line options, in declaration order."""
    return [(field, field.metadata[_META]) for field in dataclasses.fields(config_type) if _META in field.metadata]


def add_options(parser: argparse.ArgumentParser, config_type: type, exclude: Sequence[str] = ()) -> None:
    """Add one option per `option(...)` field of `config_type` (but the fields named in `exclude`); every help
    text ends in its default."""
    hints = typing.get_type_hints(config_type)
    for field, spec in option_fields(config_type):
        if field.name in exclude:
            continue
        default = _default(field) if spec.cli_default is None else spec.cli_default
        flag = _flag(field.name, spec, default)
        if hints[field.name] is bool:
            action = "store_false" if default is True else "store_true"
            help_text = f"{spec.help} (default: {spec.default_text or 'off'})"
            parser.add_argument(flag, dest=field.name, action=action, help=help_text)
            continue
        shown = spec.default_text or (str(default) if default is not None else "none")
        parser.add_argument(
            flag,
            dest=field.name,
            type=_value_type(hints[field.name]),
            default=default,
            choices=spec.choices,
            metavar=spec.metavar or (None if spec.choices else flag.removeprefix("--").replace("-", "_").upper()),
            help=f"{spec.help} (default: {shown})",
        )


def config_from_args(config_type: type, args: argparse.Namespace, **overrides: Any) -> Any:
    """`config_type(...)` from the parsed options (converted by each field's `to_field`), plus `overrides`
    (which also stand for fields left out of the parser)."""
    values = {}
    for field, spec in option_fields(config_type):
        if field.name in overrides:
            continue
        value = getattr(args, field.name)
        values[field.name] = spec.to_field(value) if spec.to_field else value
    return config_type(**{**values, **overrides})
