"""Where a judge's tokens go: a transformers causal LM (always available) or vLLM (optional, GPU only).

Both backends take token ids (the prompts are built once, in `judges.py`) and offer two calls:

- ``next_token_logprobs(groups, token_ids, last=1)``: for every prompt, the log-probabilities of
  `token_ids` as the next token after each of its last `last` positions (one forward pass, no
  sampling): per group, per prompt, `last` rows, the final row after the whole prompt. `last` > 1
  reads a multi-token choice ("10" as "1" "0") in the same pass. A *group* is a few prompts that
  share a long start (the two orders of a pair, the two answers of an item). The transformers backend
  runs each group's shared start once and continues every prompt from a copy of its KV cache
  (`DynamicCache`); the shared start is the longest common prefix of the group's token ids (so it is
  a true prefix of each prompt by construction), capped `last` tokens short of the shortest prompt.
  Prompts are left-padded with explicit position ids, so padding never moves a token's position.
  Models whose cache is not a plain `DynamicCache` (recurrent / linear-attention layers) run every
  prompt in full; `shared_prefix_note` says why, `runtime_stats()` how often and how much padding.
- ``generate(prompts, max_new_tokens)``: greedy decoding; the text after the prompt, cut at the first
  end-of-sequence token.

vLLM reuses shared starts itself (automatic prefix caching). It returns only the top-20 next-token
log-probabilities: a verdict token outside them gets the 20th value (an upper bound). It reads the
`last` > 1 positions by asking for the next token after each shorter prompt (prefix-cached).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import torch
from transformers import DynamicCache, GenerationConfig

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.devices import dtype_name
from personalized_rewardbench.scoring.model_loading import (
    attention_implementation,
    load_causal_lm,
    load_tokenizer,
    model_revision,
)
from personalized_rewardbench.scoring.registry import ModelSpec
from personalized_rewardbench.scoring.shared_prefix import common_prefix_length

BACKENDS = ("transformers", "vllm")
VLLM_TOP_LOGPROBS = 20


def shared_prefix_length(sequences: list[list[int]], keep: int = 1) -> int:
    """Length of the longest common prefix of `sequences`, at most `keep` tokens short of the shortest.

    >>> shared_prefix_length([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]])
    2
    >>> shared_prefix_length([[7, 8], [7, 8]]), shared_prefix_length([[7, 8, 9], [7, 8, 9]], keep=2)
    (1, 1)
    """
    limit = max(0, min(map(len, sequences)) - keep)
    return min([limit, *(common_prefix_length(sequences[0], other) for other in sequences[1:])])


def _left_pad(sequences: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, sequences))
    ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        if seq:
            ids[row, width - len(seq) :] = torch.tensor(seq)
            mask[row, width - len(seq) :] = 1
    return ids, mask


def _positions(mask: torch.Tensor, start: torch.Tensor | None = None) -> torch.Tensor:
    """Position ids counting real tokens only (from `start` per row); padding gets 1, as in generate()."""
    positions = mask.cumsum(-1) - 1
    if start is not None:
        positions = positions + start[:, None]
    return positions.masked_fill(mask == 0, 1)


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
        if not shared_prefix:
            self.shared_prefix_note = "disabled by --no-shared-prefix"
        elif not type(self.model)._supports_default_dynamic_cache() or not self._plain_cache():
            self.shared_prefix_note = (
                "the model's cache is not a plain DynamicCache (recurrent or linear-attention layers)"
            )
        else:
            self.shared_prefix_note = ""
        self.shared_prefix = not self.shared_prefix_note
        self.stats = {
            "forward_tokens": 0,
            "padded_tokens": 0,
            "prefix_tokens_reused": 0,
            "generated_tokens": 0,
            "shared_prefix_calls": 0,
            "full_forward_calls": 0,
        }

    def _plain_cache(self) -> bool:
        try:
            cache = DynamicCache(config=self.model.config)
        except (TypeError, ValueError, AttributeError):
            return False
        return all(type(layer).__name__ in ("DynamicLayer", "DynamicSlidingWindowLayer") for layer in cache.layers)

    def describe(self) -> dict[str, Any]:
        return {"dtype": dtype_name(self.dtype), "attn_implementation": attention_implementation(self.model)}

    def runtime_stats(self) -> dict[str, Any]:
        """Counters so far; `padding_fraction` is the share of computed positions that were padding."""
        computed = self.stats["forward_tokens"] + self.stats["padded_tokens"]
        stats = {
            **self.stats,
            "shared_prefix": self.shared_prefix,
            "padding_fraction": round(self.stats["padded_tokens"] / computed, 4) if computed else 0.0,
        }
        if self.shared_prefix_note:
            stats["shared_prefix_note"] = self.shared_prefix_note
        return stats

    # -- next-token log-probabilities ------------------------------------------------------------
    @torch.inference_mode()
    def next_token_logprobs(
        self, groups: list[list[list[int]]], token_ids: list[int], shared_prefix: bool | None = None, last: int = 1
    ) -> list[list[list[list[float]]]]:
        """Per group, per prompt, per last position (`last` rows, the final one after the whole
        prompt): log P(token | prompt up to there) for each of `token_ids`."""
        use_prefix = self.shared_prefix if shared_prefix is None else shared_prefix
        size = len(groups[0])
        prefixes = [shared_prefix_length(group, last) for group in groups]
        index = torch.tensor(token_ids, dtype=torch.long, device=self.device)
        if use_prefix and all(len(group) == size for group in groups) and min(prefixes) > 0:
            logprobs = self._prefix_forward(groups, prefixes, last, index)
            self.stats["shared_prefix_calls"] += 1
        else:
            logprobs = self._full_forward([seq for group in groups for seq in group], last, index)
            self.stats["full_forward_calls"] += 1
        picked = logprobs.tolist()
        return [picked[start : start + len(group)] for start, group in zip(_starts(groups), groups)]

    def _logits(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        positions: torch.Tensor,
        cache: DynamicCache | None = None,
        last: int = 1,
    ) -> torch.Tensor:
        """Float32 logits at the last `last` columns (every row ends there: rows are left-padded)."""
        output = self.model(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=positions.to(self.device),
            past_key_values=cache,
            use_cache=cache is not None,
            logits_to_keep=last,
        )
        return output.logits[:, -last:].float()

    def _count(self, *masks: torch.Tensor) -> None:
        for mask in masks:
            real = int(mask.sum())
            self.stats["forward_tokens"] += real
            self.stats["padded_tokens"] += mask.numel() - real

    def _full_forward(self, sequences: list[list[int]], last: int, index: torch.Tensor) -> torch.Tensor:
        ids, mask = _left_pad(sequences, self.tokenizer.pad_token_id)
        self._count(mask)
        return torch.log_softmax(self._logits(ids, mask, _positions(mask), last=last), dim=-1)[..., index].cpu()

    def _prefix_forward(
        self, groups: list[list[list[int]]], prefixes: list[int], last: int, index: torch.Tensor
    ) -> torch.Tensor:
        size = len(groups[0])
        prefix_ids, prefix_mask = _left_pad(
            [group[0][:length] for group, length in zip(groups, prefixes)], self.tokenizer.pad_token_id
        )
        cache = DynamicCache(config=self.model.config)
        self._logits(prefix_ids, prefix_mask, _positions(prefix_mask), cache)
        cache.batch_repeat_interleave(size)  # one copy of each group's prefix per prompt of the group
        suffixes = [seq[length:] for group, length in zip(groups, prefixes) for seq in group]
        suffix_ids, suffix_mask = _left_pad(suffixes, self.tokenizer.pad_token_id)
        starts = torch.tensor(prefixes).repeat_interleave(size)
        mask = torch.cat([prefix_mask.repeat_interleave(size, dim=0), suffix_mask], dim=1)
        logits = self._logits(suffix_ids, mask, _positions(suffix_mask, starts), cache, last=last)
        self._count(prefix_mask, suffix_mask)
        self.stats["prefix_tokens_reused"] += (size - 1) * sum(prefixes)
        return torch.log_softmax(logits, dim=-1)[..., index].cpu()

    # -- generation -------------------------------------------------------------------------------
    def _stop_ids(self) -> set[int]:
        stop = self.model.generation_config.eos_token_id
        stop = set(stop if isinstance(stop, list) else [stop] if stop is not None else [])
        return (stop | {self.tokenizer.eos_token_id, self.tokenizer.pad_token_id}) - {None}

    @torch.inference_mode()
    def generate(self, sequences: list[list[int]], max_new_tokens: int) -> list[str]:
        """Greedy continuations of `sequences`, cut at the first stop token."""
        ids, mask = _left_pad(sequences, self.tokenizer.pad_token_id)
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
        texts = []
        for row in output[:, ids.shape[1] :].tolist():
            cut = next((n for n, token in enumerate(row) if token in stop), len(row))
            self.stats["generated_tokens"] += cut
            texts.append(self.tokenizer.decode(row[:cut], skip_special_tokens=False))
        self._count(mask)
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
        self.stats = {"generated_tokens": 0}
        self.shared_prefix_note = ""  # vLLM's automatic prefix caching reuses shared starts itself

    def describe(self) -> dict[str, Any]:
        return {"dtype": str(self.llm.llm_engine.model_config.dtype).removeprefix("torch.")}

    def runtime_stats(self) -> dict[str, Any]:
        return dict(self.stats)

    def _run(self, sequences: list[list[int]], params) -> list:
        from vllm.inputs import TokensPrompt

        return self.llm.generate([TokensPrompt(prompt_token_ids=seq) for seq in sequences], params, use_tqdm=False)

    def next_token_logprobs(
        self, groups: list[list[list[int]]], token_ids: list[int], shared_prefix: bool | None = None, last: int = 1
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

    def generate(self, sequences: list[list[int]], max_new_tokens: int) -> list[str]:
        from vllm import SamplingParams

        outputs = self._run(sequences, SamplingParams(max_tokens=max_new_tokens, temperature=0.0))
        self.stats["generated_tokens"] += sum(len(output.outputs[0].token_ids) for output in outputs)
        return [output.outputs[0].text for output in outputs]


def check_vllm() -> None:
    """Raise a one-line UserError unless vllm is importable and a CUDA GPU is visible."""
    if importlib.util.find_spec("vllm") is None:
        raise UserError(
            "--backend vllm: the vllm package is not installed (pip install vllm, on a machine with a CUDA GPU); or use --backend transformers"
        )
    if not torch.cuda.is_available():
        raise UserError("--backend vllm needs a CUDA GPU and none is visible; use --backend transformers")


def make_backend(config, spec: ModelSpec):
    """The backend `config.backend` names (`config` is a RunConfig)."""
    if config.backend == "vllm":
        return VllmBackend(config.model, spec, revision=config.revision, dtype=config.dtype, seed=config.seed)
    if config.backend != "transformers":
        raise UserError(f"unknown --backend {config.backend!r}: choose one of {', '.join(BACKENDS)}")
    return TransformersBackend(
        config.model,
        spec,
        revision=config.revision,
        device=config.device,
        dtype=config.dtype,
        shared_prefix=config.shared_prefix,
    )
