"""Read benchmark rows from wherever they live: the bundled sample, a local folder, or the Hub.

A source spec is one string:

- ``sample`` — the demo sample bundled with this package (written for it; not benchmark data);
- a local folder, either a release built by ``prbench release build`` (``data/<Config>/test-*.parquet``)
  or the upstream layout (``<Config>/test-*.parquet`` or ``<Config>/test-*.jsonl``);
- ``hub:OWNER/NAME[@REVISION]`` — that layout downloaded with huggingface_hub (uses the local cache
  when ``HF_HUB_OFFLINE=1``).

>>> source = load_source("sample")
>>> source.kind, sorted(source.rows)[0]
('sample', 'Art_and_Entertainment')
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from personalized_rewardbench import __version__
from personalized_rewardbench.data.schema import SUBSETS, validate_rows
from personalized_rewardbench.errors import UserError

UPSTREAM_REPO = "QiyaoMa/Personalized-RewardBench"
SAMPLE_DIR = Path(__file__).resolve().parent / "sample"
RELEASE_MANIFEST = "release.json"


@dataclass
class Source:
    """Validated rows per subset plus where they came from."""

    spec: str
    kind: str  # "sample" | "folder" | "release" | "hub"
    rows: dict[str, list[dict[str, Any]]]
    revision: str
    version: str | None = None
    files: dict[str, Path] = field(default_factory=dict)
    origin: str = ""  # for releases: the source spec the release was built from

    @property
    def is_demo_sample(self) -> bool:
        """True when the rows are the bundled demo sample (directly or through a release built from it)."""
        return self.kind == "sample" or self.origin == "sample"

    @property
    def public_label(self) -> str:
        """How cards and changelogs name the source: local paths mean nothing on the Hub."""
        if self.kind in ("sample", "hub"):
            return f"`{self.spec}`"
        return f"a local folder (`{Path(self.spec).name}`)"

    def num_rows(self) -> int:
        return sum(len(rows) for rows in self.rows.values())


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSON Lines file; a line that is not a JSON object is one error naming the line."""
    rows = []
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise UserError(
                    f"{path}: line {line_number}: not UTF-8 text (byte {error.start + 1}); save the file as UTF-8"
                ) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise UserError(
                    f"line {line_number}: not valid JSON ({error.msg})", "fix or remove that line", where=path
                ) from None
            if not isinstance(row, dict):
                raise UserError(
                    f"{path}: line {line_number}: expected a JSON object (one row), got {_json_type(row)}; "
                    "fix or remove that line"
                )
            rows.append(row)
    return rows


def _json_type(value: Any) -> str:
    """How JSON names the type of a decoded value: `null`, `array`, `number`, ..."""
    names = {type(None): "null", list: "an array", str: "a string", bool: "a boolean", int: "a number"}
    return names.get(type(value), "a number" if isinstance(value, float) else type(value).__name__)


def _read_rows(path: Path) -> list[dict[str, Any]]:
    try:
        if path.suffix == ".parquet":
            return pq.read_table(path).to_pylist()
        return _read_jsonl(path)
    except UserError:
        raise
    except (OSError, ValueError) as error:
        reason = (str(error).splitlines() or [""])[0][:200]
        raise UserError(
            f"cannot read it as a {path.suffix[1:]} file ({type(error).__name__}: {reason})", where=path
        ) from None


def _subset_files(folder: Path, subset: str) -> list[Path]:
    for base in (folder / "data" / subset, folder / subset):
        files = sorted(base.glob("test-*.parquet")) or sorted(base.glob("test-*.jsonl"))
        if files:
            return files
    return []


def _content_revision(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return "sha256:" + digest.hexdigest()[:16]


def _load_folder(folder: Path, spec: str, kind: str, revision: str | None = None) -> Source:
    if not folder.is_dir():
        raise UserError(
            "the data folder does not exist", "pass --data sample, a folder, or hub:OWNER/NAME[@REV]", where=folder
        )
    found = {subset: _subset_files(folder, subset) for subset in SUBSETS}
    if not any(found.values()):
        raise UserError(
            "no subset files found",
            "write <Config>/test-*.parquet (or .jsonl) or data/<Config>/test-*.parquet "
            f"for Configs {', '.join(SUBSETS)}",
            where=folder,
        )
    rows: dict[str, list[dict[str, Any]]] = {}
    files: dict[str, Path] = {}
    for subset, paths in found.items():
        if not paths:
            continue
        subset_rows: list[dict[str, Any]] = []
        for path in paths:
            subset_rows.extend(_read_rows(path))
        label = str(paths[0]) if len(paths) == 1 else f"{paths[0].parent}/test-*"
        if not subset_rows:
            raise UserError("holds no rows", "remove the file or fill it", where=label)
        rows[subset] = validate_rows(subset_rows, label)
        files[subset] = paths[0]
    check_unique_ids(rows, str(folder))
    all_files = [path for paths in found.values() for path in paths]
    manifest = read_manifest(folder)
    return Source(
        spec=spec,
        kind="release" if manifest and kind == "folder" else kind,
        rows=rows,
        revision=revision or _content_revision(all_files),
        version=manifest.get("version") if manifest else None,
        files=files,
        origin=manifest.get("source", "") if manifest else "",
    )


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The release.json of a release folder, or None when there is none."""
    path = folder / RELEASE_MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:  # invalid JSON or not UTF-8
        raise UserError("not valid JSON", "rebuild the release with 'prbench release build'", where=path) from None
    if not isinstance(manifest, dict) or not all(
        isinstance(manifest.get(key, ""), str) for key in ("version", "source", "repo_id")
    ):
        raise UserError(
            "not a release manifest (expected an object of strings)",
            "rebuild the release with 'prbench release build'",
            where=path,
        )
    return manifest


def check_unique_ids(rows: dict[str, list[dict[str, Any]]], source: str) -> None:
    """Ids identify items across all subsets (scores, caches and the `default` config key on them)."""
    owner: dict[str, str] = {}
    for subset, subset_rows in rows.items():
        for row in subset_rows:
            if row["id"] in owner:
                raise UserError(
                    f"row {row['id']}: field 'id': in both {owner[row['id']]} and {subset}",
                    "ids must be unique across subsets",
                    where=source,
                )
            owner[row["id"]] = subset


def parse_hub_spec(spec: str) -> tuple[str, str | None]:
    """Split ``hub:OWNER/NAME[@REVISION]`` into (repo id, revision or None)."""
    target = spec.removeprefix("hub:")
    repo_id, _, revision = target.partition("@")
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise UserError(f"bad Hub source {spec!r}: write hub:OWNER/NAME or hub:OWNER/NAME@REVISION")
    return repo_id, revision or None


def _load_hub(spec: str) -> Source:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    repo_id, revision = parse_hub_spec(spec)
    patterns = [f"{s}/test-*" for s in SUBSETS] + [f"data/{s}/test-*" for s in SUBSETS] + [RELEASE_MANIFEST]
    try:
        local = Path(snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=patterns))
    except (RepositoryNotFoundError, RevisionNotFoundError) as error:
        raise UserError(
            f"{spec}: {type(error).__name__}", "check the repo id and revision (and your token for private repos)"
        ) from None
    except LocalEntryNotFoundError:
        raise UserError(
            f"{spec}: not in the local Hub cache and the Hub cannot be reached (offline?)", "download it once online"
        ) from None
    except (HfHubHTTPError, OSError) as error:
        raise UserError(
            f"{spec}: download failed ({type(error).__name__})", "check the network, or pass a local folder as --data"
        ) from None
    # snapshot folders are named after the resolved commit
    return _load_folder(local, spec, "hub", revision=local.name)


def _load_sample() -> Source:
    rows = {
        subset: validate_rows(_read_jsonl(SAMPLE_DIR / f"{subset}.jsonl"), f"sample/{subset}.jsonl")
        for subset in SUBSETS
    }
    check_unique_ids(rows, "sample")
    files = {subset: SAMPLE_DIR / f"{subset}.jsonl" for subset in SUBSETS}
    revision = _content_revision(list(files.values()))
    return Source(
        spec="sample",
        kind="sample",
        rows=rows,
        revision=revision,
        version=f"sample-{__version__}",
        files=files,
        origin="sample",
    )


def load_source(spec: str = "sample") -> Source:
    """Load and validate every subset of `spec` (see the module docstring for the forms)."""
    if spec == "sample":
        return _load_sample()
    if spec.startswith("hub:"):
        return _load_hub(spec)
    try:
        folder = Path(spec).expanduser().resolve()
    except (OSError, RuntimeError) as error:  # a symlink loop: RuntimeError before Python 3.13, OSError since
        raise UserError(f"data folder {spec}: cannot resolve the path ({error}); pass a real folder") from None
    return _load_folder(folder, str(folder), "folder")


def select(
    source: Source, subsets: list[str] | None = None, limit: int | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The rows to evaluate: the chosen subsets (all present ones by default), first `limit` per subset."""
    if limit is not None and limit < 1:
        raise UserError(f"--limit must be a positive number of items per subset, got {limit}")
    wanted = subsets or [subset for subset in SUBSETS if subset in source.rows]
    missing = [subset for subset in wanted if subset not in source.rows]
    if missing:
        raise UserError(f"{source.spec}: has no subset {', '.join(missing)}; it has {', '.join(source.rows)}")
    return {subset: source.rows[subset][:limit] if limit else list(source.rows[subset]) for subset in wanted}
