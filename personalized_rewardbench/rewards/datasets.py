"""Benchmark-format rows as RL prompt data: a TRL prompt dataset and verl's parquet prompt format.

Both go through `evaluate`'s own path (`prepare_items`: data source, profile ranking with the same
retriever and cache, model-facing items), so the answer key (`narrative`, `rubric_aspects`) never
reaches a policy prompt or a reward input, and the `chosen` / `rejected` answers are left out too.

- TRL (`trl_prompt_dataset`): a conversational `prompt` (the user turn the reward model sees:
  the top-k posts and the question, through the prompt template) plus the columns the reward reads:
  `question`, `posts` (ranked, most relevant first), `id`, `subset`.
- verl (`write_verl_parquet`): `data_source`, `prompt`, `ability`, `reward_model`
  (`{"style": "model", "ground_truth": ""}`) and `extra_info` with `split`, `index`, `id`, `subset`,
  `question` and `posts`: what `verl_reward.compute_score` sends to the reward server.

>>> rows = prompt_rows(prepare("sample", limit=1, profile_k=0))
>>> rows[0]["prompt"][0]["role"], sorted(rows[0])
('user', ['id', 'posts', 'prompt', 'question', 'subset'])
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.rewards.settings import DEFAULT_PROFILE_K
from personalized_rewardbench.runs.config import RunConfig
from personalized_rewardbench.runs.engine import prepare_items
from personalized_rewardbench.scoring.prompts import user_message

#: verl picks the reward function by `data_source`; ours is named after the package.
VERL_DATA_SOURCE = "personalized_rewardbench"
VERL_ABILITY = "personalized_answer"


def prepare(
    data: str = "sample",
    *,
    subsets: Sequence[str] = (),
    limit: int | None = None,
    profile_k: int = DEFAULT_PROFILE_K,
    retriever: str = "contriever",
    cache_dir: Path | None = None,
    progress: bool = False,
) -> list[EvalItem]:
    """Model-facing items of `data` (a `prbench evaluate --data` spec) with their top-k ranked posts."""
    config = RunConfig(
        data=data,
        subsets=list(subsets),
        limit=limit,
        profile_k=profile_k,
        retriever=retriever,
        cache_dir=cache_dir,
        progress=progress,
    )
    return prepare_items(config, log=lambda _notice: None).items


def _posts(item: EvalItem) -> list[dict[str, str]]:
    return [{"category": post.category, "text": post.text} for post in item.posts]


def prompt_rows(items: Sequence[EvalItem], template: str = "default") -> list[dict[str, Any]]:
    """One TRL row per item: the conversational prompt and the reward's columns."""
    return [
        {
            "prompt": [{"role": "user", "content": user_message(item, template)}],
            "question": item.question,
            "posts": _posts(item),
            "id": item.id,
            "subset": item.subset,
        }
        for item in items
    ]


def trl_prompt_dataset(
    data: str = "sample",
    *,
    subsets: Sequence[str] = (),
    limit: int | None = None,
    profile_k: int = DEFAULT_PROFILE_K,
    retriever: str = "contriever",
    template: str = "default",
    cache_dir: Path | None = None,
):
    """A `datasets.Dataset` of TRL prompts for `data`; pass it as `train_dataset` with `PersonalizedReward`."""
    from datasets import Dataset, Features, List, Value

    items = prepare(data, subsets=subsets, limit=limit, profile_k=profile_k, retriever=retriever, cache_dir=cache_dir)
    text = Value("string")
    features = Features(
        {
            "prompt": List({"role": text, "content": text}),
            "question": text,
            "posts": List({"category": text, "text": text}),
            "id": text,
            "subset": text,
        }
    )
    return Dataset.from_list(prompt_rows(items, template), features=features)


def verl_rows(items: Sequence[EvalItem], split: str = "train", template: str = "default") -> list[dict[str, Any]]:
    """verl's prompt records; `extra_info` carries what the reward server needs."""
    return [
        {
            "data_source": VERL_DATA_SOURCE,
            "prompt": [{"role": "user", "content": user_message(item, template)}],
            "ability": VERL_ABILITY,
            "reward_model": {"style": "model", "ground_truth": ""},
            "extra_info": {
                "split": split,
                "index": index,
                "id": item.id,
                "subset": item.subset,
                "question": item.question,
                "posts": _posts(item),
            },
        }
        for index, item in enumerate(items)
    ]


def write_verl_parquet(items: Sequence[EvalItem], path: Path, split: str = "train", template: str = "default") -> Path:
    """Write `items` as verl prompt parquet at `path` (atomically: temp file, then rename)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text, post = pa.string(), pa.struct([("category", pa.string()), ("text", pa.string())])
    schema = pa.schema(
        [
            ("data_source", text),
            ("prompt", pa.list_(pa.struct([("role", text), ("content", text)]))),
            ("ability", text),
            ("reward_model", pa.struct([("style", text), ("ground_truth", text)])),
            (
                "extra_info",
                pa.struct(
                    [
                        ("split", text),
                        ("index", pa.int64()),
                        ("id", text),
                        ("subset", text),
                        ("question", text),
                        ("posts", pa.list_(post)),
                    ]
                ),
            ),
        ]
    )
    table = pa.Table.from_pylist(verl_rows(items, split, template), schema=schema)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(table, temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path
