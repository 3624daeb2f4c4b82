"""`prbench bon generate`: N sampled answers per benchmark item from a chat policy.

The policy sees a system message (`POLICY_SYSTEM`, versioned by `POLICY_PROMPT`) and the same user
turn a reward model sees (`scoring.prompts.user_message`: the user's top-K posts, then the question).
Sample j of item i is seeded with `sample_seed(seed, item id, j)`. The candidates folder holds:

- ``run.json``: the identity (policy, revision, backend, sampling, prompt version, data, K, N);
- ``candidates.jsonl``: one record per item in dataset order, ``{"id", "subset", "candidates": [N texts]}``;
- later steps' outputs: ``scores/<run>/`` (`bon score`), ``judge/<run>/`` (`bon judge`), ``curves.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.downstream.generation import Sampling, generator_for, sample_seed
from personalized_rewardbench.downstream.resumable import RUN_FILE, check_identity, read_jsonl, run_batches
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.engine import PreparedData, prepare_items
from personalized_rewardbench.scoring.base import fixed_batches
from personalized_rewardbench.scoring.prompts import user_message

CANDIDATES = "candidates"
POLICY_PROMPT = "policy-v1"
POLICY_SYSTEM = (
    "You are a helpful assistant who answers people's questions in a way that suits them personally. "
    "When the user shares some of their earlier posts, use what they reveal (their situation, tastes, "
    "experience and the way they like to be answered) to tailor your answer to them. Answer the question directly."
)


@dataclass
class GenerateConfig:
    policy: str
    output: Path
    n: int = 16
    profile_k: int = 10
    data: str | None = None
    subsets: list[str] = field(default_factory=list)
    limit: int | None = None
    retriever: str = "contriever"
    seed: int = 42
    sampling: Sampling = field(default_factory=Sampling)
    backend: str = "transformers"
    base_url: str | None = None
    revision: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    batch_size: int = 16  # chats per generate call (rounded to whole items)
    concurrency: int = 8  # requests in flight (server backend)
    cache_dir: Path | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        if self.n < 1:
            raise UserError(f"--n must be at least 1 candidate per item, got {self.n}")
        if self.batch_size < 1:
            raise UserError(f"--batch-size must be positive, got {self.batch_size}")
        self.output = Path(self.output)

    def run_config(self) -> RunConfig:
        """The evaluation settings that select the data and rank the profiles (shared with `evaluate`)."""
        return RunConfig(
            model=self.policy,
            data=self.data,
            subsets=self.subsets,
            limit=self.limit,
            profile_k=self.profile_k,
            retriever=self.retriever,
            cache_dir=self.cache_dir,
            progress=self.progress,
        )


def policy_chat(item: EvalItem) -> list[dict[str, str]]:
    """The chat the policy answers."""
    return [{"role": "system", "content": POLICY_SYSTEM}, {"role": "user", "content": user_message(item)}]


def _identity(config: GenerateConfig, data: PreparedData, generator: Any) -> dict[str, Any]:
    return {
        "dataset": data.source.spec,
        "dataset_revision": data.source.revision,
        "demo_sample": data.source.is_demo_sample,
        "subsets": sorted({item.subset for item in data.items}),
        "limit": config.limit,
        "policy": config.policy,
        "policy_revision": generator.revision,
        "backend": generator.name,
        "policy_prompt": POLICY_PROMPT,
        "profile_k": config.profile_k,
        "retriever": data.retriever,
        "n": config.n,
        "seed": config.seed,
        "temperature": config.sampling.temperature,
        "top_p": config.sampling.top_p,
        "max_new_tokens": config.sampling.max_new_tokens,
    }


def generate_candidates(
    config: GenerateConfig, *, rank: int = 0, world_size: int = 1, barrier=lambda: None, log=print
) -> list[dict[str, Any]] | None:
    """Write `<output>/candidates.jsonl` (resumable, sharded); returns its records on rank 0."""
    data = prepare_items(config.run_config(), log if rank == 0 else (lambda _m: None))
    generator = generator_for(config.policy, config)
    if rank == 0:
        config.output.mkdir(parents=True, exist_ok=True)
        check_identity(config.output, _identity(config, data, generator))
    barrier()
    items = data.items

    def work(batch: list[int]) -> list[dict[str, Any]]:
        chats = [policy_chat(items[i]) for i in batch for _ in range(config.n)]
        seeds = [sample_seed(config.seed, items[i].id, j) for i in batch for j in range(config.n)]
        texts = generator.generate(chats, seeds, config.sampling)
        return [
            {"id": items[i].id, "subset": items[i].subset, "candidates": texts[p * config.n : (p + 1) * config.n]}
            for p, i in enumerate(batch)
        ]

    plan = fixed_batches(len(items), max(1, config.batch_size // config.n))
    return run_batches(
        config.output,
        CANDIDATES,
        [item.id for item in items],
        plan,
        work,
        rank=rank,
        world_size=world_size,
        barrier=barrier,
        progress=config.progress,
        desc=f"generating with {config.policy}",
    )


def load_candidates(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(identity, records) of a finished candidates folder, or a one-line error."""
    folder = Path(folder)
    identity_path, path = folder / RUN_FILE, folder / f"{CANDIDATES}.jsonl"
    if not identity_path.is_file():
        raise UserError(f"{folder} is not a candidates folder (no {RUN_FILE}); run `prbench bon generate` first")
    if not path.is_file():
        raise UserError(f"{folder}: generation is not finished ({path.name} missing); rerun `prbench bon generate`")
    return json.loads(identity_path.read_text(encoding="utf-8")), read_jsonl(path)


def candidate_data(identity: dict[str, Any], profile_k: int, retriever: str, cache_dir: Path | None) -> RunConfig:
    """The evaluation settings that rebuild the candidates' items (with another profile K for the scorer)."""
    return RunConfig(
        model=identity["policy"],
        data=identity["dataset"],
        subsets=identity["subsets"],
        limit=identity["limit"],
        profile_k=profile_k,
        retriever=retriever,
        cache_dir=cache_dir,
    )
