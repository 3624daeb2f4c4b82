"""Load tokenizers and models for scoring, applying the registry's quirks and one-line errors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from huggingface_hub.errors import StrictDataclassError
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.scoring.devices import select_attn_implementation, select_device, select_dtype
from personalized_rewardbench.scoring.prefix_attention import reported_implementation
from personalized_rewardbench.scoring.registry import ModelSpec

#: Added when a tokenizer has no pad token, or its pad token is its EOS (that corrupts last-token pooling).
PAD_TOKEN = "<|prbench_pad|>"
#: Top-level module names of score heads in transformers' sequence-classification models.
_HEAD_MODULES = {"score", "classifier", "v_head"}


def model_revision(model: str, config: Any, requested: str | None) -> str:
    """The resolved commit for Hub models; a content hash of config.json for local folders."""
    local = Path(model)
    if local.is_dir():
        digest = (
            hashlib.sha256((local / "config.json").read_bytes()).hexdigest()[:12]
            if (local / "config.json").is_file()
            else "unknown"
        )
        return f"local:{digest}"
    return getattr(config, "_commit_hash", None) or requested or "unknown"


def _looks_local(model: str) -> bool:
    """A path rather than a Hub id (`NAME` or `OWNER/NAME`): starts with `.`, `/` or `~`, or has more parts."""
    return model.startswith((".", "/", "~")) or "\\" in model or model.count("/") > 1


#: JSON files of a checkpoint folder that must each hold one JSON object when present.
_JSON_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "model.safetensors.index.json",
)


def check_model_files(folder: Path) -> None:
    """One line naming the file for a damaged checkpoint folder: a JSON file that is not one JSON
    object, or a safetensors file whose header does not parse or does not cover the file (truncated)."""
    for name in _JSON_FILES:
        path = folder / name
        if not path.is_file():
            continue
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:  # invalid JSON or not UTF-8
            raise UserError(f"{path}: damaged ({str(error).splitlines()[0][:120]}); restore the file") from None
        if not isinstance(payload, dict):
            raise UserError(f"{path}: damaged (expected a JSON object, got {type(payload).__name__}); restore the file")
    from safetensors import SafetensorError, safe_open

    for path in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(path), framework="pt") as weights:
                weights.keys()
        except (SafetensorError, OSError) as error:
            raise UserError(f"{path}: damaged weights ({str(error).splitlines()[0][:120]})") from None


def _config_error(model: str, error: Exception) -> UserError:
    """A config.json value of the wrong type (transformers validates configs as strict dataclasses)."""
    reason = " ".join(line.strip() for line in str(error).splitlines())[:200]
    return UserError(f"{model}: config.json has a bad value ({reason})")


def check_model_path(model: str) -> None:
    """One-line errors for a local model path that is not a model folder, before any Hub lookup.

    >>> check_model_path("./typo_model")
    Traceback (most recent call last):
    ...
    personalized_rewardbench.errors.UserError: no such model folder: ./typo_model
    """
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(
                "not a model folder (no config.json)", "pass the folder written by save_pretrained", where=model
            )
        check_model_files(path)
    elif path.exists():
        raise UserError("not a model folder (it is a file)", "pass the folder that holds config.json", where=model)
    elif _looks_local(model):
        raise UserError(
            f"no such model folder: {model}", "pass a folder written by save_pretrained, or a Hub id OWNER/NAME"
        )


def load_tokenizer(model: str, spec: ModelSpec, revision: str | None = None, padding_side: str = "right"):
    check_model_path(model)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model, revision=revision, trust_remote_code=spec.trust_remote_code)
    except StrictDataclassError as error:
        raise _config_error(model, error) from None
    except (OSError, ValueError) as error:
        raise UserError(f"cannot load a tokenizer for {model!r}: {str(error).splitlines()[0][:200]}") from None
    if spec.chat_template:
        tokenizer.chat_template = spec.chat_template
    tokenizer.padding_side = padding_side
    return tokenizer


def ensure_distinct_pad(tokenizer, model) -> bool:
    """Give tokenizer and model a pad token distinct from EOS; returns True when one was added."""
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    added = False
    if pad is None or pad == eos:
        tokenizer.add_special_tokens({"pad_token": PAD_TOKEN})
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
        added = True
    model.config.pad_token_id = tokenizer.pad_token_id
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return added


def _from_pretrained(auto_class, model: str, revision: str | None, dtype, spec: ModelSpec, attention: str):
    """from_pretrained with the preferred attention implementation, stepping down (flash -> sdpa -> the
    model's default) when the architecture or the installed kernels do not support it."""
    choices = [attention] + [choice for choice in ("sdpa", None) if choice != attention]
    for choice in choices:
        try:
            return auto_class.from_pretrained(
                model,
                revision=revision,
                dtype=dtype,
                trust_remote_code=spec.trust_remote_code,
                output_loading_info=True,
                **({"attn_implementation": choice} if choice else {}),
            )
        except (ValueError, ImportError) as error:
            if choice is None or "attention" not in str(error).lower() and "attn" not in str(error).lower():
                raise
    raise AssertionError("unreachable")


def _load(auto_class, model: str, spec: ModelSpec, revision: str | None, device_name: str, dtype_name: str):
    check_model_path(model)
    device = select_device(device_name)
    dtype = select_dtype(dtype_name if dtype_name != "auto" else spec.dtype, device)
    try:
        loaded, info = _from_pretrained(
            auto_class, model, revision, dtype, spec, select_attn_implementation(device, dtype)
        )
    except StrictDataclassError as error:
        raise _config_error(model, error) from None
    except OSError as error:
        raise UserError(
            f"cannot load model {model!r}: not a model folder, or not reachable on the Hub "
            f"({str(error).splitlines()[0][:160]})"
        ) from None
    except ValueError as error:
        kind = auto_class.__name__.removeprefix("AutoModelFor")
        raise UserError(f"model {model!r} is not a {kind} model: {str(error).splitlines()[0][:200]}") from None
    except RuntimeError as error:  # weights whose shapes differ from what config.json describes
        if "mismatched" not in str(error) and "size mismatch" not in str(error):
            raise
        raise UserError(
            f"cannot load model {model!r}: its weights and config.json do not fit (tensor shapes differ)"
        ) from None
    return loaded.to(device).eval(), info, device, dtype


def load_classifier(model: str, spec: ModelSpec, revision: str | None, device: str, dtype: str):
    """A sequence-classification reward model; refuses checkpoints whose score head would be random."""
    loaded, info, device_, dtype_ = _load(AutoModelForSequenceClassification, model, spec, revision, device, dtype)
    head_missing = sorted(key for key in info.get("missing_keys", []) if key.split(".")[0] in _HEAD_MODULES)
    if head_missing:
        raise UserError(
            f"{model!r} has no trained classification head ({head_missing[0]} is missing from the checkpoint)",
            "pass a reward model checkpoint, or --model-type judge-pairwise/judge-score for chat models",
        )
    return loaded, device_, dtype_


def _untied_head_missing(loaded, info: dict[str, Any]) -> str | None:
    """The first missing key of the output (lm_head) layer when that layer is not tied to the input
    embeddings: from_pretrained initialised it at random."""
    head = loaded.get_output_embeddings()
    if head is None:
        return None
    name = next((n for n, module in loaded.named_modules() if module is head), None)
    missing = sorted(key for key in info.get("missing_keys", []) if name and key.startswith(name + "."))
    if not missing:
        return None
    config = loaded.config.get_text_config() if hasattr(loaded.config, "get_text_config") else loaded.config
    inputs = loaded.get_input_embeddings()
    tied = getattr(config, "tie_word_embeddings", False) or (
        inputs is not None
        and getattr(inputs, "weight", None) is not None
        and head.weight.data_ptr() == inputs.weight.data_ptr()
    )
    return None if tied else missing[0]


def load_causal_lm(model: str, spec: ModelSpec, revision: str | None, device: str, dtype: str):
    """A causal LM used as a judge; refuses checkpoints whose language-model head would be random."""
    loaded, info, device_, dtype_ = _load(AutoModelForCausalLM, model, spec, revision, device, dtype)
    missing = _untied_head_missing(loaded, info)
    if missing:
        raise UserError(
            f"{model!r} has no trained language-model head ({missing} is missing from the checkpoint and the "
            "embeddings are not tied), so a judge would read random logits",
            "pass a chat (causal LM) checkpoint, or --model-type classifier for reward models",
        )
    return loaded, device_, dtype_


def attention_implementation(model) -> str:
    return reported_implementation(getattr(model.config, "_attn_implementation", None)) or "eager"
