"""Render the Hub dataset card (README.md with YAML front matter) from `dataset_card/README.md`.

The front matter is generated from the written data: `configs:` (three subsets plus `default`),
`dataset_info` with the features and per-split `num_examples` / `num_bytes`, license, tags.
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

#: Where the benchmark's pairs come from (the card of a release built from benchmark data).
PROVENANCE = (
    "The questions and profiles come from the test split of LaMP-QA (StackExchange users with their post\n"
    "histories). For each question the user's narrative was distilled into rubric aspects; then two answers\n"
    "of similar quality and length were generated conditioned on those aspects: `chosen` satisfies them and\n"
    "`rejected` deliberately violates them. Because both answers are competent in general terms, a reward\n"
    "model can only separate them by modelling the individual user."
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


def data_file_pattern(subset: str) -> str:
    return f"data/{subset}/test-*.parquet"


def _configs(subsets: list[str]) -> list[dict[str, Any]]:
    configs: list[dict[str, Any]] = [
        {
            "config_name": subset,
            "data_files": [{"split": "test", "path": data_file_pattern(subset)}],
            "columns": list(FEATURES),
        }
        for subset in subsets
    ]
    configs.append(
        {"config_name": "default", "default": True, "data_files": [{"split": "test", "path": "data/*/test-*.parquet"}]}
    )
    return configs


def _info(
    config: str, features: datasets.Features, num_examples: int, num_bytes: int, download_size: int
) -> dict[str, Any]:
    split = datasets.SplitInfo("test", num_bytes=num_bytes, num_examples=num_examples)
    info = datasets.DatasetInfo(
        features=features,
        config_name=config,
        splits=datasets.SplitDict({"test": split}),
        download_size=download_size,
        dataset_size=num_bytes,
    )
    return info._to_yaml_dict()


def front_matter(stats: dict[str, SubsetStats], default_num_bytes: int, demo: bool) -> dict[str, Any]:
    """The card's YAML metadata as a dict, from the per-subset statistics of the written files."""
    subsets = [subset for subset in SUBSETS if subset in stats]
    total = sum(s.num_examples for s in stats.values())
    infos = [_info(s, FEATURES, stats[s].num_examples, stats[s].num_bytes, stats[s].download_size) for s in subsets]
    infos.append(
        _info("default", FEATURES_WITH_SUBSET, total, default_num_bytes, sum(s.download_size for s in stats.values()))
    )
    return {
        "license": LICENSE,
        "language": ["en"],
        "pretty_name": "Personalized RewardBench" + (" (demo sample)" if demo else ""),
        "size_categories": ["n<1K" if total < 1000 else "1K<n<10K"],
        "task_categories": ["text-classification"],
        "tags": ["reward-modeling", "personalization", "preference", "rlhf", "benchmark"]
        + (["demo-sample"] if demo else []),
        "configs": _configs(subsets),
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
) -> str:
    """Fill the card template; every number in it comes from `stats`."""
    meta = front_matter(stats, default_num_bytes, demo)
    counts = "\n".join(f"| `{subset}` | {stats[subset].num_examples:,} |" for subset in SUBSETS if subset in stats)
    counts += f"\n| **total** | {sum(s.num_examples for s in stats.values()):,} |"
    return Template((template_path or card_template()).read_text(encoding="utf-8")).substitute(
        front_matter=yaml.safe_dump(meta, sort_keys=False, allow_unicode=True).rstrip(),
        demo_notice=DEMO_NOTICE if demo else "",
        provenance=DEMO_PROVENANCE if demo else PROVENANCE,
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
