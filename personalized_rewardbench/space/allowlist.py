"""The Space's model allowlist: the only models a visitor can run, read from `space/models.yaml`.

A visitor picks a model by its id from this list; nothing else is ever loaded (no free-text ids).
Each entry says how to load the model — pinned revision, scorer type, dtype, the longest input the
Space scores, whether custom code may run — and its size in billions of parameters, from which the
Space estimates GPU time. Local model folders (e.g. a tiny test model) can be added as classifiers.

>>> allowlist = Allowlist([AllowedModel("baseline:length", "baseline")])
>>> allowlist.get("baseline:length").is_baseline
True
>>> try:
...     allowlist.get("someone/else")
... except UserError as error:
...     print(error)
model 'someone/else' is not on this Space's allowlist; choose one of: baseline:length
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.baselines import BASELINES
from personalized_rewardbench.scoring.devices import DTYPES
from personalized_rewardbench.scoring.registry import resolve_spec

MODEL_TYPES = ("baseline", "classifier", "judge-pairwise", "judge-score")
_FIELDS = {"id", "type", "revision", "dtype", "max_length", "trust_remote_code", "size_b", "description"}


@dataclass(frozen=True)
class AllowedModel:
    """One allowlisted model. `max_length` None keeps the registry's limit; `size_b` is in billions of parameters."""

    id: str
    type: str
    revision: str | None = None
    dtype: str = "auto"
    max_length: int | None = None
    trust_remote_code: bool = False
    size_b: float = 0.0
    description: str = ""

    @property
    def is_baseline(self) -> bool:
        return self.type == "baseline"

    @property
    def label(self) -> str:
        """What the model menu shows: id, type and size."""
        size = f", {self.size_b:g}B" if self.size_b >= 0.1 else ""
        return f"{self.id} ({self.type}{size})"


class Allowlist:
    """Allowlisted models in file order; `get` is the only way to turn a visitor's choice into a model."""

    def __init__(self, models: Iterable[AllowedModel]):
        self.models: dict[str, AllowedModel] = {}
        self.unavailable: dict[str, str] = {}  # model id -> why it could not be loaded at start-up
        for model in models:
            if model.id in self.models:
                raise UserError(f"allowlist: model {model.id!r} is listed twice", "keep one entry")
            self.models[model.id] = model

    def get(self, model_id: str | None) -> AllowedModel:
        model = self.models.get(model_id or "")
        if model is None:
            raise UserError(
                f"model {model_id!r} is not on this Space's allowlist; choose one of: {', '.join(self.models)}"
            )
        if model.id in self.unavailable:
            raise UserError(f"{model.id} is unavailable on this Space ({self.unavailable[model.id]}); choose another")
        return model

    def mark_unavailable(self, model_id: str, reason: str) -> None:
        """Keep `model_id` in the menu but refuse it, saying why (e.g. it failed to load at start-up)."""
        self.unavailable[model_id] = reason

    def label(self, model: AllowedModel) -> str:
        """The menu entry: the model's label, marked when it is unavailable."""
        return model.label + (" — unavailable" if model.id in self.unavailable else "")

    def ids(self, types: Sequence[str] = MODEL_TYPES) -> list[str]:
        return [model.id for model in self.models.values() if model.type in types]

    def hub_ids(self) -> list[str]:
        """Ids of Hub models (what the Space card's `models:` lists): not baselines, not local folders."""
        return [
            model.id for model in self.models.values() if not model.is_baseline and not Path(model.id).is_absolute()
        ]


def _entry(raw: Any, where: str) -> AllowedModel:
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not raw["id"].strip():
        raise UserError(f"{where}: each entry needs an 'id' string")
    model_id = raw["id"]
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise UserError(f"{where}: {model_id}: unknown field {unknown[0]!r}; fields are {', '.join(sorted(_FIELDS))}")
    model_type = raw.get("type", "classifier")
    if model_type not in MODEL_TYPES:
        raise UserError(f"{where}: {model_id}: type {model_type!r} is not one of {', '.join(MODEL_TYPES)}")
    if model_type == "baseline" and model_id not in BASELINES:
        raise UserError(f"{where}: {model_id}: not a baseline; baselines are {', '.join(BASELINES)}")
    dtype = raw.get("dtype", "auto")
    if dtype != "auto" and dtype not in DTYPES:
        raise UserError(f"{where}: {model_id}: dtype {dtype!r} is not auto or one of {', '.join(DTYPES)}")
    max_length = raw.get("max_length")
    if max_length is not None and (not isinstance(max_length, int) or max_length < 16):
        raise UserError(f"{where}: {model_id}: max_length must be an integer of at least 16")
    trust = raw.get("trust_remote_code", False)
    if not isinstance(trust, bool):
        raise UserError(f"{where}: {model_id}: trust_remote_code must be true or false")
    if model_type != "baseline" and resolve_spec(model_id).trust_remote_code and not trust:
        raise UserError(
            f"{model_id}: the model registry runs it with custom code",
            "say trust_remote_code: true, or remove the entry",
            where=where,
        )
    revision = raw.get("revision")
    return AllowedModel(
        id=model_id,
        type=model_type,
        revision=str(revision) if revision is not None else None,
        dtype=dtype,
        max_length=max_length,
        trust_remote_code=trust,
        size_b=float(raw.get("size_b", 0.0)),
        description=str(raw.get("description", "")),
    )


def local_model(folder: Path) -> AllowedModel:
    """A local model folder allowlisted as a classifier (its size read from the weight files)."""
    folder = folder.expanduser().resolve()
    if not (folder / "config.json").is_file():
        raise UserError("extra model: no config.json there", "pass a folder written by save_pretrained", where=folder)
    weight_bytes = sum(path.stat().st_size for path in folder.glob("*.safetensors")) or sum(
        path.stat().st_size for path in folder.glob("*.bin")
    )
    dtype = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("dtype") or "float32"
    bytes_per_param = 2 if dtype in ("bfloat16", "float16") else 4
    return AllowedModel(
        id=str(folder),
        type="classifier",
        size_b=weight_bytes / bytes_per_param / 1e9,
        description=f"local model folder {folder.name}",
    )


def load_allowlist(path: Path, extra_dirs: Sequence[Path] = ()) -> Allowlist:
    """Read `path` (YAML: `models:` list) and add `extra_dirs` as local classifiers."""
    try:
        payload = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise UserError(f"cannot read the allowlist {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise UserError(f"{path}: not valid YAML ({str(error).splitlines()[0]})") from None
    entries = payload.get("models") if isinstance(payload, dict) else None
    if not isinstance(entries, list) or not entries:
        raise UserError(f"{path}: expected a top-level 'models:' list with at least one entry")
    models = [_entry(raw, str(path)) for raw in entries]
    models += [local_model(Path(folder)) for folder in extra_dirs]
    return Allowlist(models)
