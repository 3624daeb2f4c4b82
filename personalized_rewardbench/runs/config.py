"""Everything that defines one evaluation run, validated once for the CLI and the Space alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from personalized_rewardbench.data.retrieval import RETRIEVERS
from personalized_rewardbench.data.schema import check_subset
from personalized_rewardbench.data.sources import UPSTREAM_REPO
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.devices import auto_batch_tokens
from personalized_rewardbench.scoring.prompts import check_template
from personalized_rewardbench.scoring.protocols import DEFAULT_PROTOCOL, PROTOCOLS, check_protocol

DEFAULT_MODEL = "baseline:embedding"


@dataclass
class RunConfig:
    model: str = DEFAULT_MODEL
    data: str | None = None  # None: the sample for the default model, else the upstream Hub dataset
    subsets: list[str] = field(default_factory=list)  # empty: all
    limit: int | None = None
    profile_k: int = 0
    retriever: str = "contriever"  # falls back to minilm (offline) when contriever cannot be loaded
    template: str = "default"
    protocol: str = field(
        default=DEFAULT_PROTOCOL,
        metadata={
            "help": "input protocol: prbench (chat tokenized directly, posts first, posts dropped before the "
            "answer is cut) or upstream (the reference code's inputs token for token; see README)",
            "choices": PROTOCOLS,
        },
    )
    upstream_prompts: Path | None = field(
        default=None,
        metadata={
            "help": "a local clone of the reference repository (or its prompts/ folder): the pairwise judge "
            "prompts of --protocol upstream"
        },
    )
    model_type: str = "auto"
    revision: str | None = None
    dtype: str = "auto"
    device: str = "auto"
    trust_remote_code: bool = False
    max_length: int | None = None  # None: the registry's value for the model
    batch_tokens: int | None = None  # None: auto_batch_tokens(device), 2048 on CPU, 16384 on CUDA
    seed: int = 42
    judge_mode: str = "logits"
    backend: str = "transformers"
    max_new_tokens: int = 512
    shared_prefix: bool = True
    output: Path = Path("results")
    cache_dir: Path | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        if self.data is None:
            self.data = "sample" if self.model == DEFAULT_MODEL else f"hub:{UPSTREAM_REPO}"
        self.subsets = [] if self.subsets in (["all"], "all") else [check_subset(s) for s in self.subsets]
        if self.profile_k < 0:
            raise UserError(f"--profile-k must be 0 or more, got {self.profile_k}")
        if self.limit is not None and self.limit < 1:
            raise UserError(f"--limit must be a positive number of items per subset, got {self.limit}")
        if self.retriever not in RETRIEVERS:
            raise UserError(f"unknown --retriever {self.retriever!r}: choose one of {', '.join(RETRIEVERS)}")
        if self.max_length is not None and self.max_length < 16:
            raise UserError(f"--max-length must be at least 16 tokens, got {self.max_length}")
        if self.batch_tokens is None:
            self.batch_tokens = auto_batch_tokens(self.device)
        if self.batch_tokens < 1:
            raise UserError(f"--batch-tokens must be positive, got {self.batch_tokens}")
        check_template(self.template)
        check_protocol(self.protocol)
        if self.protocol == "upstream" and self.template != "default":
            raise UserError(
                f"--template {self.template} applies to --protocol prbench; --protocol upstream always uses "
                "the reference code's user turn (question + profile)"
            )
        self.output = Path(self.output)
