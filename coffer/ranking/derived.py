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


SUFFIX = ".npys"  # a set of named arrays: .npy records one after another (`save_arrays`)
_ALIGN = 64  # each record starts here, so its data does too (numpy pads an .npy header to 64 bytes)


def load_derived(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a derived file (`save_arrays`), or None when it is missing or unreadable.

    They are mapped, not read: a 30,000-server index (58 MB) is ready in a millisecond, and only the
    pages a search touches are read. The arrays are read-only; the file is only ever replaced whole
    (`save_derived`), so a mapping stays valid while a newer file takes its name."""
    import mmap

    try:
        with path.open("rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            names = unpack_strings(_record(handle, mapped, 0)[0])
            arrays, at = {}, _record(handle, mapped, 0)[1]
            for name in names:
                arrays[name], at = _record(handle, mapped, at)
            return arrays
    except Exception:  # missing, truncated, of another format: the data is derived and is recomputed
        return None


def _record(handle: BinaryIO, mapped: object, at: int) -> tuple[np.ndarray, int]:
    """The array whose .npy record starts at `at`, over the mapping, and where the next record starts."""
    import numpy as np
    from numpy.lib import format as npy

    handle.seek(at)
    major, _ = npy.read_magic(handle)
    read_header = npy.read_array_header_1_0 if major == 1 else npy.read_array_header_2_0
    shape, fortran, dtype = read_header(handle)
    if fortran or dtype.hasobject:
        raise ValueError("not a plain array")
    count = int(np.prod(shape, dtype=np.int64))
    start = handle.tell()
    array = np.frombuffer(mapped, dtype=dtype, count=count, offset=start).reshape(shape)  # type: ignore[call-overload]
    end = start + count * dtype.itemsize
    return array, -(-end // _ALIGN) * _ALIGN


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
        for stale in [*files[keep:], *folder.glob("*.npz")]:  # .npz: what earlier versions wrote
            stale.unlink(missing_ok=True)
    except OSError:
        pass


def save_arrays(path: Path, arrays: Mapping[str, np.ndarray], keep: int) -> None:
    """`save_derived` for a set of named arrays: their names, then each array, as .npy records (numpy's
    own format) each starting on a 64-byte boundary, so `load_derived` maps them without a copy."""
    import numpy as np
    from numpy.lib import format as npy

    def write(handle: BinaryIO) -> None:
        for array in (pack_strings(list(arrays)), *arrays.values()):
            npy.write_array(handle, np.ascontiguousarray(array), allow_pickle=False)
            handle.write(b"\0" * (-handle.tell() % _ALIGN))

    if any("\n" in name for name in arrays):
        raise ValueError("array names must not hold a newline")
    save_derived(path, write, keep)


def pack_strings(strings: Sequence[str], sep: str = "\n") -> np.ndarray:
    """Strings (none holding `sep`) as one uint8 array: far faster to load than a numpy string array."""
    import numpy as np

    return np.frombuffer(sep.join(strings).encode("utf-8", "surrogatepass"), dtype=np.uint8)


def unpack_strings(packed: np.ndarray, sep: str = "\n") -> list[str]:
    text = packed.tobytes().decode("utf-8", "surrogatepass")
    return text.split(sep) if text else []
