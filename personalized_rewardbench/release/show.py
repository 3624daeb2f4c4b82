"""Print what `datasets.load_dataset` returns for every config of a release folder."""

from __future__ import annotations

from pathlib import Path

import datasets

from personalized_rewardbench.data.sources import RELEASE_MANIFEST, read_manifest
from personalized_rewardbench.errors import UserError


def show_release(folder: Path) -> None:
    """Load each config of the release at `folder` and print its size, columns and first row's id."""
    manifest = read_manifest(folder)
    if manifest is None:
        raise UserError(f"{folder}: not a release folder (no {RELEASE_MANIFEST})")
    print(f"release v{manifest['version']} built from {manifest['source']} ({manifest['source_revision']})")
    for config in datasets.get_dataset_config_names(str(folder)):
        rows = datasets.load_dataset(str(folder), config, split="test")
        print(f"  {config:<36} {rows.num_rows:>6} rows  columns: {', '.join(rows.column_names)}")
