"""Render the Hub dataset card (README.md with YAML front matter) from `dataset_card/README.md`.

The front matter is generated from the written data: `configs:` (three subsets plus `default`),
`dataset_info` with the features and per-split `num_examples` / `num_bytes`, license, tags.
A release of another split than `test` (pairs made by `prbench construct` from a train split) is
marked as training data in its name, tags and a notice, so it is never mistaken for the benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

import datasets
import yaml

from personalized_rewardbench import __version__
from personalized_rewardbench.data.schema import FEATURES, FEATURES_WITH_SUBSET, SUBSETS
from personalized_rewardbench.resources import card_template

DEFAULT_REPO_ID = "personalized-rewardbench/personalized-rewardbench"
LICENSE = "apache-2.0"

DEMO_NOTICE = (
    "> **⚠️ Demo sample — not the benchmark.** This release was built from the small demo sample that "
    "ships with the personalized-rewardbench package, written for the package to show how the pieces "
    "work. Its items are not Personalized RewardBench data, and numbers computed on it are not "
    "benchmark results."
)

TRAINING_NOTICE = (
    "> **🛠 Training data — not the benchmark.** This release holds the `{split}` split: preference pairs "
    "made by `prbench construct` for training personalized reward models. Never mix it with the `test` "
    "benchmark, and never report accuracy on it as Personalized RewardBench results.{provenance}"
)


def split_notice(split: str, provenance: str = "") -> str:
    """The card's notice for a non-test split; for `test`, the provenance of constructed pairs, else ''."""
    if split == "test":
        return f"> **Constructed pairs.** {provenance}" if provenance else ""
    return TRAINING_NOTICE.format(split=split, provenance=f" {provenance}" if provenance else "")


#: Where the benchmark's pairs come from (the card of a release built from benchmark data).
PROVENANCE = (
    "The questions and profiles come from the test split of LaMP-QA (StackExchange users with their post\n"
    "histories). For each question the user's narrative was distilled into rubric aspects; then two answers\n"
    "of similar quality and length were generated conditioned on those aspects: `chosen` satisfies them and\n"
    "`rejected` deliberately violates them. Because both answers are competent in general terms, a reward\n"
    "model can only separate them by modelling the individual user."
)
#: The same section on the card of pairs made by `prbench construct` (not from the demo sample).
CONSTRUCTED_PROVENANCE = (
    "The pairs of this release were made by `prbench construct` (personalized-rewardbench) the way the\n"
    "benchmark's were: from LaMP-QA-style rows, a generator wrote `chosen` to cover the user's rubric aspects\n"
    "and `rejected` to go against them, from the same question and top profile posts; only pairs that passed\n"
    "the rubric judge's margin, a length-ratio band and an answer-key leak check were kept (see the notice above)."
)
#: The same section on the card of a demo-sample build: its items come from no dataset.
DEMO_PROVENANCE = (
    "The items of this demo release were written for the personalized-rewardbench package, in the\n"
    "benchmark's format; no user, question or answer in it comes from LaMP-QA or from the benchmark. In the\n"
    "benchmark itself, questions and profiles come from LaMP-QA, and each `chosen` / `rejected` pair was\n"
    "generated to satisfy or violate rubric aspects distilled from the user's narrative."
)


@dataclass
class SubsetStats:
    """What the card reports about one written subset."""

    num_examples: int
    num_bytes: int  # in-memory Arrow size of the config's columns
    download_size: int  # size of the Parquet file


def data_file_pattern(subset: str, split: str = "test") -> str:
    return f"data/{subset}/{split}-*.parquet"


def _configs(subsets: list[str], split: str = "test") -> list[dict[str, Any]]:
    configs: list[dict[str, Any]] = [
        {
            "config_name": subset,
            "data_files": [{"split": split, "path": data_file_pattern(subset, split)}],
            "columns": list(FEATURES),
        }
        for subset in subsets
    ]
    configs.append(
        {
            "config_name": "default",
            "default": True,
            "data_files": [{"split": split, "path": f"data/*/{split}-*.parquet"}],
        }
    )
    return configs


def _info(
    config: str,
    features: datasets.Features,
    num_examples: int,
    num_bytes: int,
    download_size: int,
    split_name: str = "test",
) -> dict[str, Any]:
    split = datasets.SplitInfo(split_name, num_bytes=num_bytes, num_examples=num_examples)
    info = datasets.DatasetInfo(
        features=features,
        config_name=config,
        splits=datasets.SplitDict({split_name: split}),
        download_size=download_size,
        dataset_size=num_bytes,
    )
    return info._to_yaml_dict()


def front_matter(
    stats: dict[str, SubsetStats], default_num_bytes: int, demo: bool, split: str = "test"
) -> dict[str, Any]:
    """The card's YAML metadata as a dict, from the per-subset statistics of the written files."""
    subsets = [subset for subset in SUBSETS if subset in stats]
    total = sum(s.num_examples for s in stats.values())
    infos = [
        _info(s, FEATURES, stats[s].num_examples, stats[s].num_bytes, stats[s].download_size, split) for s in subsets
    ]
    download = sum(s.download_size for s in stats.values())
    infos.append(_info("default", FEATURES_WITH_SUBSET, total, default_num_bytes, download, split))
    name = "Personalized RewardBench" + (" (demo sample)" if demo else "")
    if split != "test":
        name += f" — {split} pairs (training data, not the benchmark)"
    return {
        "license": LICENSE,
        "language": ["en"],
        "pretty_name": name,
        "size_categories": ["n<1K" if total < 1000 else "1K<n<10K" if total < 10000 else "10K<n<100K"],
        "task_categories": ["text-classification"],
        "tags": ["reward-modeling", "personalization", "preference", "rlhf"]
        + (["benchmark"] if split == "test" else ["training-data"])
        + (["demo-sample"] if demo else []),
        "configs": _configs(subsets, split),
        "dataset_info": infos,
    }


def render_card(
    *,
    stats: dict[str, SubsetStats],
    default_num_bytes: int,
    version: str,
    source: str,
    source_revision: str,
    demo: bool,
    repo_id: str = DEFAULT_REPO_ID,
    template_path: Path | None = None,
    split: str = "test",
    provenance: str = "",
) -> str:
    """Fill the card template; every number in it comes from `stats`.

    `split` other than `test` marks the release as training data; `provenance` (one sentence: how the
    pairs were made) goes into that notice."""
    meta = front_matter(stats, default_num_bytes, demo, split)
    counts = "\n".join(f"| `{subset}` | {stats[subset].num_examples:,} |" for subset in SUBSETS if subset in stats)
    counts += f"\n| **total** | {sum(s.num_examples for s in stats.values()):,} |"
    return Template((template_path or card_template()).read_text(encoding="utf-8")).substitute(
        front_matter=yaml.safe_dump(meta, sort_keys=False, allow_unicode=True).rstrip(),
        demo_notice="\n\n".join(n for n in (DEMO_NOTICE if demo else "", split_notice(split, provenance)) if n),
        split=split,
        provenance=DEMO_PROVENANCE if demo else CONSTRUCTED_PROVENANCE if provenance else PROVENANCE,
        counts_table=counts,
        version=version,
        source=source,
        source_revision=source_revision,
        package_version=__version__,
        repo_id=repo_id,
        license=f"Released under the Apache License 2.0 (`{LICENSE}`), as is the upstream benchmark.",
    )


def read_front_matter(card_path: Path) -> dict[str, Any]:
    """Parse the YAML front matter of a rendered card."""
    text = card_path.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        raise ValueError(f"{card_path}: no YAML front matter")
    return yaml.safe_load(text.split("\n---", 2)[0][4:])
