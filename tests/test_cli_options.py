"""`prbench evaluate` is generated from RunConfig: same flags as before, every option documented, no drift."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from personalized_rewardbench.cli import REGISTRARS, build_parser, main
from personalized_rewardbench.options import config_from_args, option_fields
from personalized_rewardbench.runs.config import RunConfig

# The flags `prbench evaluate` had when they were written by hand: scripts and docs use them.
FLAGS = {
    "--model", "--revision", "--model-type", "--data", "--subset", "--limit", "--profile-k", "--retriever",
    "--template", "--dtype", "--device", "--trust-remote-code", "--max-length", "--batch-tokens",
    "--no-shared-prefix", "--judge-mode", "--backend", "--max-new-tokens", "--seed", "--output", "--cache-dir",
    "--no-progress",
}  # fmt: skip
#: Flags added since (issue 12: input protocols).
NEW_FLAGS = {"--protocol", "--upstream-prompts"}


def _evaluate_parser():
    commands = next(a for a in build_parser()._actions if a.dest == "command")
    return commands.choices["evaluate"]


def _config(*argv: str) -> RunConfig:
    return config_from_args(RunConfig, _evaluate_parser().parse_args(list(argv)))


def test_every_field_is_an_option_with_the_historic_flags():
    assert len(option_fields(RunConfig)) == len(dataclasses.fields(RunConfig))
    flags = {flag for action in _evaluate_parser()._actions for flag in action.option_strings} - {"-h", "--help"}
    assert flags == FLAGS | NEW_FLAGS


def test_help_shows_every_option_with_its_default_and_examples(capsys):
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for action in _evaluate_parser()._actions:
        if action.dest != "help":
            assert "(default: " in action.help, action.dest
    for expected in (
        "--profile-k PROFILE_K profile posts added to the question (0: none) (default: 0)",
        "--max-new-tokens MAX_NEW_TOKENS judge generation limit (default: 512)",
        "--no-shared-prefix score every input in full (no KV-cache reuse) (default: off)",
        "--model-type {auto,classifier,judge-pairwise,judge-score}",
        "examples: prbench evaluate",
    ):
        assert expected in text


def test_cli_defaults_are_the_dataclass_defaults():
    assert _config() == RunConfig()


def test_flags_reach_the_config():
    config = _config(
        "--subset", "Society_and_Culture", "--no-shared-prefix", "--profile-k", "3", "--output", "out",
        "--cache-dir", "cache", "--trust-remote-code", "--no-progress", "--model-type", "judge-score",
        "--batch-tokens", "512", "--max-length", "64", "--model", "some/rm",
    )  # fmt: skip
    assert (config.subsets, config.shared_prefix, config.profile_k, config.output, config.cache_dir) == (
        ["Society_and_Culture"], False, 3, Path("out"), Path("cache")
    )  # fmt: skip
    assert (config.trust_remote_code, config.progress, config.model_type) == (True, False, "judge-score")
    assert (config.batch_tokens, config.max_length, config.data) == (512, 64, "hub:QiyaoMa/Personalized-RewardBench")


def test_argparse_enforces_declared_choices(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["evaluate", "--judge-mode", "sampling"])
    assert exited.value.code == 2 and "invalid choice: 'sampling'" in capsys.readouterr().err


def test_each_subcommand_module_registers_itself():
    """Every module in REGISTRARS adds at least one subcommand; the core ones come first, in order."""
    import argparse
    import importlib

    added = []
    for module in REGISTRARS:
        parser = argparse.ArgumentParser()
        importlib.import_module(module).register(parser.add_subparsers())
        (commands,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
        assert commands.choices, module
        added += list(commands.choices)
    everything = next(a for a in build_parser()._actions if a.dest == "command")
    assert list(everything.choices) == added and len(added) == len(set(added))
    assert added[:4] == ["evaluate", "leaderboard", "space", "release"]


def test_the_core_never_imports_gradio(tmp_path):
    """`prbench evaluate` and `release build` (and so the metric) run without the Space's libraries."""
    script = (
        "import json, sys\n"
        "from personalized_rewardbench.cli import main\n"
        f"a = main(['evaluate', '--model', 'baseline:length', '--output', {str(tmp_path / 'out')!r}, "
        "'--data', 'sample', '--no-progress'])\n"
        "b = main(['release', 'build', '--source', 'sample', '--version', '1.0.0', "
        f"'--out', {str(tmp_path / 'r')!r}])\n"
        "print(json.dumps([a, b, sorted({m.split('.')[0] for m in sys.modules} & {'gradio', 'spaces'})]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [0, 0, []]
    (results,) = (tmp_path / "out").rglob("results.json")
    assert json.loads(results.read_text())["num_pairs"] == 24
