"""Crash-safe file writes and cross-process locks.

Writers lock, write a temp file that is 0600 from its first byte, fsync, then `os.replace`, so a reader
never sees half a file and a crash never leaves a truncated vault (hatch and pipx do the same).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from coffer.vault.paths import ensure_private_dir

LOCK_TIMEOUT_S = 30.0


@contextlib.contextmanager
def locked(path: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive advisory lock beside `path` (`<path>.lock`) for the block."""
    from filelock import FileLock, Timeout

    from coffer.errors import ConflictError

    ensure_private_dir(path.parent)
    lock = FileLock(str(path) + ".lock", timeout=timeout, mode=0o600)
    try:
        with lock:
            yield
    except Timeout as exc:
        raise ConflictError(f"{path}: another coffer process holds the lock (waited {timeout:.0f}s)") from exc


def atomic_write(path: Path, data: str | bytes, mode: int = 0o600, *, private_parent: bool = True) -> None:
    """Replace `path` with `data` atomically; the file never exists with wider permissions than `mode`.

    `private_parent=False` is for files Coffer edits in someone else's directory (an agent's config in
    the user's home): its permissions are left as they are, never narrowed to 0700.
    """
    if private_parent:
        ensure_private_dir(path.parent)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    import tempfile  # only when writing: readers (`coffer search`) skip its import

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)  # mkstemp already creates 0600; keep it explicit for other modes
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
