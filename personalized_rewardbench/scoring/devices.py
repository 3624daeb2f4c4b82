"""Device, dtype and attention-implementation choice for model runs."""

from __future__ import annotations

import importlib.util

import torch

from personalized_rewardbench.errors import UserError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def select_device(requested: str = "auto") -> torch.device:
    """`auto` is cuda when available, else cpu; asking for cuda without a GPU is a user error."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA GPU is visible", "pass --device cpu or auto")
    if requested not in ("cpu", "cuda"):
        raise UserError(f"unknown --device {requested!r}: choose auto, cpu or cuda")
    return torch.device(requested)


def select_dtype(requested: str, device: torch.device) -> torch.dtype:
    """`auto` is bfloat16 on GPU (when supported) and float32 on CPU."""
    if requested == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    if requested not in DTYPES:
        raise UserError(f"unknown --dtype {requested!r}: choose auto, {', '.join(DTYPES)}")
    return DTYPES[requested]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def select_attn_implementation(device: torch.device, dtype: torch.dtype) -> str:
    """`flash_attention_2` on CUDA in bf16/fp16 when the flash_attn package is installed, else `sdpa`."""
    half = dtype in (torch.bfloat16, torch.float16)
    if device.type == "cuda" and half and importlib.util.find_spec("flash_attn") is not None:
        return "flash_attention_2"
    return "sdpa"


#: The token budget per forward batch when --batch-tokens is not given, by the device the run uses.
#: On a CPU larger batches are no faster (2048 runs faster than 16384 with less memory, see benchmarks/README.md) and
#: only cost memory; a GPU needs large batches to be busy.
AUTO_BATCH_TOKENS = {"cpu": 2048, "cuda": 16384}


def auto_batch_tokens(device: str = "auto") -> int:
    """The default token budget for `device` (auto | cpu | cuda, or a torch.device); never raises.

    >>> auto_batch_tokens("cpu")
    2048
    """
    kind = getattr(device, "type", device)
    if kind in ("auto", "cuda"):
        import torch

        kind = "cuda" if torch.cuda.is_available() else "cpu"
    return AUTO_BATCH_TOKENS.get(kind, AUTO_BATCH_TOKENS["cpu"])
