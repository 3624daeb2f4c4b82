"""`prbench construct`: unpaired LaMP-QA-style rows -> generated, verified preference pairs.

Steps, each resumable after kill -9 and sharded over processes with the Best-of-N steps' batch
pattern (`downstream.resumable.run_batches`: a deterministic batch plan, records appended and
fsynced per batch, a rerun skips finished batches, rank r takes batches r, r + N, ...):

1. ``generations``: per item, `chosen` and `rejected` from the generator (`prompts.pair_chats`,
   the user's top-K posts ranked like `evaluate` ranks them), seeded with
   ``sample_seed(seed, item id, 0)`` and ``(..., 1)``, through any backend of `bon generate`.
2. rules on the texts (`verify.rule_check`), no model involved.
3. ``judgments``: the rubric judge of `bon judge` (`downstream.rubric_judge`: its prompt and parser)
   rates both answers of every pair that passed the rules, greedy; with the quality check also on
   the generic `prompts.QUALITY_ASPECTS`. Each (kind, item, answer) is judged once.
4. verdicts, the kept pairs in the release layout and `construct.json` (`output`), by rank 0.

The output folder is also a data source: `prbench release build --source OUT` and
`prbench evaluate --data OUT` read its ``<Config>/<split>-00000-of-00001.parquet``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from personalized_rewardbench.construct.output import write_outputs
from personalized_rewardbench.construct.prompts import CONSTRUCT_PROMPT, QUALITY_ASPECTS, QUALITY_PROMPT, pair_chats
from personalized_rewardbench.construct.tokens import TokenCounter
from personalized_rewardbench.construct.verify import VerifyConfig, judge_check, rule_check
from personalized_rewardbench.data.eval_items import ProfilePost
from personalized_rewardbench.data.ranking_cache import rank_selected
from personalized_rewardbench.data.retrieval import RETRIEVERS
from personalized_rewardbench.data.schema import check_subset
from personalized_rewardbench.data.sources import Source, load_source, select
from personalized_rewardbench.downstream.generation import Sampling, generator_for, make_generator, sample_seed
from personalized_rewardbench.downstream.resumable import RUN_FILE, check_identity, read_jsonl, run_batches
from personalized_rewardbench.downstream.rubric_judge import (
    RUBRIC_PROMPT,
    candidate_key,
    parse_ratings,
    quality,
    rubric_chat,
)
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.base import fixed_batches

GENERATIONS = "generations"
JUDGMENTS = "judgments"
#: Construction samples a little cooler than Best-of-N: both answers should be typical, not diverse.
DEFAULT_SAMPLING = Sampling(temperature=0.7, top_p=0.9, max_new_tokens=256)


@dataclass
class ConstructConfig:
    source: str
    out: Path
    generator: str
    split: str = "test"
    base_url: str | None = None  # the generator behind an OpenAI-compatible server
    judge: str | None = None  # None: the generator model judges too
    judge_base_url: str | None = None
    subsets: list[str] = field(default_factory=list)
    limit: int | None = None
    profile_k: int = 10
    retriever: str = "contriever"
    seed: int = 42
    sampling: Sampling = DEFAULT_SAMPLING
    judge_max_new_tokens: int = 512
    backend: str = "transformers"
    revision: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    batch_size: int = 8  # items per generate call (2 chats each); judge calls take 2 x this many chats
    concurrency: int = 8
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    cache_dir: Path | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        self.subsets = [] if self.subsets in (["all"], "all") else [check_subset(s) for s in self.subsets]
        if self.profile_k < 0:
            raise UserError(f"--profile-k must be 0 or more, got {self.profile_k}")
        if self.retriever not in RETRIEVERS:
            raise UserError(f"unknown --retriever {self.retriever!r}: choose one of {', '.join(RETRIEVERS)}")
        if self.batch_size < 1:
            raise UserError(f"--batch-size must be positive, got {self.batch_size}")
        if self.judge_max_new_tokens < 1:
            raise UserError(f"--judge-max-new-tokens must be positive, got {self.judge_max_new_tokens}")


@dataclass
class Item:
    """One unpaired row and the posts its generator sees."""

    subset: str
    row: dict[str, Any]
    posts: tuple[ProfilePost, ...]

    @property
    def id(self) -> str:
        return self.row["id"]

    def shown(self) -> list[str]:
        """The texts the generator saw besides the aspects (quoting them is no leak)."""
        return [self.row["question"], *(post.text for post in self.posts)]


@dataclass
class ConstructOutcome:
    out: Path
    summary: dict[str, Any] | None  # construct.json; None on ranks other than 0
    notices: list[str]


def prepare(config: ConstructConfig, log: Callable[[str], None] = print) -> tuple[Source, list[Item], str, list[str]]:
    """(source, items, retriever used, notices): unpaired rows of the split, with their top-K posts."""
    source = load_source(config.source, split=config.split, paired=False)
    selected = select(source, config.subsets or None, config.limit)
    rankings, retriever_name, notices = rank_selected(
        selected, source.revision, config.profile_k, config.retriever, config.cache_dir, config.progress, log
    )
    items = []
    for subset, rows in selected.items():
        for row in rows:
            order = rankings.get(row["id"], [])[: config.profile_k]
            posts = tuple(ProfilePost(row["profile"][i]["category"], row["profile"][i]["text"]) for i in order)
            items.append(Item(subset, row, posts))
    return source, items, retriever_name, notices


def _identity(
    config: ConstructConfig, source: Source, items: list[Item], retriever: str, generator: Any, judge: Any
) -> dict[str, Any]:
    sampling = config.sampling
    return {
        "source": source.spec,
        "source_revision": source.revision,
        "split": source.split,
        "demo_sample": source.is_demo_sample,
        "subsets": sorted({item.subset for item in items}),
        "limit": config.limit,
        "generator": {"model": generator.model, "revision": generator.revision, "backend": generator.name},
        "sampling": {
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_new_tokens": sampling.max_new_tokens,
        },
        "seed": config.seed,
        "judge": {
            "model": judge.model,
            "revision": judge.revision,
            "backend": judge.name,
            "max_new_tokens": config.judge_max_new_tokens,
        },
        "prompts": {
            "version": CONSTRUCT_PROMPT,
            "rubric": RUBRIC_PROMPT,
            "quality": QUALITY_PROMPT if config.verify.quality_check else None,
        },
        "profile_k": config.profile_k,
        "retriever": retriever,
        "verify": config.verify.as_dict(),
    }


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; pass a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / RUN_FILE).is_file():
        raise UserError(f"--out {out} is not empty and holds no construction ({RUN_FILE}); choose a new folder")


def make_backends(config: ConstructConfig) -> tuple[Any, Any]:
    """(generator, judge) from the config; the generator model judges itself unless --judge is given."""
    generator = generator_for(config.generator, config)
    if config.judge is None and config.judge_base_url is None:
        return generator, generator
    judge = make_generator(
        config.judge or config.generator,
        config.backend,
        base_url=config.judge_base_url,
        device=config.device,
        dtype=config.dtype,
        concurrency=config.concurrency,
    )
    return generator, judge


def _records(result: list[dict[str, Any]] | None, path: Path, barrier: Callable[[], None]) -> list[dict[str, Any]]:
    """A step's records on every rank: rank 0 has them, the others read the file rank 0 wrote."""
    barrier()
    return result if result is not None else read_jsonl(path)


def run_construction(
    config: ConstructConfig,
    *,
    rank: int = 0,
    world_size: int = 1,
    barrier: Callable[[], None] = lambda: None,
    log: Callable[[str], None] = print,
    backends: tuple[Any, Any] | None = None,
) -> ConstructOutcome:
    """Generate, verify and write the pairs of `config` (this process: its share of every step).

    `backends` = (generator, judge) objects with the `downstream.generation.Generator` interface;
    by default they are built from the config."""
    if rank == 0:
        _check_out(config.out)
    source, items, retriever, notices = prepare(config, log if rank == 0 else (lambda _m: None))
    generator, judge = backends or make_backends(config)
    identity = _identity(config, source, items, retriever, generator, judge)
    if rank == 0:
        config.out.mkdir(parents=True, exist_ok=True)
        check_identity(config.out, identity)
    barrier()
    gen_tokens, judge_tokens = TokenCounter(generator, generator.model), TokenCounter(judge, judge.model)
    keys = [item.id for item in items]
    max_words = config.verify.max_words

    def generate(batch: list[int]) -> list[dict[str, Any]]:
        chats, seeds = [], []
        for i in batch:
            pair = pair_chats(items[i].row, items[i].posts, max_words=max_words)
            chats += [pair["chosen"], pair["rejected"]]
            seeds += [sample_seed(config.seed, items[i].id, 0), sample_seed(config.seed, items[i].id, 1)]
        texts = [text.strip() for text in generator.generate(chats, seeds, config.sampling)]
        return [
            {
                "id": items[i].id,
                "subset": items[i].subset,
                "chosen": texts[2 * p],
                "rejected": texts[2 * p + 1],
                "tokens": [gen_tokens.text(texts[2 * p]), gen_tokens.text(texts[2 * p + 1])],
            }
            for p, i in enumerate(batch)
        ]

    common = dict(rank=rank, world_size=world_size, barrier=barrier, progress=config.progress)
    generated = run_batches(
        config.out, GENERATIONS, keys, fixed_batches(len(items), config.batch_size), generate,
        desc=f"generating pairs with {generator.model}", **common,
    )  # fmt: skip
    generated = _records(generated, config.out / f"{GENERATIONS}.jsonl", barrier)

    rules = [
        rule_check(g["chosen"], g["rejected"], item.row, item.shown(), config.verify)
        for g, item in zip(generated, items)
    ]
    requests = _judge_requests(items, generated, rules, config.verify.quality_check)
    judge_sampling = Sampling(temperature=0.0, top_p=1.0, max_new_tokens=config.judge_max_new_tokens)

    def rate(batch: list[int]) -> list[dict[str, Any]]:
        chats = [requests[i]["chat"] for i in batch]
        outputs = judge.generate(chats, [0] * len(chats), judge_sampling)
        records = []
        for i, chat, output in zip(batch, chats, outputs):
            request = requests[i]
            ratings = parse_ratings(output, request["count"])
            records.append(
                {
                    "id": request["key"],
                    "item_id": request["item_id"],
                    "kind": request["kind"],
                    "role": request["role"],
                    "ratings": ratings,
                    "quality": quality(ratings),
                    "output": output,
                    "tokens": [judge_tokens.chat(chat), judge_tokens.text(output)],
                }
            )
        return records

    judged = run_batches(
        config.out, JUDGMENTS, [r["key"] for r in requests], fixed_batches(len(requests), 2 * config.batch_size),
        rate, desc=f"judging pairs with {judge.model}", **common,
    )  # fmt: skip
    judged = _records(judged, config.out / f"{JUDGMENTS}.jsonl", barrier)
    if rank != 0:
        return ConstructOutcome(config.out, None, notices)

    verdicts = _verdicts(items, generated, rules, judged, config.verify)
    units = {"generated": gen_tokens.unit, "judged": judge_tokens.unit}
    summary = write_outputs(config.out, identity, items, generated, verdicts, judged, units)
    return ConstructOutcome(config.out, summary, notices)


def _judge_requests(
    items: list[Item], generated: list[dict[str, Any]], rules: list[tuple[list[str], dict]], quality_check: bool
) -> list[dict[str, Any]]:
    """What the judge rates: both answers of every pair that passed the rules (rubric, then quality)."""
    kinds = [("rubric", None), *([("quality", list(QUALITY_ASPECTS))] if quality_check else [])]
    requests: dict[str, dict[str, Any]] = {}
    for item, record, (failed, _) in zip(items, generated, rules):
        if failed:
            continue
        for kind, generic in kinds:
            aspects = generic or item.row["rubric_aspects"]
            for role in ("chosen", "rejected"):
                key = f"{kind}:{candidate_key(item.id, record[role])}"
                requests.setdefault(
                    key,
                    {
                        "key": key,
                        "item_id": item.id,
                        "kind": kind,
                        "role": role,
                        "count": len(aspects),
                        "chat": rubric_chat(item.row["question"], aspects, record[role]),
                    },
                )
    return list(requests.values())


def _verdicts(
    items: list[Item],
    generated: list[dict[str, Any]],
    rules: list[tuple[list[str], dict]],
    judged: list[dict[str, Any]],
    verify: VerifyConfig,
) -> list[dict[str, Any]]:
    """One verdict per item: kept, or the reasons it was dropped, with every measurement."""
    by_key = {record["id"]: record for record in judged}
    verdicts = []
    for item, record, (failed, details) in zip(items, generated, rules):
        reasons = list(failed)
        if not failed:
            keys = {role: candidate_key(item.id, record[role]) for role in ("chosen", "rejected")}
            rubric = [by_key[f"rubric:{keys[role]}"]["quality"] for role in ("chosen", "rejected")]
            general = (
                [by_key[f"quality:{keys[role]}"]["quality"] for role in ("chosen", "rejected")]
                if verify.quality_check
                else None
            )
            judge_failed, judge_details = judge_check(rubric, general, verify)
            reasons += judge_failed
            details = {**details, **judge_details}
        verdicts.append({"id": item.id, "subset": item.subset, "kept": not reasons, "reasons": reasons, **details})
    return json.loads(json.dumps(verdicts))
