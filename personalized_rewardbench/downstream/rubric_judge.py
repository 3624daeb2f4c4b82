"""`prbench bon judge`: the downstream quality of every candidate, rated against the item's rubric.

This is the one place where the answer key is a model input: the judge sees the question, the
item's rubric aspects (aspect and why it matters to this user) and one candidate answer, and rates
each aspect 0 (not covered), 1 (partly) or 2 (fully), ending with ``Ratings: [r1, r2, ...]``
(`RUBRIC_SYSTEM`, our own wording, versioned by `RUBRIC_PROMPT`). A candidate's quality is the
mean over aspects (the reference protocol). Decoding is greedy.

Each unique candidate — the pair (item id, answer text; the rubric belongs to the item) — is judged
exactly once, keyed by `candidate_key`, in a folder named by judge model, revision and prompt
version: ``<candidates>/judge/<judge>-<prompt>-<hash>/judgments.jsonl``. Whichever reward model later
picks a candidate reads that one judgment. An output without a well-formed ``Ratings:`` list (wrong
count, a value outside 0-2) is recorded with ``quality: null``, reported, and excluded downstream;
it is never given a default rating.

>>> parse_ratings("The answer covers the first aspect. Ratings: [2, 0, 1]", 3)
[2, 0, 1]
>>> parse_ratings("Ratings: [2, 1]", 3) is None, parse_ratings("Ratings: [3, 1, 0]", 3) is None
(True, True)
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personalized_rewardbench.data.sources import load_source, select
from personalized_rewardbench.downstream.candidates import load_candidates
from personalized_rewardbench.downstream.generation import Sampling, generator_for
from personalized_rewardbench.downstream.resumable import check_identity, run_batches
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.engine import identity_digest
from personalized_rewardbench.runs.results import slug
from personalized_rewardbench.scoring.base import fixed_batches
from personalized_rewardbench.scoring.verdicts import strip_reasoning

JUDGMENTS = "judgments"
RUBRIC_PROMPT = "rubric-v1"
RUBRIC_SYSTEM = (
    "You are a careful, impartial grader of personalized answers. You will see a user's question, a list "
    "of aspects this particular user needs an answer to address, and one answer. For every aspect, in the "
    "order given, decide how well the answer addresses it: 2 if it addresses the aspect fully, 1 if only "
    "partly or vaguely, 0 if not at all or if it contradicts it. Judge only the listed aspects; ignore "
    "length and style unless an aspect is about them. You may reason briefly first. End your reply with a "
    "final line that is exactly `Ratings: [r1, r2, ...]`, one whole number (0, 1 or 2) per aspect, in order."
)
_RATINGS = re.compile(r"\b(?i:ratings?)\W{0,8}?\[([^\[\]]*)\]")
_ENTRY = re.compile(r"^\s*(?:\*\*)?([0-9]+(?:\.[0-9]+)?)(?:\*\*)?\s*$")


def rubric_user_message(question: str, aspects: list[dict[str, str]], answer: str) -> str:
    listed = "\n".join(
        f"{n}. {aspect['aspect']}" + (f" (why it matters: {aspect['reason']})" if aspect.get("reason") else "")
        for n, aspect in enumerate(aspects, start=1)
    )
    return (
        f"The user's question:\n{question}\n\n"
        f"Aspects this user needs addressed ({len(aspects)}):\n{listed}\n\n"
        f"[Answer]\n{answer}\n[End of answer]\n\n"
        f"Rate each of the {len(aspects)} aspects 0, 1 or 2. End with `Ratings: [...]` holding {len(aspects)} numbers."
    )


def rubric_chat(question: str, aspects: list[dict[str, str]], answer: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": RUBRIC_SYSTEM},
        {"role": "user", "content": rubric_user_message(question, aspects, answer)},
    ]


def parse_ratings(text: str, count: int) -> list[int] | None:
    """The last ``Ratings: [...]`` list when it holds exactly `count` ratings, each 0, 1 or 2; else None."""
    matches = list(_RATINGS.finditer(strip_reasoning(text)))
    if not matches:
        return None
    entries = [_ENTRY.match(entry) for entry in matches[-1].group(1).split(",")]
    if len(entries) != count or not all(entries):
        return None
    values = [float(entry.group(1)) for entry in entries]
    if any(value not in (0.0, 1.0, 2.0) for value in values):
        return None
    return [int(value) for value in values]


def quality(ratings: list[int] | None) -> float | None:
    """Mean rating over aspects, or None when the judgment was unparsable.

    >>> quality([2, 1, 0, 1]), quality(None)
    (1.0, None)
    """
    return sum(ratings) / len(ratings) if ratings else None


def candidate_key(item_id: str, text: str) -> str:
    """The cache key of one candidate: a hash of its item (whose rubric it is rated on) and its text."""
    return hashlib.sha256(f"{item_id}\0{text}".encode()).hexdigest()[:20]


@dataclass
class JudgeConfig:
    judge: str
    candidates: Path
    backend: str = "transformers"
    base_url: str | None = None
    revision: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    max_new_tokens: int = 512
    batch_size: int = 8
    concurrency: int = 8
    progress: bool = True


@dataclass
class JudgeOutcome:
    folder: Path
    records: list[dict[str, Any]] | None  # None on ranks other than 0
    judged_now: int  # chats this process sent to the judge in this call


def unique_candidates(records: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(key, item id, text) of every distinct candidate, in order of first appearance."""
    seen: dict[str, tuple[str, str, str]] = {}
    for record in records:
        for text in record["candidates"]:
            key = candidate_key(record["id"], text)
            seen.setdefault(key, (key, record["id"], text))
    return list(seen.values())


def judge_folder(candidates: Path, identity: dict[str, Any]) -> Path:
    return Path(candidates) / "judge" / f"{slug(identity['judge'])}-{RUBRIC_PROMPT}-{identity_digest(identity)}"


def judge_candidates(config: JudgeConfig, *, rank: int = 0, world_size: int = 1, barrier=lambda: None) -> JudgeOutcome:
    """Judge every unique candidate of a candidates folder once (resumable, sharded)."""
    identity, records = load_candidates(config.candidates)
    source = load_source(identity["dataset"])
    rows = {row["id"]: row for rows in select(source, identity["subsets"], identity["limit"]).values() for row in rows}
    missing = [record["id"] for record in records if record["id"] not in rows]
    if missing:
        raise UserError(f"{config.candidates}: item {missing[0]} is not in {identity['dataset']} any more")
    generator = generator_for(config.judge, config)
    judge_identity = {
        "judge": config.judge,
        "judge_revision": generator.revision,
        "judge_prompt": RUBRIC_PROMPT,
        "max_new_tokens": config.max_new_tokens,
        "dataset": identity["dataset"],
        "dataset_revision": source.revision,
    }
    folder = judge_folder(config.candidates, judge_identity)
    if rank == 0:
        folder.mkdir(parents=True, exist_ok=True)
        check_identity(folder, judge_identity)
    barrier()
    unique = unique_candidates(records)
    sampling = Sampling(temperature=0.0, top_p=1.0, max_new_tokens=config.max_new_tokens)

    def work(batch: list[int]) -> list[dict[str, Any]]:
        chosen = [unique[i] for i in batch]
        aspects = [rows[item_id]["rubric_aspects"] for _, item_id, _ in chosen]
        chats = [rubric_chat(rows[item_id]["question"], asp, text) for (_, item_id, text), asp in zip(chosen, aspects)]
        outputs = generator.generate(chats, [0] * len(chats), sampling)
        judged = []
        for (key, item_id, _), asp, output in zip(chosen, aspects, outputs):
            ratings = parse_ratings(output, len(asp))
            judged.append(
                {"id": key, "item_id": item_id, "ratings": ratings, "quality": quality(ratings), "output": output}
            )
        return judged

    judged = run_batches(
        folder,
        JUDGMENTS,
        [key for key, _, _ in unique],
        fixed_batches(len(unique), config.batch_size),
        work,
        rank=rank,
        world_size=world_size,
        barrier=barrier,
        progress=config.progress,
        desc=f"judging with {config.judge}",
    )
    return JudgeOutcome(folder, judged, generator.calls)
