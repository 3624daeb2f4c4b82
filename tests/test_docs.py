"""Issue 11, class 10: documentation a user follows says what the code does."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from personalized_rewardbench.cli import build_parser
from personalized_rewardbench.release.card import DEMO_NOTICE, DEMO_PROVENANCE, PROVENANCE, SubsetStats, render_card
from personalized_rewardbench.scoring.devices import auto_batch_tokens
from personalized_rewardbench.scoring.model_loading import PAD_TOKEN

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _card(demo: bool) -> str:
    stats = {"Art_and_Entertainment": SubsetStats(8, 100, 90)}
    return render_card(
        stats=stats, default_num_bytes=110, version="0.1.0", source="`sample`", source_revision="r", demo=demo
    )


def test_a_demo_card_never_says_its_pairs_come_from_lamp_qa():
    demo, full = _card(demo=True), _card(demo=False)
    assert DEMO_NOTICE in demo and DEMO_PROVENANCE in demo
    assert "come from the test split of LaMP-QA" not in demo
    assert "no user, question or answer in it comes from LaMP-QA" in demo
    assert PROVENANCE in full and DEMO_NOTICE not in full and DEMO_PROVENANCE not in full


def _readme_commands(prefix: str) -> list[list[str]]:
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.S)
    lines = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith(prefix)]


def test_the_readme_release_sequence_builds_for_the_repo_it_pushes_to():
    build = _readme_commands("prbench release build")[0]  # the release section comes first
    pushes = _readme_commands("prbench release push")
    parser = build_parser()
    built = parser.parse_args(build)
    assert "--repo" in build
    assert pushes and all(parser.parse_args(push).repo == built.repo for push in pushes)
    assert all(parser.parse_args(push).dir == built.out for push in pushes)
    assert all(parser.parse_args(push).tag == f"v{built.version}" for push in pushes)


def test_the_readme_documents_the_pad_token_the_code_adds():
    assert f"`{PAD_TOKEN}`" in README and "pad token is its EOS" in README
    assert "protocol.added_pad_token" in README


def test_the_benchmark_text_states_the_cpu_budget_the_code_uses():
    text = (ROOT / "benchmarks" / "scoring_throughput.py").read_text(encoding="utf-8")
    budget = auto_batch_tokens("cpu")
    assert budget == 2048
    stated = {int(n) for n in re.findall(r"\b(\d{3,}) on CPU", text)}
    assert stated == {budget}
    assert f"{budget} on CPU" in README
