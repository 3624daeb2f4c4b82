"""Where a judge's tokens go: a transformers causal LM (always available) or vLLM (optional, GPU only).

Both backends take token ids (the prompts are built once, in `judges.py`) and offer two calls:

- ``next_token_logprobs(groups, token_ids, last=1)``: for every prompt, the log-probabilities of
  `token_ids` as the next token after each of its last `last` positions (one forward pass, no
  sampling): per group, per prompt, `last` rows, the final row after the whole prompt. `last` > 1
  reads a multi-token choice ("10" as "1" "0") in the same pass. A *group* is a few prompts that
  share a long start (the two orders of a pair, the answers of an item). The transformers backend
  runs each group's shared start once through the shared-prefix mechanism the classifiers use
  (`shared_prefix.py`: one support check, one check before the first shared batch, `verify`); the
  shared start is the longest common prefix of the group's token ids, capped `last` tokens short of
  the shortest prompt. Models the mechanism cannot serve run every prompt in full; `shared_prefix_note`
  says why, the plan's runtime figures how often and how much padding.
- ``generate(prompts, max_new_tokens)``: greedy decoding; the text after the prompt, cut at the first
  end-of-sequence token.

Both count what they computed into the `counters` they are given (a plan's), so a run reports its own
figures however many runs the backend has served.

vLLM reuses shared starts itself (automatic prefix caching). It returns only the top-20 next-token
log-probabilities: a verdict token outside them gets the 20th value (an upper bound). It reads the
`last` > 1 positions by asking for the next token after each shorter prompt (prefix-cached).
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from transformers import GenerationConfig

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.devices import dtype_name
from personalized_rewardbench.scoring.model_loading import (
    attention_implementation,
    load_causal_lm,
    load_tokenizer,
    model_revision,
)
from personalized_rewardbench.scoring.padding import pad_rows, positions
from personalized_rewardbench.scoring.registry import ModelSpec
from personalized_rewardbench.scoring.shared_prefix import (
    DISABLED,
    agree,
    check_failed_note,
    last_logits,
    shared_prefix_length,
    shared_prefix_support,
)

BACKENDS = ("transformers", "vllm")
VLLM_TOP_LOGPROBS = 20
#: What the transformers backend counts while scoring (per plan: `ScoringPlan.counters`).
COUNTERS = (
    "forward_tokens",
    "padded_tokens",
    "prefix_tokens_reused",
    "generated_tokens",
    "shared_prefix_calls",
    "full_forward_calls",
)


@dataclass(frozen=True)
class JudgeSettings:
    """How to load and run a judge, beyond its registry entry (`prbench evaluate`'s judge options)."""

    model: str
    judge_mode: str = "logits"  # "logits" | "generate"
    max_new_tokens: int = 512
    batch_tokens: int | None = None  # None: auto_batch_tokens(device)
    backend: str = "transformers"  # "transformers" | "vllm"
    revision: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    seed: int = 42
    shared_prefix: bool = True


class TransformersBackend:
    """A causal LM through transformers; `tokenizer` pads on the left."""

    name = "transformers"

    def __init__(
        self, model: str, spec: ModelSpec, *, revision: str | None, device: str, dtype: str, shared_prefix: bool = True
    ):
        self.tokenizer = load_tokenizer(model, spec, revision, padding_side="left")
        if not self.tokenizer.chat_template:
            raise UserError(
                f"{model!r} has no chat template: an LLM judge needs a chat model (or a chat_template in the registry)"
            )
        self.model, self.device, self.dtype = load_causal_lm(model, spec, revision, device, dtype)
        if self.tokenizer.pad_token_id is None:
            # Left padding under an explicit attention mask: the pad id is never attended, any id will do.
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        self.revision = model_revision(model, self.model.config, revision)
        positions = getattr(self.model.config, "max_position_embeddings", None)
        self.max_length = min(spec.max_length, positions) if positions else spec.max_length
        self.shared_prefix_note = shared_prefix_support(self.model).reason if shared_prefix else DISABLED
        self.shared_prefix = not self.shared_prefix_note
        self._checked = False  # the model's shared-prefix check has run (`verify`); model state, not run state
        self.stats: Counter = Counter()  # over the backend's lifetime; a plan's own go to its counters

    def describe(self) -> dict[str, Any]:
        return {"dtype": dtype_name(self.dtype), "attn_implementation": attention_implementation(self.model)}

    def runtime_stats(self, counters: Mapping[str, int] | None = None) -> dict[str, Any]:
        """`counters` (default: the backend's lifetime counters) with `padding_fraction`, the share of computed
        positions that were padding, and whether prompts share their start."""
        counts = {key: (self.stats if counters is None else counters).get(key, 0) for key in COUNTERS}
        computed = counts["forward_tokens"] + counts["padded_tokens"]
        stats = {
            **counts,
            "shared_prefix": self.shared_prefix,
            "padding_fraction": round(counts["padded_tokens"] / computed, 4) if computed else 0.0,
        }
        if self.shared_prefix_note:
            stats["shared_prefix_note"] = self.shared_prefix_note
        return stats

    # -- next-token log-probabilities ------------------------------------------------------------
    def verify(self, group: list[list[int]], token_ids: list[int], last: int = 1) -> None:
        """Once per model, before its first shared batch: a short slice of a real prompt group read both ways
        must agree (`shared_prefix.agree`), else no prompt shares its start (`shared_prefix_note` says why)."""
        if self._checked or not self.shared_prefix:
            return
        size = min(shared_prefix_length(group, last), 48)
        if size < 1:
            return  # no shared start to check here; the next plan tries again
        self._checked = True
        sliced = [[seq[:size] + seq[size:][-24:] for seq in group]]
        shared = torch.tensor(self.next_token_logprobs(sliced, token_ids, shared_prefix=True, last=last))
        full = torch.tensor(self.next_token_logprobs(sliced, token_ids, shared_prefix=False, last=last))
        ok, worst = agree(shared.exp(), full.exp(), self.dtype)
        if not ok:
            self.shared_prefix, self.shared_prefix_note = False, check_failed_note(worst)

    @torch.inference_mode()
    def next_token_logprobs(
        self,
        groups: list[list[list[int]]],
        token_ids: list[int],
        shared_prefix: bool | None = None,
        last: int = 1,
        counters: Counter | None = None,
    ) -> list[list[list[list[float]]]]:
        """Per group, per prompt, per last position (`last` rows, the final one after the whole
        prompt): log P(token | prompt up to there) for each of `token_ids`. Groups may differ in size."""
        use_prefix = self.shared_prefix if shared_prefix is None else shared_prefix
        prefixes = [shared_prefix_length(group, last) for group in groups]
        index = torch.tensor(token_ids, dtype=torch.long, device=self.device)
        tally: Counter = Counter()
        pad = self.tokenizer.pad_token_id
        if use_prefix and min(prefixes) > 0:
            split = [(group[0][:length], [seq[length:] for seq in group]) for group, length in zip(groups, prefixes)]
            logits = last_logits(self.model, split, pad, self.device, last)
            suffixes = [len(suffix) for _, group in split for suffix in group]
            tally.update(
                shared_prefix_calls=1,
                forward_tokens=sum(prefixes) + sum(suffixes),
                padded_tokens=len(groups) * max(prefixes)
                - sum(prefixes)
                + len(suffixes) * max(suffixes)
                - sum(suffixes),
                prefix_tokens_reused=sum((len(group) - 1) * length for group, length in zip(groups, prefixes)),
            )
        else:
            ids, mask = pad_rows([seq for group in groups for seq in group], pad, "left")
            logits = self._logits(ids, mask, positions(mask, "left"), last=last)
            tally.update(full_forward_calls=1, forward_tokens=int(mask.sum()), padded_tokens=int((mask == 0).sum()))
        self._tally(tally, counters)
        picked = torch.log_softmax(logits, dim=-1)[..., index].cpu().tolist()
        return [picked[start : start + len(group)] for start, group in zip(_starts(groups), groups)]

    def _tally(self, tally: Counter, counters: Counter | None) -> None:
        self.stats.update(tally)
        if counters is not None:
            counters.update(tally)

    def _logits(self, ids: torch.Tensor, mask: torch.Tensor, position_ids: torch.Tensor, last: int = 1) -> torch.Tensor:
        """Float32 logits at the last `last` columns (every row ends there: rows are left-padded)."""
        output = self.model(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=position_ids.to(self.device),
            use_cache=False,
            logits_to_keep=last,
        )
        return output.logits[:, -last:].float()

    # -- generation -------------------------------------------------------------------------------
    def _stop_ids(self) -> set[int]:
        stop = self.model.generation_config.eos_token_id
        stop = set(stop if isinstance(stop, list) else [stop] if stop is not None else [])
        return (stop | {self.tokenizer.eos_token_id, self.tokenizer.pad_token_id}) - {None}

    @torch.inference_mode()
    def generate(self, sequences: list[list[int]], max_new_tokens: int, counters: Counter | None = None) -> list[str]:
        """Greedy continuations of `sequences`, cut at the first stop token."""
        ids, mask = pad_rows(sequences, self.tokenizer.pad_token_id, "left")
        stop = self._stop_ids()
        settings = GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=sorted(stop),
        )
        output = self.model.generate(
            input_ids=ids.to(self.device), attention_mask=mask.to(self.device), generation_config=settings
        )
        texts, tally = [], Counter(forward_tokens=int(mask.sum()), padded_tokens=int((mask == 0).sum()))
        for row in output[:, ids.shape[1] :].tolist():
            cut = next((n for n, token in enumerate(row) if token in stop), len(row))
            tally["generated_tokens"] += cut
            texts.append(self.tokenizer.decode(row[:cut], skip_special_tokens=False))
        self._tally(tally, counters)
        return texts


def _starts(groups: list[list[Any]]) -> list[int]:
    starts, total = [], 0
    for group in groups:
        starts.append(total)
        total += len(group)
    return starts


class VllmBackend:
    """vLLM on a CUDA GPU, fed the same token ids; prefix caching reuses the shared starts."""

    name = "vllm"

    def __init__(self, model: str, spec: ModelSpec, *, revision: str | None, dtype: str, seed: int):
        check_vllm()
        from transformers import AutoConfig
        from vllm import LLM

        self.tokenizer = load_tokenizer(model, spec, revision, padding_side="left")
        if not self.tokenizer.chat_template:
            raise UserError(
                f"{model!r} has no chat template: an LLM judge needs a chat model (or a chat_template in the registry)"
            )
        config = AutoConfig.from_pretrained(model, revision=revision, trust_remote_code=spec.trust_remote_code)
        self.revision = model_revision(model, config, revision)
        self.device = "cuda"
        self.dtype = dtype if dtype != "auto" else spec.dtype
        positions = getattr(config, "max_position_embeddings", None)
        self.max_length = min(spec.max_length, positions) if positions else spec.max_length
        self.llm = LLM(
            model=model,
            revision=revision,
            dtype=self.dtype,
            seed=seed,
            trust_remote_code=spec.trust_remote_code,
            enable_prefix_caching=True,
            max_model_len=self.max_length,
        )
        self.stats: Counter = Counter()
        self.shared_prefix_note = ""  # vLLM's automatic prefix caching reuses shared starts itself

    def describe(self) -> dict[str, Any]:
        return {"dtype": str(self.llm.llm_engine.model_config.dtype).removeprefix("torch.")}

    def runtime_stats(self, counters: Mapping[str, int] | None = None) -> dict[str, Any]:
        return {"generated_tokens": (self.stats if counters is None else counters).get("generated_tokens", 0)}

    def _run(self, sequences: list[list[int]], params) -> list:
        from vllm.inputs import TokensPrompt

        return self.llm.generate([TokensPrompt(prompt_token_ids=seq) for seq in sequences], params, use_tqdm=False)

    def next_token_logprobs(
        self,
        groups: list[list[list[int]]],
        token_ids: list[int],
        shared_prefix: bool | None = None,
        last: int = 1,
        counters: Counter | None = None,
    ) -> list[list[list[list[float]]]]:
        from vllm import SamplingParams

        prompts = [seq[: len(seq) - back] for group in groups for seq in group for back in range(last - 1, -1, -1)]
        outputs = self._run(prompts, SamplingParams(max_tokens=1, temperature=0.0, logprobs=VLLM_TOP_LOGPROBS))
        rows = []
        for output in outputs:
            top = output.outputs[0].logprobs[0]
            floor = min(entry.logprob for entry in top.values())
            rows.append([top[token].logprob if token in top else floor for token in token_ids])
        per_prompt = [rows[n : n + last] for n in range(0, len(rows), last)]
        return [per_prompt[start : start + len(group)] for start, group in zip(_starts(groups), groups)]

    def generate(self, sequences: list[list[int]], max_new_tokens: int, counters: Counter | None = None) -> list[str]:
        from vllm import SamplingParams

        outputs = self._run(sequences, SamplingParams(max_tokens=max_new_tokens, temperature=0.0))
        generated = Counter(generated_tokens=sum(len(output.outputs[0].token_ids) for output in outputs))
        self.stats.update(generated)
        if counters is not None:
            counters.update(generated)
        return [output.outputs[0].text for output in outputs]


def check_vllm() -> None:
    """Raise a one-line UserError unless vllm is importable and a CUDA GPU is visible."""
    if importlib.util.find_spec("vllm") is None:
        raise UserError(
            "--backend vllm: the vllm package is not installed (pip install vllm, on a machine with a CUDA GPU); "
            "or use --backend transformers"
        )
    if not torch.cuda.is_available():
        raise UserError("--backend vllm needs a CUDA GPU and none is visible; use --backend transformers")


def make_backend(settings: JudgeSettings, spec: ModelSpec):
    """The backend `settings.backend` names."""
    if settings.backend == "vllm":
        return VllmBackend(settings.model, spec, revision=settings.revision, dtype=settings.dtype, seed=settings.seed)
    if settings.backend != "transformers":
        raise UserError(f"unknown --backend {settings.backend!r}: choose one of {', '.join(BACKENDS)}")
    return TransformersBackend(
        settings.model,
        spec,
        revision=settings.revision,
        device=settings.device,
        dtype=settings.dtype,
        shared_prefix=settings.shared_prefix,
    )
