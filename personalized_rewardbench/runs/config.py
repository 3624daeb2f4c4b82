"""Everything that defines one evaluation run, validated once for the CLI and the Space alike.

Each field declares its command-line option (help, choices, flag) with `option(...)`: `prbench evaluate`
is generated from this class (see `personalized_rewardbench.options`), so a new option is one field here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from personalized_rewardbench.data.retrieval import RETRIEVERS
from personalized_rewardbench.data.schema import SUBSETS, check_subset
from personalized_rewardbench.data.sources import UPSTREAM_REPO
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.options import option
from personalized_rewardbench.scoring.devices import DTYPES, auto_batch_tokens
from personalized_rewardbench.scoring.judge_backends import BACKENDS
from personalized_rewardbench.scoring.judges import JUDGE_MODES
from personalized_rewardbench.scoring.prompts import TEMPLATES, check_template
from personalized_rewardbench.scoring.protocols import DEFAULT_PROTOCOL, PROTOCOLS, check_protocol

DEFAULT_MODEL = "baseline:embedding"
MODEL_TYPES = ("auto", "classifier", "judge-pairwise", "judge-score")


def _one_subset(name: str) -> list[str]:
    return [name]


@dataclass
class RunConfig:
    model: str = option(DEFAULT_MODEL, help="Hub id, local folder, or baseline:length|random|embedding")
    data: str | None = option(
        help="sample | FOLDER | hub:OWNER/NAME[@REV]",
        default=None,
        default_text=f"sample for the default model, else hub:{UPSTREAM_REPO}",
    )
    subsets: list[str] = option(
        help=f"all | {' | '.join(SUBSETS)}",
        default_factory=list,  # empty: all
        flag="--subset",
        cli_default="all",
        to_field=_one_subset,
    )
    limit: int | None = option(None, help="first N items per subset", default_text="all items")
    profile_k: int = option(0, help="profile posts added to the question (0: none)")
    retriever: str = option(
        "contriever",
        help=f"profile ranking: {' | '.join(RETRIEVERS)}",
        default_text="contriever, the upstream protocol; minilm when it cannot be loaded",
    )
    template: str = option("default", help=f"--protocol prbench only: the user turn's wording, {' | '.join(TEMPLATES)}")
    protocol: str = option(
        DEFAULT_PROTOCOL,
        help="how inputs are built: prbench (chat tokenized directly, posts first, posts dropped before an answer "
        "is cut) or upstream (the reference code's inputs token for token; README: Differences from the "
        "reference code)",
        choices=PROTOCOLS,
    )
    upstream_prompts: Path | None = option(
        None,
        help="--protocol upstream pairwise judges: a local clone of the reference repository (or its prompts/ "
        "folder), whose pairwise prompt files are read",
        metavar="DIR",
        default_text="none",
    )
    model_type: str = option(
        "auto", help="how to score: a classifier reward model or an LLM judge", choices=MODEL_TYPES
    )
    revision: str | None = option(
        None, help="model revision (branch, tag or commit) on the Hub", default_text="the default branch"
    )
    dtype: str = option(
        "auto", help=f"auto | {' | '.join(DTYPES)}", default_text="auto: bfloat16 on GPU, float32 on CPU"
    )
    device: str = option("auto", help="auto | cpu | cuda", default_text="auto: cuda when available")
    trust_remote_code: bool = option(False, help="run the model repository's own code (only for repos you trust)")
    max_length: int | None = option(
        None, help="input token limit", default_text="the model registry's, capped by the model"
    )
    batch_tokens: int | None = option(
        None, help="token budget per forward batch", default_text="auto, 2048 on CPU, 16384 on CUDA"
    )
    seed: int = option(42, help="seed of the random baseline and of vLLM sampling")
    judge_mode: str = option("logits", help="judges: read the verdict from logits or generate it", choices=JUDGE_MODES)
    backend: str = option("transformers", help="judges: inference backend", choices=BACKENDS)
    max_new_tokens: int = option(512, help="judge generation limit")
    shared_prefix: bool = option(True, help="score every input in full (no KV-cache reuse)")
    output: Path = option(Path("results"), help="results folder", default_text="./results")
    cache_dir: Path | None = option(
        None, help="profile-ranking cache", default_text="$PRBENCH_CACHE or ~/.cache/prbench"
    )
    progress: bool = option(True, help="no progress bars")

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
