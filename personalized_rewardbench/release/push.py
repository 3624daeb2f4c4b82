"""Publish a built release to the Hub: `upload_folder`, then `create_tag`; never move an existing tag."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from personalized_rewardbench.data.sources import RELEASE_MANIFEST, read_manifest
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.release.build import check_version


@dataclass
class PushPlan:
    """What a push would do."""

    folder: Path
    repo_id: str
    tag: str
    files: list[tuple[str, int]]  # (path in repo, size in bytes)

    def describe(self) -> str:
        lines = [f"push {self.folder} -> dataset repo {self.repo_id}, then tag {self.tag}"]
        lines += [f"  {size:>12,d}  {path}" for path, size in self.files]
        lines.append(f"  {sum(size for _, size in self.files):>12,d}  total bytes in {len(self.files)} files")
        return "\n".join(lines)


def plan_push(folder: Path, repo_id: str, tag: str) -> PushPlan:
    """Check the release folder and the tag against its manifest; list the files to upload."""
    manifest = read_manifest(folder)
    if manifest is None:
        raise UserError(
            f"--dir {folder}: not a release folder (no {RELEASE_MANIFEST})", "build one with 'prbench release build'"
        )
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise UserError(f"bad --repo {repo_id!r}: write OWNER/NAME")
    version = manifest.get("version")
    if not tag.startswith("v") or check_version(tag) != version:
        raise UserError(f"--tag {tag} is not the release's tag v{version}", f"pass --tag v{version}")
    built_for = manifest.get("repo_id")
    if built_for and built_for != repo_id:
        raise UserError(
            f"--dir {folder} was built for {built_for} (its card loads from there)",
            f"rebuild with 'prbench release build --repo {repo_id}', or push to --repo {built_for}",
        )
    files = sorted(
        (path.relative_to(folder).as_posix(), path.stat().st_size)
        for path in folder.rglob("*")
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts)
    )
    return PushPlan(folder=folder, repo_id=repo_id, tag=tag, files=files)


def push_release(plan: PushPlan, token: str | None = None, endpoint: str | None = None) -> str:
    """Upload and tag; return the commit id. Refuses when the tag already exists on the repo."""
    from huggingface_hub import HfApi, get_token
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled, RepositoryNotFoundError

    try:
        from httpx2 import TransportError  # the HTTP client of huggingface_hub 2.x
    except ImportError:
        from httpx import TransportError  # huggingface_hub 1.x

    token = token or get_token()
    if not token:
        raise UserError("no Hugging Face token", "run 'hf auth login' or set HF_TOKEN, then push again")
    api = HfApi(token=token, endpoint=endpoint)
    try:
        api.create_repo(plan.repo_id, repo_type="dataset", exist_ok=True)
        try:
            tags = {ref.name for ref in api.list_repo_refs(plan.repo_id, repo_type="dataset").tags}
        except RepositoryNotFoundError:
            tags = set()
        if plan.tag in tags:
            raise UserError(
                f"tag {plan.tag} already exists on {plan.repo_id}; releases are immutable",
                "build the release again with a higher --version",
            )
        commit = api.upload_folder(
            repo_id=plan.repo_id,
            repo_type="dataset",
            folder_path=str(plan.folder),
            commit_message=f"Release {plan.tag}",
            ignore_patterns=[".*", "*/.*"],  # hidden files at any depth, as plan_push lists them
        )
        api.create_tag(
            plan.repo_id, repo_type="dataset", tag=plan.tag, revision=commit.oid, tag_message=f"Release {plan.tag}"
        )
    except HfHubHTTPError as error:
        status = getattr(error.response, "status_code", "?")
        raise UserError(
            f"push to {plan.repo_id} failed (HTTP {status})", "check the token's write access and the --repo id"
        ) from None
    except OfflineModeIsEnabled:
        raise UserError(f"HF_HUB_OFFLINE is set: cannot push to {plan.repo_id}", "unset HF_HUB_OFFLINE") from None
    except TransportError as error:
        reason = (str(error).splitlines() or [type(error).__name__])[0]
        raise UserError(f"cannot reach {api.endpoint} ({reason})", "check the network or HF_ENDPOINT") from None
    except ValueError as error:  # upload_folder: the Hub's README metadata check (POST /api/validate-yaml) failed
        lines = str(error).splitlines()
        if not lines or not lines[0].startswith("Invalid metadata in README.md"):
            raise
        problems = "; ".join(line.lstrip("- ") for line in lines[1:] if line.strip()) or "no details"
        raise UserError(f"{plan.folder / 'README.md'}: the Hub rejects its metadata: {problems}") from None
    return commit.oid
