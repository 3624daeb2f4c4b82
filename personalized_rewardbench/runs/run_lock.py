"""One run folder, one writer: an exclusive `flock` on `<run_dir>/.lock` for as long as a run writes there.

The lock file holds the holder's pid, so a second run can say who holds the folder; the holder removes
it when done. The lock is the kernel's: it goes away with its process, even after kill -9, so a
`.lock` file left by a killed run never blocks.
Because the holder removes the lock file (and the folder when it failed before scoring anything), a
waiter may end up holding a lock on a file that is gone, so `acquire` checks, after locking, that the path still
names the locked file, and otherwise starts over.

>>> # with RunLock(run_dir).hold(wait=False): ...
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from personalized_rewardbench.errors import UserError

LOCK_FILE = ".lock"


class RunLock:
    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.path = run_dir / LOCK_FILE
        self._fd: int | None = None
        self._created_top: Path | None = None  # the top-most folder that `acquire` created

    def holder(self) -> str:
        """The pid written by the process that holds the lock ("unknown" when it cannot be read)."""
        try:
            pid = self.path.read_text(encoding="ascii").strip()
        except (OSError, ValueError):
            return "unknown"
        return pid if pid.isdigit() else "unknown"

    def acquire(self, wait: bool) -> None:
        """Take the lock; without `wait`, raise a one-line UserError naming the holder's pid when it is taken."""
        while True:
            missing = [folder for folder in (self.run_dir, *self.run_dir.parents) if not folder.exists()]
            self._created_top = missing[-1] if missing else self._created_top
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                os.close(fd)
                raise UserError(
                    f"{self.run_dir} is in use by another prbench run (pid {self.holder()}); "
                    "wait for it to finish, then rerun the same command (it reuses or finishes that run)"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                self._fd = fd
                return
            os.close(fd)  # the holder removed the folder while we waited: lock the new one

    def release(self, remove_if_only: tuple[str, ...] | None = None) -> None:
        """Remove the lock file and drop the lock. When the folder then holds only files named in
        `remove_if_only` (a run that failed before its first score) and `acquire` created the folder,
        remove them, the folder, and the parents that `acquire` created, as long as they are empty."""
        if self._fd is None:
            return
        self.path.unlink(missing_ok=True)  # while still locked: a waiter sees that its file is gone and starts over
        names = {p.name for p in self.run_dir.iterdir()}
        if remove_if_only is not None and self._created_top is not None and names <= set(remove_if_only):
            for name in sorted(names):
                (self.run_dir / name).unlink()
            folder = self.run_dir
            while True:
                try:
                    folder.rmdir()
                except OSError:
                    break
                if folder == self._created_top:
                    break
                folder = folder.parent
        os.close(self._fd)
        self._fd = None

    @contextlib.contextmanager
    def hold(self, wait: bool = False) -> Iterator[RunLock]:
        self.acquire(wait)
        try:
            yield self
        finally:
            self.release()
