"""Write a folder atomically: build it in a hidden sibling, then rename it into place.

`--force` replaces only what this package wrote before: an empty folder, or one holding the marker
file of the same kind of output (`release.json` for releases, `app.py` + the library for Space
bundles). Files, the current directory and its parents are never replaced.

>>> # with staged_folder(out, force=False, marker="release.json") as staging: write(staging)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from personalized_rewardbench.errors import UserError


def check_target(out: Path, force: bool, marker: str) -> Path:
    """Resolve `out` and refuse anything that must not be created or replaced there."""
    out = out.expanduser().resolve()
    if out.exists() and not force:
        raise UserError(f"--out {out} already exists", "choose a new folder, or pass --force to replace it")
    if out.exists():
        if not out.is_dir():
            raise UserError(f"--out {out} is a file", "--force replaces only a folder this command wrote")
        if out == Path.cwd().resolve() or out in Path.cwd().resolve().parents:
            raise UserError(f"--out {out} is the current folder or holds it", "choose another folder")
        if any(out.iterdir()) and not (out / marker).exists():
            raise UserError(
                f"--out {out} is not empty and has no {marker}", "--force replaces only a folder this command wrote"
            )
    parent = out.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise UserError(f"--out {out}: cannot create it under {parent} (not a writable folder)")
    return out


@contextmanager
def staged_folder(out: Path, *, force: bool, marker: str) -> Iterator[Path]:
    """Yield an empty staging folder; on success it replaces `out`, on any error it is removed."""
    out = check_target(out, force, marker)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    staging.chmod(0o755)
    try:
        yield staging
        if out.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            out.rename(retired / out.name)
            staging.rename(out)
            shutil.rmtree(retired)
        else:
            staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
