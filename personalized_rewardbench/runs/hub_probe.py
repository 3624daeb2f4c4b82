"""Detect an unreachable Hub once, in seconds, and then work offline.

Without `HF_HUB_OFFLINE`, every Hub lookup (the contriever retriever, then the model, then its
tokenizer) retries on its own before failing: a minute or more of retry lines on a machine without
network, and no end at all behind a firewall that drops packets. So before the first lookup, one
request goes to the Hub endpoint (`huggingface_hub.constants.ENDPOINT`, i.e. `HF_ENDPOINT`) with a
short timeout; when nothing answers, the process switches to offline mode (the environment variable
and the flags huggingface_hub, transformers and datasets read), so every lookup fails at once with
the same one-line errors as under `HF_HUB_OFFLINE=1`, and the local cache is still used.

>>> needs_hub(data="sample", models=["baseline:length"], retriever="bm25", profile_k=2)
False
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

#: Seconds the probe waits for the Hub to answer.
PROBE_TIMEOUT = 3.0
_probed: dict[str, bool] = {}  # endpoint -> reachable, once per process


def _is_hub_id(model: str) -> bool:
    if model.startswith("baseline:") or Path(model).expanduser().exists():
        return False
    return not model.startswith((".", "/", "~")) and model.count("/") <= 1


def needs_hub(data: str, models: Iterable[str], retriever: str, profile_k: int) -> bool:
    """Whether a run reads anything from the Hub: a `hub:` source, a model id, or the contriever retriever."""
    return (
        data.startswith("hub:") or any(_is_hub_id(m) for m in models) or (profile_k > 0 and retriever == "contriever")
    )


def hub_reachable(endpoint: str, timeout: float = PROBE_TIMEOUT) -> bool:
    """True when the endpoint answers an HTTP request (any status) within `timeout` seconds."""
    import httpx

    try:
        httpx.head(endpoint, timeout=timeout, follow_redirects=False)
    except httpx.HTTPError:
        return False
    return True


def go_offline() -> None:
    """Offline mode for this process and its children, including libraries already imported."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from huggingface_hub import constants

    constants.HF_HUB_OFFLINE = True
    if "datasets" in sys.modules:
        import datasets.config

        datasets.config.HF_HUB_OFFLINE = True


def offline_if_unreachable(timeout: float = PROBE_TIMEOUT) -> str | None:
    """Probe the Hub once per process (unless offline mode is already on); when it does not answer,
    switch to offline mode and return a one-line notice. Returns None otherwise."""
    from huggingface_hub import constants

    if constants.is_offline_mode():
        return None
    endpoint = constants.ENDPOINT
    if endpoint not in _probed:
        _probed[endpoint] = hub_reachable(endpoint, timeout)
    if _probed[endpoint]:
        return None
    go_offline()
    return (
        f"note: the Hub ({endpoint}) did not answer within {timeout:g} s; working offline (local files and cache only)"
    )
