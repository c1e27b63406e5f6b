"""Where Coffer keeps its files.

One resolver for every path, so `COFFER_HOME` can move all of them at once (tests rely on it), in the
spirit of llm's `LLM_USER_PATH`. `coffer paths` prints them.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from coffer.errors import CofferError

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


def shell_env_path() -> Path:
    """The user's shell's runtime variables, recorded for the engine (coffer.vault.shellenv)."""
    return data_dir() / "shell-env.json"


def cache_dir() -> Path:
    """Derived data that can always be rebuilt (tool vectors, indexes); created 0700 on first use."""
    path = data_dir() / "cache"
    with contextlib.suppress(OSError):  # a cache that cannot be created is only a slower start
        ensure_private_dir(path)
    return path


def runtime_root() -> Path:
    """Where the engines' sockets and locks live: `$XDG_RUNTIME_DIR/coffer`, else `/tmp/coffer-<uid>`
    (made by `owned_private_dir`, coffer.engine.place)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    return Path(base) / "coffer" if base and Path(base).is_dir() else private_tmp_root()


def private_tmp_root() -> Path:
    """`/tmp/coffer-<uid>`: this user's sockets (without a runtime dir) and every confined server's
    private temp (`servers/`), so no server can find another's temp or proxy socket in /tmp."""
    return Path(tempfile.gettempdir()) / f"coffer-{os.getuid()}"


def owned_private_dir(root: Path) -> Path:
    """`root` made 0700 and refused when it is not a directory of this user (a shared /tmp)."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = root.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise CofferError(f"{root} is not a directory of this user: refusing to put Coffer's files there")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(root, 0o700)
    return root


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
        "shell_env": shell_env_path(),
    }
