"""Assemble the Gradio Space as a folder that runs on its own on the Hub.

The Space's app imports this library and the metric module; on the Hub neither is installed, so the
bundle carries them (copied from this checkout, never edited by hand):

    app.py, README.md, requirements.txt, models.yaml   from space/
    personalized_rewardbench/                          the library (without tests or caches)
    metric/personalized_accuracy/                      the metric module the library computes through
"""

from __future__ import annotations

import shutil
from pathlib import Path

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.release.staged_folder import staged_folder
from personalized_rewardbench.resources import PACKAGE_DIR, metric_dir, resource

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".*", "_bundled")  # _bundled: a wheel's copies


def build_space_bundle(out: Path, force: bool = False) -> Path:
    """Write the Space bundle to `out` (atomically: built in a sibling temp folder, then renamed)."""
    out = out.expanduser().resolve()
    space = resource("space")
    if not (space / "app.py").is_file():
        raise UserError("no app.py", "run this from a checkout of personalized-rewardbench", where=space)
    with staged_folder(out, force=force, marker="app.py") as staging:
        for path in space.iterdir():
            if path.is_file() and not path.name.startswith("."):
                shutil.copy2(path, staging / path.name)
        shutil.copytree(PACKAGE_DIR, staging / "personalized_rewardbench", ignore=_IGNORE)
        shutil.copytree(metric_dir(), staging / "metric" / "personalized_accuracy", ignore=_IGNORE)
    return out


def push_space_bundle(folder: Path, repo_id: str, hardware: str | None = "zero-a10g") -> str:
    """Upload the bundle to a Space repo and request ZeroGPU hardware; returns the commit id."""
    from huggingface_hub import HfApi, get_token
    from huggingface_hub.errors import HfHubHTTPError

    if not get_token():
        raise UserError("no Hugging Face token", "run 'hf auth login' or set HF_TOKEN, then push again")
    api = HfApi()
    try:
        api.create_repo(repo_id, repo_type="space", space_sdk="gradio", exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id, repo_type="space", folder_path=str(folder), commit_message="Update Space"
        )
        if hardware:
            api.request_space_hardware(repo_id, hardware)
    except HfHubHTTPError as error:
        status = getattr(error.response, "status_code", "?")
        raise UserError(f"push to Space {repo_id} failed (HTTP {status})", "check the token's write access") from None
    return commit.oid
