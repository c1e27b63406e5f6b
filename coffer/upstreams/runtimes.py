"""What a confined launch line needs to read to run at all: the operating system and its runtime.

Confinement reads by allow-list (coffer.upstreams.sandbox): nothing of the user's home is visible
unless something here or the server's policy names it. This module finds the rest from the launch line
itself, never from a list of places to hide:

- the operating system's directories (`/usr`, `/lib*`, `/bin`, `/etc`, `/opt`, `/sys`, ...);
- the program's runtime, wherever it is installed: the prefix of the program and of every interpreter
  its `#!` line names (a `bin/` directory's parent), or the whole version manager it lives in (nvm,
  pyenv, volta, uv's pythons, ...); for Python, what the interpreter's own `sys.path` holds (a venv's
  base, `.pth` paths, editable installs);
- the directories on PATH (a runner finds `node` or `python` there), each with its runtime;
- the code a launch line runs by path (`node dist/index.js`, `python server.py`): its project, up to
  the folder that holds `package.json`, `pyproject.toml` or `node_modules`.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

# The operating system: readable by every confined server (what exists of it here).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/sys", "/nix", "/snap")
# Version managers and runtime installs under HOME: a program inside one gets the whole manager (its
# shims call back into it), read-only. Runtimes, not secrets: none of these keeps credentials.
MANAGERS = (
    ".nvm",
    ".pyenv",
    ".volta",
    ".fnm",
    ".local/share/fnm",
    ".asdf",
    ".local/share/mise",
    ".rbenv",
    ".goenv",
    ".sdkman",
    ".deno",
    ".bun/bin",
    ".cargo/bin",
    ".rustup/toolchains",
    ".local/share/uv/python",
    ".local/share/uv/tools",
    ".local/share/pnpm",
    ".linuxbrew",
)
_BIN = ("bin", "sbin", "shims", "Scripts")
_PROJECT = ("package.json", "pyproject.toml", "setup.py", "node_modules", "Cargo.toml", "go.mod")
T = TypeVar("T")
_PYTHON = re.compile(r"^python(\d(\.\d+)?)?$")


def home() -> str:
    return os.path.realpath(os.path.expanduser("~"))


def unique(items: Iterable[T]) -> tuple[T, ...]:
    """`items` without repeats, in their first order."""
    return tuple(dict.fromkeys(items))


def tilde(path: str) -> str:
    """A path under the user's home as `~/...`, as a person writes it."""
    user = os.path.expanduser("~")
    return "~" + path[len(user) :] if path == user or path.startswith(user + os.sep) else path


def within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip(os.sep) + os.sep)


@functools.cache
def system_dirs() -> tuple[str, ...]:
    """The OS directories present here, plus where /etc/resolv.conf really lives (systemd's /run): read
    once per process, as every start and every runtime lookup asks."""
    found = [d for d in SYSTEM if os.path.lexists(d)]
    resolv = os.path.realpath("/etc/resolv.conf")
    if os.path.exists(resolv) and not any(within(resolv, d) for d in found):
        found.append(os.path.dirname(resolv))
    return tuple(found)


@functools.cache
def _system_real() -> tuple[str, ...]:
    """The system directories as real paths (merged /usr: /lib is /usr/lib)."""
    return tuple(os.path.realpath(d) for d in system_dirs() if os.path.isdir(d))


def runtime_root(path: str) -> str | None:
    """The directory that holds `path`'s runtime; None where the system already covers it. Never the
    home directory or an ancestor of it, and never a whole `~/.local`."""
    path = os.path.realpath(path)
    if any(within(path, d) for d in _system_real()):
        return None
    user = home()
    for manager in MANAGERS:
        root = os.path.join(user, manager)
        if within(path, root):
            return root
    if "node_modules" in path.split(os.sep):  # an install prefix: the folder that holds the outermost node_modules
        return path[: path.index(os.sep + "node_modules" + os.sep)] or None
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    if os.path.basename(folder) in _BIN:
        parent = os.path.dirname(folder)
        if _safe(parent) and parent != os.path.join(user, ".local"):
            return parent
    return folder if _safe(folder) else None


def _safe(folder: str) -> bool:
    """A folder that may be granted whole: not /, not the home directory or one of its ancestors."""
    return folder.count(os.sep) >= 2 and not within(home(), folder) and folder != "/"


def program_dirs(program: str, path_env: str | None) -> list[str]:
    """Every runtime directory `program` needs: its own, its `#!` interpreters', Python's sys.path,
    and PATH's (a runner's `node` or `python`)."""
    found: list[str] = []
    todo: list[str] = [program]
    seen: set[str] = set()
    while todo:
        current = todo.pop()
        if current in seen or len(seen) > 8:
            continue
        seen.add(current)
        for candidate in (current, os.path.realpath(current)):
            root = runtime_root(candidate)
            if root is not None:
                found.append(root)
        todo += _interpreters(os.path.realpath(current), path_env)
        if _PYTHON.match(os.path.basename(current)) or _PYTHON.match(os.path.basename(os.path.realpath(current))):
            found += python_dirs(current)  # as named: a venv's python is a link to its base, its pyvenv.cfg beside it
    for entry in (path_env or "").split(os.pathsep):
        if entry and os.path.isabs(entry) and os.path.isdir(entry) and not within(home(), os.path.realpath(entry)):
            root = runtime_root(entry)
            if root is not None:
                found.append(root)
    return outermost(found)


def _interpreters(program: str, path_env: str | None) -> list[str]:
    """The interpreter a script's `#!` line names (`/usr/bin/env node` resolved on PATH)."""
    try:
        with open(program, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return []
    if os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if not words:
            return []
        import shutil

        found = shutil.which(words[0], path=path_env)
        return [found] if found else []
    return [words[0]]


@functools.cache
def python_dirs(interpreter: str) -> tuple[str, ...]:
    """What a Python interpreter imports from: its prefixes and sys.path (asked once per process, about
    20 ms), and the source folders of editable installs (their finders' MAPPING)."""
    code = "import sys, json; print(json.dumps([sys.prefix, sys.base_prefix, *sys.path]))"
    try:
        done = subprocess.run([interpreter, "-I", "-c", code], capture_output=True, timeout=10, text=True)
        entries: list[str] = json.loads(done.stdout) if done.returncode == 0 else []
    except (OSError, subprocess.SubprocessError, ValueError):
        return ()
    found: list[str] = []
    for entry in entries:
        if not entry or not os.path.exists(entry):
            continue
        found.append(os.path.dirname(entry) if entry.endswith(".zip") else entry)
        if entry.endswith("-packages") and os.path.isdir(entry):
            found += _editable_sources(entry)
    return tuple(os.path.realpath(f) for f in found if not any(within(os.path.realpath(f), d) for d in SYSTEM))


def _editable_sources(site: str) -> list[str]:
    found: list[str] = []
    for finder in Path(site).glob("__editable__*finder.py"):
        match = re.search(r"^MAPPING[^=]*=\s*(\{.*?\})\s*$", finder.read_text(errors="replace"), re.M | re.S)
        if match:
            try:
                mapping = ast.literal_eval(match.group(1))
            except (ValueError, SyntaxError):
                continue
            found += [os.path.dirname(str(p)) if os.path.isfile(str(p)) else str(p) for p in mapping.values()]
    return found


def project_of(script: str) -> str:
    """The folder a script's own code lives in: its project root (the nearest ancestor, up to four
    levels, holding package.json, pyproject.toml, node_modules ...), else its own folder."""
    root = runtime_root(script)
    if root is not None and os.path.basename(root) != os.path.basename(os.path.dirname(os.path.realpath(script))):
        return root  # inside node_modules or a version manager: that install
    folder = os.path.dirname(os.path.realpath(script))
    probe = folder
    for _ in range(4):
        if any(os.path.exists(os.path.join(probe, marker)) for marker in _PROJECT):
            return probe if _safe(probe) else folder
        parent = os.path.dirname(probe)
        if parent == probe or not _safe(parent):
            break
        probe = parent
    return folder


def outermost(paths: list[str]) -> list[str]:
    """Unique paths, dropping any inside another one of them."""
    unique = sorted(dict.fromkeys(os.path.realpath(p) for p in paths))
    out: list[str] = []
    for path in unique:
        if not any(within(path, kept) for kept in out):
            out.append(path)
    return out
