"""Derived cache files (vectors, index snapshots, word pieces): written atomically, read forgivingly.

Everything here can be recomputed from the catalogue and the model, so a missing, damaged or stale
file is only a slower start, never an error.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import numpy as np


def load_derived(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a derived .npz file, or None when it is missing or unreadable."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except Exception:  # missing, truncated, not an npz: the data is derived and is recomputed
        return None


def save_derived(path: Path, write: Callable[[BinaryIO], None], keep: int) -> None:
    """Write a derived cache file atomically (never a half file under its name), then keep the newest
    `keep` files of its kind in its folder: old catalogues' files are never needed again. Errors are
    ignored: the data is recomputed when its file is missing. Vectors, index snapshots, word pieces."""
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        import tempfile  # only when writing (a start that reads its caches never does)

        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=path.suffix)
        try:
            with os.fdopen(fd, "wb") as handle:
                write(handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        files = sorted(folder.glob(f"*{path.suffix}"), key=lambda p: p.stat().st_mtime, reverse=True)
        for stale in files[keep:]:
            stale.unlink(missing_ok=True)
    except OSError:
        pass


def save_arrays(path: Path, arrays: Mapping[str, np.ndarray], keep: int) -> None:
    """`save_derived` for a set of named arrays (an .npz): index snapshots and word pieces."""
    import numpy as np

    save_derived(path, lambda handle: np.savez(handle, allow_pickle=False, **arrays), keep)


def pack_strings(strings: Sequence[str], sep: str = "\n") -> np.ndarray:
    """Strings (none holding `sep`) as one uint8 array: far faster to load than a numpy string array."""
    import numpy as np

    return np.frombuffer(sep.join(strings).encode("utf-8", "surrogatepass"), dtype=np.uint8)


def unpack_strings(packed: np.ndarray, sep: str = "\n") -> list[str]:
    text = packed.tobytes().decode("utf-8", "surrogatepass")
    return text.split(sep) if text else []
