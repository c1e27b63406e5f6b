"""Where Coffer keeps its files.

One resolver for every path, so `COFFER_HOME` can move all of them at once (tests rely on it), in the
spirit of llm's `LLM_USER_PATH`. `coffer paths` prints them.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

ENV_HOME = "COFFER_HOME"


def _home() -> Path | None:
    value = os.environ.get(ENV_HOME)
    return Path(value).expanduser() if value else None


def config_dir() -> Path:
    """Directory that holds coffer.toml (the registry)."""
    home = _home()
    if home is not None:
        return home
    import platformdirs

    return Path(platformdirs.user_config_dir("coffer"))


def data_dir() -> Path:
    """Directory that holds coffer.db, the catalogue snapshot and caches."""
    home = _home()
    if home is not None:
        return home
    import platformdirs

    return Path(platformdirs.user_data_dir("coffer"))


def registry_path() -> Path:
    return config_dir() / "coffer.toml"


def db_path() -> Path:
    return data_dir() / "coffer.db"


def snapshot_path() -> Path:
    return data_dir() / "catalogue.json"


def cache_dir() -> Path:
    """Derived data that can always be rebuilt (tool vectors, indexes); created 0700 on first use."""
    path = data_dir() / "cache"
    with contextlib.suppress(OSError):  # a cache that cannot be created is only a slower start
        ensure_private_dir(path)
    return path


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and any missing parents) as 0700: the vault holds tokens and call history.

    `mkdir(parents=True)` would create the parents with the umask's mode (0777 under umask 000).
    """
    missing: list[Path] = []
    probe = path
    while not probe.exists() and probe.parent != probe:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=0o700)
        with contextlib.suppress(OSError):
            os.chmod(directory, 0o700)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    return path


def all_paths() -> dict[str, Path]:
    return {
        "config_dir": config_dir(),
        "data_dir": data_dir(),
        "registry": registry_path(),
        "database": db_path(),
        "snapshot": snapshot_path(),
        "cache": data_dir() / "cache",
        "http_token": data_dir() / "http-token",
    }
