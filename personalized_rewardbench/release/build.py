"""Build a versioned Hub dataset folder (a "release") from any source, and verify it loads.

Layout written::

    README.md                                  dataset card (YAML configs + dataset_info)
    CHANGELOG.md                               one entry per version
    release.json                               version, source, source revision (machine-readable)
    personalized_rewardbench_loader.py         the datasets builder (not named after the folder)
    data/<Config>/test-00000-of-00001.parquet  one file per subset

The release is assembled in a temporary sibling folder, verified with `datasets.load_dataset` and
with the builder used directly, and only then renamed to its final path.

>>> # build_release("sample", "0.1.0", Path("out/prb"))
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.parquet as pq

from personalized_rewardbench import __version__
from personalized_rewardbench.data.schema import FEATURES, FEATURES_WITH_SUBSET, SUBSET_COLUMN, SUBSETS
from personalized_rewardbench.data.sources import RELEASE_MANIFEST, Source, load_source
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.release.card import DEFAULT_REPO_ID, SubsetStats, render_card
from personalized_rewardbench.release.staged_folder import check_target, staged_folder
from personalized_rewardbench.resources import loading_script
from personalized_rewardbench.runs.hub_probe import offline_if_unreachable

#: Name of the builder inside a release. datasets >= 4 refuses a folder holding `<folder name>.py`.
RELEASE_SCRIPT_NAME = "personalized_rewardbench_loader.py"
_SEMVER = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")


def check_version(version: str) -> str:
    """Accept `X.Y.Z` (a leading `v` is dropped); raise UserError otherwise."""
    bare = version.removeprefix("v")
    if not _SEMVER.fullmatch(bare):
        raise UserError(f"bad --version {version!r}: not semantic versioning X.Y.Z", "e.g. --version 1.0.0")
    return bare


def load_builder_module(path: Path | None = None) -> ModuleType:
    """Import a copy of the loading script by path (it is not part of the installed package)."""
    path = path or loading_script()
    spec = importlib.util.spec_from_file_location(f"prbench_loader_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # datasets re-imports the builder's module by name
    spec.loader.exec_module(module)
    return module


def _write_subset(rows: list[dict[str, Any]], subset: str, folder: Path) -> tuple[SubsetStats, int]:
    table = pa.Table.from_pylist(
        [{**row, SUBSET_COLUMN: subset} for row in rows], schema=FEATURES_WITH_SUBSET.arrow_schema
    )
    path = folder / "data" / subset / "test-00000-of-00001.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(table, path, compression="zstd")
    subset_bytes = table.select(list(FEATURES)).nbytes
    return SubsetStats(len(rows), subset_bytes, path.stat().st_size), table.nbytes


def _changelog(version: str, source: Source, previous: Path | None, notes: str | None) -> str:
    counts = ", ".join(f"{subset} {len(rows)}" for subset, rows in source.rows.items())
    entry = [
        f"## v{version} — {dt.date.today().isoformat()}",
        "",
        f"- Built from {source.public_label} at revision `{source.revision}`.",
    ]
    entry.append(f"- Items: {counts}.")
    if source.is_demo_sample:
        entry.append("- Demo sample written for the personalized-rewardbench package; not benchmark data.")
    if notes:
        entry.append(f"- {notes}")
    header = "# Changelog\n\nAll releases of this dataset; each is tagged `vX.Y.Z` on the Hub.\n"
    older = ""
    if previous is not None:
        if not previous.is_file():
            raise UserError(f"--changelog {previous}: no such file")
        try:
            older = previous.read_text(encoding="utf-8").split("\n## ", 1)
        except UnicodeDecodeError as error:
            raise UserError(
                f"--changelog {previous}: not UTF-8 text (byte {error.start + 1}); save it as UTF-8"
            ) from None
        older = "\n## " + older[1] if len(older) == 2 else ""
        if f"## v{version} " in older:
            raise UserError(f"--changelog {previous}: already has an entry for v{version}", "choose a new --version")
    return header + "\n" + "\n".join(entry) + "\n" + older


def write_release(
    source: Source,
    version: str,
    folder: Path,
    changelog: Path | None = None,
    notes: str | None = None,
    repo_id: str = DEFAULT_REPO_ID,
) -> None:
    """Write all release files for `source` into the (empty) `folder`."""
    stats: dict[str, SubsetStats] = {}
    default_bytes = 0
    for subset in SUBSETS:
        if subset in source.rows:
            stats[subset], with_subset_bytes = _write_subset(source.rows[subset], subset, folder)
            default_bytes += with_subset_bytes
    (folder / "README.md").write_text(
        render_card(
            stats=stats,
            default_num_bytes=default_bytes,
            version=version,
            source=source.public_label,
            source_revision=source.revision,
            demo=source.is_demo_sample,
            repo_id=repo_id,
        ),
        encoding="utf-8",
    )
    (folder / "CHANGELOG.md").write_text(_changelog(version, source, changelog, notes), encoding="utf-8")
    shutil.copyfile(loading_script(), folder / RELEASE_SCRIPT_NAME)
    manifest = {
        "version": version,
        "repo_id": repo_id,
        "source": "sample" if source.is_demo_sample else source.spec,
        "source_revision": source.revision,
        "subsets": {subset: len(rows) for subset, rows in source.rows.items()},
        "package_version": __version__,
        "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    (folder / RELEASE_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def verify_release(folder: Path, expected: Source) -> None:
    """Load every config with `load_dataset` and with the builder; both must equal the source rows."""
    module = load_builder_module(folder / RELEASE_SCRIPT_NAME)
    with tempfile.TemporaryDirectory(prefix="prbench-verify-") as cache:
        for config in [*expected.rows, "default"]:
            loaded = datasets.load_dataset(str(folder), config, split="test", cache_dir=cache)
            builder = module.PersonalizedRewardBench(config_name=config, data_dir=str(folder), cache_dir=cache)
            builder.download_and_prepare()
            built = builder.as_dataset(split="test")
            want = (
                [{**row, SUBSET_COLUMN: subset} for subset, rows in expected.rows.items() for row in rows]
                if config == "default"
                else expected.rows[config]
            )
            features = FEATURES_WITH_SUBSET if config == "default" else FEATURES
            for label, got in (("load_dataset", loaded), ("builder", built)):
                if got.features != features or got.to_list() != want:
                    raise RuntimeError(
                        f"release check failed: {label} of config {config!r} differs from the source rows"
                    )


def build_release(
    source_spec: str,
    version: str,
    out: Path,
    *,
    force: bool = False,
    changelog: Path | None = None,
    notes: str | None = None,
    verify: bool = True,
    repo_id: str = DEFAULT_REPO_ID,
) -> Source:
    """Build the release of `source_spec` at `out`; atomic: on any failure nothing is left at `out`."""
    version = check_version(version)
    if out.expanduser().resolve().name + ".py" == RELEASE_SCRIPT_NAME:
        raise UserError(
            f"--out {out}: datasets refuses a folder holding '{RELEASE_SCRIPT_NAME}'", "choose another folder name"
        )
    check_target(out, force, RELEASE_MANIFEST)
    if source_spec.startswith("hub:") and (notice := offline_if_unreachable()):
        print(notice)
    source = load_source(source_spec)
    missing = [subset for subset in SUBSETS if subset not in source.rows]
    if missing:
        raise UserError(f"{source.spec}: a release needs all subsets; this source lacks {', '.join(missing)}")
    with staged_folder(out, force=force, marker=RELEASE_MANIFEST) as staging:
        write_release(source, version, staging, changelog, notes, repo_id)
        if verify:
            verify_release(staging, source)
    return source
