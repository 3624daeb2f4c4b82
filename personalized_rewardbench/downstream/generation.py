"""Text generation for Best-of-N: sample a policy's answers, or run the rubric judge (greedy).

Three backends take the same chats (lists of ``{"role", "content"}``) and one seed per chat:

- ``transformers``: batched ``generate`` on the local model. Sampling is done per row by
  `SeededSampler`, a logits processor that draws each row's token with that row's own
  ``torch.Generator`` (temperature, then top-p), so a row's text depends on its seed, not on
  which other rows share its batch (up to floating-point differences of batched matmuls, which
  the callers' deterministic batch plans keep identical on a rerun).
- ``vllm``: when installed, on a CUDA GPU; one ``SamplingParams(seed=...)`` per request.
- ``server``: any OpenAI-compatible ``/v1/chat/completions`` endpoint (``--base-url``: vLLM's
  ``vllm serve``, TGI, ...), passing the seed with every request.

Temperature 0 means greedy decoding (the judge). `sample_seed` derives a sample's seed from
(run seed, item id, sample index).

>>> sample_seed(42, "0_0_1", 3) == sample_seed(42, "0_0_1", 3) != sample_seed(42, "0_0_1", 4)
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.model_loading import load_causal_lm, load_tokenizer, model_revision
from personalized_rewardbench.scoring.registry import resolve_spec

BACKENDS = ("transformers", "vllm", "server")
Chat = list[dict[str, str]]


@dataclass(frozen=True)
class Sampling:
    """Decoding settings; the defaults are the reference Best-of-N sampler's."""

    temperature: float = 0.8
    top_p: float = 0.9
    max_new_tokens: int = 512

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise UserError(f"--temperature must be 0 (greedy) or more, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise UserError(f"--top-p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise UserError(f"--max-new-tokens must be positive, got {self.max_new_tokens}")


def sample_seed(seed: int, item_id: str, index: int) -> int:
    """A 31-bit seed for one sample, from the run seed, the item id and the sample index."""
    digest = hashlib.sha256(f"{seed}:{item_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def merge_system(chat: Chat) -> Chat:
    """The chat with a leading system message folded into the first user turn (for templates without one).

    >>> merge_system([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    [{'role': 'user', 'content': 'S\\n\\nU'}]
    """
    if len(chat) < 2 or chat[0]["role"] != "system":
        return chat
    return [{"role": "user", "content": f"{chat[0]['content']}\n\n{chat[1]['content']}"}, *chat[2:]]


def chat_ids(tokenizer, chat: Chat) -> list[int]:
    """Token ids of `chat` with the generation prompt, tokenized by the chat template (one BOS); the system
    message goes into the user turn when the template rejects a system role (as the LLM judges do)."""
    try:
        encoded = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=True)
    except Exception:  # jinja's TemplateError from templates that raise on a system turn
        encoded = tokenizer.apply_chat_template(
            merge_system(chat), add_generation_prompt=True, tokenize=True, return_dict=True
        )
    return list(encoded["input_ids"])


class Generator(Protocol):
    name: str  # the backend
    model: str
    revision: str

    def generate(self, chats: Sequence[Chat], seeds: Sequence[int], sampling: Sampling) -> list[str]:
        """One text per chat, in order; `seeds[i]` seeds chat i's sampling."""


class SeededSampler(LogitsProcessor):
    """Sample each row with its own generator; returns logits where only the drawn token is finite,
    so greedy decoding in `generate` emits exactly that token."""

    def __init__(self, seeds: Sequence[int], temperature: float, top_p: float):
        self.generators = [torch.Generator().manual_seed(seed) for seed in seeds]
        self.temperature, self.top_p = temperature, top_p

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        probs = torch.softmax(scores.float().cpu() / self.temperature, dim=-1)
        ordered, order = probs.sort(dim=-1, descending=True)
        keep = ordered.cumsum(-1) - ordered < self.top_p  # the smallest head whose mass reaches top_p
        ordered = ordered * keep
        out = torch.full_like(scores, -float("inf"))
        for row, generator in enumerate(self.generators):
            drawn = torch.multinomial(ordered[row], 1, generator=generator)
            out[row, order[row, drawn]] = 0.0
        return out


class TransformersGenerator:
    """A chat model through transformers, batched; prompts left-padded."""

    name = "transformers"

    def __init__(self, model: str, *, revision: str | None = None, device: str = "auto", dtype: str = "auto"):
        spec = resolve_spec(model)
        self.model = model
        self.tokenizer = load_tokenizer(model, spec, revision, padding_side="left")
        if not self.tokenizer.chat_template:
            raise UserError(f"{model!r} has no chat template: pass a chat model")
        self.lm, self.device, _ = load_causal_lm(model, spec, revision, device, dtype)
        if self.tokenizer.pad_token_id is None:  # left padding under an attention mask: any id will do
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        self.revision = model_revision(model, self.lm.config, revision)
        self.calls = 0  # chats generated so far

    def _stop_ids(self) -> list[int]:
        stop = self.lm.generation_config.eos_token_id
        ids = set(stop if isinstance(stop, list) else [stop] if stop is not None else [])
        return sorted((ids | {self.tokenizer.eos_token_id}) - {None})

    @torch.inference_mode()
    def generate(self, chats: Sequence[Chat], seeds: Sequence[int], sampling: Sampling) -> list[str]:
        encoded = [chat_ids(self.tokenizer, chat) for chat in chats]
        width = max(map(len, encoded))
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(seq)) + seq for seq in encoded])
        mask = torch.tensor([[0] * (width - len(seq)) + [1] * len(seq) for seq in encoded])
        stop = self._stop_ids()
        settings = GenerationConfig(
            max_new_tokens=sampling.max_new_tokens, do_sample=False, num_beams=1, pad_token_id=pad, eos_token_id=stop
        )
        processors = LogitsProcessorList(
            [SeededSampler(seeds, sampling.temperature, sampling.top_p)] if sampling.temperature > 0 else []
        )
        output = self.lm.generate(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            generation_config=settings,
            logits_processor=processors,
        )
        self.calls += len(chats)
        texts = []
        for row in output[:, width:].tolist():
            cut = next((n for n, token in enumerate(row) if token in stop), len(row))
            texts.append(self.tokenizer.decode(row[:cut], skip_special_tokens=True))
        return texts


class VllmGenerator:
    """vLLM on a CUDA GPU (automatic prefix caching reuses the shared prompt of an item's N samples)."""

    name = "vllm"

    def __init__(self, model: str, *, revision: str | None = None, dtype: str = "auto", max_model_len: int = 8192):
        from personalized_rewardbench.scoring.judge_backends import check_vllm

        check_vllm()
        from vllm import LLM

        spec = resolve_spec(model)
        self.model = model
        self.tokenizer = load_tokenizer(model, spec, revision)
        self.llm = LLM(
            model=model,
            revision=revision,
            dtype=dtype,
            trust_remote_code=spec.trust_remote_code,
            enable_prefix_caching=True,
            max_model_len=max_model_len,
        )
        self.revision = model_revision(model, self.llm.llm_engine.model_config.hf_config, revision)
        self.calls = 0

    def generate(self, chats: Sequence[Chat], seeds: Sequence[int], sampling: Sampling) -> list[str]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=chat_ids(self.tokenizer, chat)) for chat in chats]
        params = [
            SamplingParams(
                temperature=sampling.temperature,
                top_p=sampling.top_p if sampling.temperature > 0 else 1.0,
                max_tokens=sampling.max_new_tokens,
                seed=seed,
            )
            for seed in seeds
        ]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        self.calls += len(chats)
        return [output.outputs[0].text for output in outputs]


def chat_completions_url(base_url: str) -> str:
    """The chat-completions endpoint of an OpenAI-compatible server.

    >>> chat_completions_url("http://h:8000"), chat_completions_url("http://h:8000/v1/")
    ('http://h:8000/v1/chat/completions', 'http://h:8000/v1/chat/completions')
    """
    url = base_url.rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    return url + ("/chat/completions" if url.endswith("/v1") else "/v1/chat/completions")


class ServerGenerator:
    """An OpenAI-compatible chat-completions server; `concurrency` requests in flight.

    Plain httpx rather than `huggingface_hub.InferenceClient(base_url=...)`: the client refuses every
    request while HF_HUB_OFFLINE=1, and a cluster run is often offline for the Hub yet talks to its own
    local vLLM / TGI server."""

    name = "server"

    def __init__(self, model: str, base_url: str, *, concurrency: int = 8, timeout: float = 600):
        import httpx

        self.model, self.url = model, chat_completions_url(base_url)
        self.revision = f"server:{base_url.rstrip('/')}"
        self.client = httpx.Client(timeout=timeout)
        self.concurrency = max(1, concurrency)
        self.calls = 0

    def _one(self, chat: Chat, seed: int, sampling: Sampling) -> str:
        import httpx

        greedy = sampling.temperature == 0
        body = {
            "model": self.model,
            "messages": chat,
            "temperature": sampling.temperature,
            "top_p": 1.0 if greedy else sampling.top_p,
            "max_tokens": sampling.max_new_tokens,
            "seed": seed,
        }
        try:
            response = self.client.post(self.url, json=body)
            response.raise_for_status()
            return response.json()["choices"][0]["message"]["content"] or ""
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as error:
            first = (str(error).splitlines() or [""])[0][:200]
            raise UserError(f"--base-url {self.url}: {type(error).__name__}: {first}") from None

    def generate(self, chats: Sequence[Chat], seeds: Sequence[int], sampling: Sampling) -> list[str]:
        with ThreadPoolExecutor(self.concurrency) as pool:
            texts = list(pool.map(lambda pair: self._one(pair[0], pair[1], sampling), zip(chats, seeds)))
        self.calls += len(chats)
        return texts


def make_generator(
    model: str,
    backend: str = "transformers",
    *,
    base_url: str | None = None,
    revision: str | None = None,
    device: str = "auto",
    dtype: str = "auto",
    concurrency: int = 8,
) -> Any:
    """The generator for `backend`; `--base-url` implies the server backend."""
    if base_url:
        return ServerGenerator(model, base_url, concurrency=concurrency)
    if backend == "server":
        raise UserError("--backend server needs --base-url URL (an OpenAI-compatible server)")
    if backend == "vllm":
        return VllmGenerator(model, revision=revision, dtype=dtype)
    if backend != "transformers":
        raise UserError(f"unknown --backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    return TransformersGenerator(model, revision=revision, device=device, dtype=dtype)


def generator_for(model: str, options: Any) -> Any:
    """`make_generator` for `model` with the backend options a step's config carries
    (`backend`, `base_url`, `revision`, `device`, `dtype`, `concurrency`)."""
    return make_generator(
        model,
        options.backend,
        base_url=options.base_url,
        revision=options.revision,
        device=options.device,
        dtype=options.dtype,
        concurrency=options.concurrency,
    )
