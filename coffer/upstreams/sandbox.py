"""Confinement: what a stdio upstream may read, write, reach and see is decided here, not by the upstream.

Every stdio upstream starts confined unless its entry says `sandbox = "off"`. On Linux the launch line
runs under bubblewrap (Debian's `bwrap`, unprivileged user namespaces), inside the supervisor
(coffer.upstreams.reaper), so the engine, in-process serving, `coffer call`, `doctor` and `refresh` all
get it:

- Files: the whole filesystem is mounted read-only; what is never readable is hidden (an empty
  read-only tmpfs over a directory, /dev/null over a file): the user's keys and credentials
  (`NEVER_READABLE`), Coffer's own config, data and cache directories (registry, database, secrets
  file, kept results, tokens), the user's runtime directory (keyring and D-Bus sockets, the engine's
  socket) and Coffer's fallback socket directory. Writable: the package runners' caches (`CACHES`), a
  private temporary directory (TMPDIR), and what the server's policy grants.
- Processes: its own PID namespace, a new session and IPC namespace: it sees, traces and signals only
  its own descendants, never its sibling upstreams, the engine or the user's shell (whose
  `/proc/<pid>/environ` and `cmdline` hold their tokens).
- Network: allowed by default; `network = "none"` gives it a network namespace of its own (loopback
  only, nothing outside, not even the host's 127.0.0.1); a list of hosts, the same namespace with one
  way out: its proxy variables lead to coffer.upstreams.netgate, which carries each connection to
  Coffer's filtering proxy (coffer.upstreams.egress), which allows only those hosts.
- Environment: only the variables its entry lists and a few basics (coffer.upstreams.transport).

Where the OS offers nothing (no bwrap, user namespaces blocked, not Linux), the server runs unconfined
and Coffer says so (`support()`, the gateway's log once, `coffer doctor`, `coffer show`), unless
`[settings] sandbox_required = true` asks to refuse such starts.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coffer.errors import UpstreamError
from coffer.upstreams import netgate
from coffer.vault import paths
from coffer.vault.registry import ServerConfig

# Never readable by an upstream, under the user's home (README: Confinement).
NEVER_READABLE = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".config/gh",
    ".config/hub",
    ".config/op",
    ".vault-token",
    ".password-store",
    ".local/share/keyrings",
    ".cargo/credentials.toml",
    ".terraform.d/credentials.tfrc.json",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    "snap/chromium",
)
# Writable for every confined upstream: where npx, uvx, pip, pnpm, bun and browsers keep what they fetch.
CACHES = (".npm", ".cache", ".local/share/uv", ".local/share/pnpm", ".bun")
log = logging.getLogger("coffer.sandbox")
BWRAP_ENV = "COFFER_BWRAP"  # the bubblewrap to use, where `bwrap` on PATH is not the one
NETGATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netgate.py")
WHY_DEFAULT = "the default policy: read all but secrets, write caches and its own temp, network on"


@dataclass(frozen=True)
class Policy:
    """What one upstream may do. `off`: unconfined (its entry says so). `why`: where the policy came
    from, for `coffer show`."""

    network: str | tuple[str, ...] = "all"
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    named: tuple[str, ...] = ()  # writable because the launch line names them; never uncovers a hidden path
    off: bool = False
    why: str = WHY_DEFAULT

    def describe(self) -> str:
        if self.off:
            return 'off (sandbox = "off"): runs with the user\'s full authority'
        net = self.network if isinstance(self.network, str) else "only " + ", ".join(self.network)
        parts = [f"network {net}"]
        if self.write or self.named:
            parts.append("writes " + ", ".join(dict.fromkeys((*self.write, *self.named))))
        if self.read:
            parts.append("also reads " + ", ".join(self.read))
        return "; ".join(parts)


@dataclass(frozen=True)
class Support:
    """What this machine offers for confinement, and why not where it does not."""

    bwrap: str | None  # the working bubblewrap's path
    landlock_abi: int | None
    user_namespaces: bool
    problem: str | None = None  # why servers here run unconfined

    @property
    def available(self) -> bool:
        return self.bwrap is not None and self.problem is None


def policy_for(cfg: ServerConfig) -> Policy:
    """The policy in force for `cfg`: its own table, `off`, or (auto) a known server's, else the default.
    Whatever the launch line names (an existing directory or data file among its arguments, an
    explicit `cwd`) is granted read-write as well: the user's own entry told the server to use it."""
    raw: Any = cfg.sandbox
    if raw == "off":
        return Policy(off=True, why='sandbox = "off" in its entry')
    named = _named(cfg)
    if isinstance(raw, dict):
        network = raw.get("network", "all")
        return Policy(
            network=network if isinstance(network, str) else tuple(network),
            read=tuple(_expand(p, cfg) for p in raw.get("read", ())),
            write=tuple(_expand(p, cfg) for p in raw.get("write", ())),
            named=named,
            why="its own [servers.NAME] sandbox table",
        )
    known = _known(cfg)
    if known is not None:
        return Policy(known.network, known.read, known.write, named, why=known.why)
    why = WHY_DEFAULT + (", and the paths its launch line names" if named else "")
    return Policy(named=named, why=why)


def _expand(path: str, cfg: ServerConfig) -> str:
    """A granted path as the sandbox binds it: `~` expanded, relative paths from the server's cwd."""
    expanded = os.path.expanduser(path)
    if not os.path.isabs(expanded):
        expanded = os.path.join(cfg.cwd or os.getcwd(), expanded)
    return os.path.normpath(expanded)


def _unique(items: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


_CODE = (".py", ".js", ".mjs", ".cjs", ".ts", ".sh", ".jar", ".exe")


def _named(cfg: ServerConfig) -> tuple[str, ...]:
    """What its launch line names, granted read-write: existing directories and data files among its
    arguments (`PATH`, `--opt=PATH`) and path-valued env entries, the directory a named file is to be
    created in (not the home directory, nor one just under /), and its explicit cwd; never the program
    or a script it runs (a server must not rewrite its own code)."""
    found = [cfg.cwd] if cfg.cwd else []
    values = [a.split("=", 1)[1] if a.startswith("-") and "=" in a else a for a in cfg.args]
    values += [v for v in cfg.env.values() if v.startswith(("/", "~")) and "${" not in v]
    for value in values:
        if not value or value.startswith("-") or (os.sep not in value and not value.startswith((".", "~"))):
            continue
        path = _expand(value, cfg)
        data = os.path.isfile(path) and not path.endswith(_CODE) and not os.access(path, os.X_OK)
        if data or os.path.isdir(path):
            found.append(path)
        elif not os.path.exists(path) and _creatable_in(os.path.dirname(path)):
            found.append(os.path.dirname(path))
    return _unique(found)


def _creatable_in(folder: str) -> bool:
    """A folder a named file may be created in: it exists, and it is not the home directory, one of its
    ancestors, or a directory right under / (granting those would open the user's dotfiles or /tmp)."""
    if not os.path.isdir(folder):
        return False
    real, home = os.path.realpath(folder), os.path.realpath(os.path.expanduser("~"))
    return real.count(os.sep) >= 2 and not _within(home, real)


# Servers whose launch line says what they need (`auto`): the word before is the package or program.
_FILESYSTEM = re.compile(r"(^|[/@])(server-filesystem|mcp-server-filesystem)(@[\w.^~-]+)?$")
_GIT = re.compile(r"(^|/)mcp-server-git(==[\w.]+)?$")
_OFFLINE = re.compile(
    r"(^|[/@])(mcp-server-time|server-memory|mcp-server-sequential-thinking|server-sequential-thinking)(@[\w.^~-]+)?$"
)
_KUBERNETES = re.compile(r"(^|[/@])(mcp-server-kubernetes)(@[\w.^~-]+)?$")
_SHELL = re.compile(r"(^|[/@])(desktop-commander)(@[\w.^~-]+)?$")
_RUNNERS = {"npx", "uvx", "pipx", "bunx", "pnpx", "pnpm", "yarn", "dlx", "uv"}


def _known(cfg: ServerConfig) -> Policy | None:
    """A fitting policy for servers Coffer knows by their launch line (README: Confinement)."""
    words = [os.path.basename(cfg.command or ""), *cfg.args]
    runner = any(os.path.basename(w) in _RUNNERS for w in words[:2])
    home = os.path.expanduser("~")
    if any(_FILESYSTEM.search(w) for w in words):
        return Policy(why="auto: the filesystem server, its root arguments read-write")
    if any(_GIT.search(w) for w in words):
        repo = _option(cfg.args, ("--repository", "-r"))
        write = (_expand(repo, cfg),) if repo else ()
        network = "all" if runner else "none"
        return Policy(network=network, write=write, why="auto: the git server, its repository read-write")
    if any(_KUBERNETES.search(w) for w in words):
        return Policy(read=(os.path.join(home, ".kube"),), why="auto: a Kubernetes client, reads ~/.kube")
    if any(_SHELL.search(w) for w in words):
        own = (os.path.join(home, ".claude-server-commander"),)
        return Policy(write=own, why="auto: a shell server, its own settings read-write (grant project folders)")
    if any(_OFFLINE.search(w) for w in words):
        if runner:  # npx and uvx fetch the package at start: the registry must be reachable
            return Policy(why="auto: needs no network, but its package runner fetches it at start")
        return Policy(network="none", why="auto: a server that needs no network")
    return None


def _option(args: list[str], names: tuple[str, ...]) -> str | None:
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


@functools.cache
def support() -> Support:
    """Probe once per process: a bubblewrap that can make the namespaces we use (about 5 ms)."""
    abi = landlock_abi()
    userns = _int_file("/proc/sys/user/max_user_namespaces") != 0
    if not sys.platform.startswith("linux"):
        return Support(None, None, False, f"confinement is implemented for Linux only (this is {sys.platform})")
    bwrap = shutil.which(os.environ.get(BWRAP_ENV) or "bwrap")
    if bwrap is None:
        return Support(None, abi, userns, "bubblewrap (bwrap) is not installed: apt install bubblewrap")
    probe = [bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--die-with-parent", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return Support(None, abi, userns, f"bwrap does not run: {exc}")
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        return Support(None, abi, userns, f"bwrap cannot make namespaces here: {why[-1] if why else done.returncode}")
    return Support(bwrap, abi, userns)


_warned: set[str] = set()


def in_force(cfg: ServerConfig) -> Policy | None:
    """The policy a start of `cfg` runs under; None when it runs unconfined (`off`, or nothing here to
    confine with: said once per server on the log, or refused when `[settings] sandbox_required`)."""
    policy = policy_for(cfg)
    if policy.off:
        return None
    found = support()
    if found.available:
        return policy
    from coffer.vault import registry

    try:
        required = registry.load().settings.get("sandbox_required") is True
    except Exception:  # an unreadable registry: the gateway keeps its last good one; refuse to guess
        required = True
    if required:
        raise UpstreamError(f"server '{cfg.name}' not started: sandbox_required is set and {found.problem}")
    if cfg.name not in _warned:
        _warned.add(cfg.name)
        log.warning("server '%s' runs unconfined: %s", cfg.name, found.problem)
    return None


def landlock_abi() -> int | None:
    """The kernel's Landlock ABI version (None without Landlock), for `coffer doctor`."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        abi = int(libc.syscall(444, None, 0, 1))  # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return None
    return abi if abi > 0 else None


def _int_file(path: str) -> int | None:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def hidden() -> tuple[list[str], list[str]]:
    """(directories, files) that are never readable, as they exist on this machine now."""
    home = os.path.expanduser("~")
    candidates = [os.path.join(home, p) for p in NEVER_READABLE]
    candidates += [str(p) for p in (paths.config_dir(), paths.data_dir(), paths.cache_dir())]
    if home_override := os.environ.get(paths.ENV_HOME):
        candidates.append(home_override)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        candidates.append(runtime)
    candidates.append(os.path.join(tempfile.gettempdir(), f"coffer-{os.getuid()}"))
    dirs: list[str] = []
    files: list[str] = []
    for path in sorted(dict.fromkeys(os.path.realpath(c) for c in candidates)):
        if any(_within(path, d) for d in dirs):
            continue  # inside a directory hidden already (COFFER_HOME holds the cache dir)
        if os.path.isdir(path):
            dirs.append(path)
        elif os.path.exists(path):
            files.append(path)
    return dirs, files


def private_tmp(name: str) -> str:
    """A temporary directory only this upstream writes (0700), bound at the same path inside."""
    return tempfile.mkdtemp(prefix=f"coffer-{name}-")


def wrap(argv: list[str], policy: Policy, tmp: str, cwd: str | None) -> list[str]:
    """`argv` under bubblewrap with `policy` (the probe in `support()` must have found it working)."""
    bwrap = support().bwrap
    assert bwrap is not None
    home = os.path.expanduser("~")
    out = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if policy.network != "all":  # "none", or a host list: no route out but the filtering proxy
        out.append("--unshare-net")
    out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for cache in CACHES:
        path = os.path.join(home, cache)
        if _ensure_dir(path):
            out += ["--bind", path, path]
    out += ["--bind", tmp, tmp]
    dirs, files = hidden()
    hiding = dirs + files
    # What the launch line names never uncovers a hidden path; what the policy grants may, but never
    # more than it names: a grant that holds a hidden path is bound before the hiding (a root of ~ still
    # hides ~/.ssh), one inside a hidden path after it (~/.aws/config alone).
    real = [os.path.realpath(p) for p in policy.named]
    named = [(p, "--bind") for p in real if not any(_within(p, h) for h in hiding)]
    granted = [(os.path.realpath(p), "--ro-bind") for p in policy.read]
    granted += [(os.path.realpath(p), "--bind") for p in policy.write]
    grants = [(p, how) for p, how in named + granted if os.path.exists(p)]
    inside = [(p, how) for p, how in grants if any(_within(p, h) for h in hiding)]
    for path, how in (g for g in grants if g not in inside):
        out += [how, path, path]
    for path in dirs:
        out += ["--tmpfs", path]
    for path in files:
        out += ["--ro-bind", "/dev/null", path]
    for path, how in inside:  # its mount point is made in the hiding tmpfs, while that is still writable
        if os.path.isdir(path) and path not in hiding:
            out += ["--dir", path]
        out += [how, path, path]
    uncovered = {p for p, _ in inside}
    for path in dirs:
        if path not in uncovered:
            out += ["--remount-ro", path]
    if os.geteuid() == 0:
        out += ["--cap-drop", "ALL"]  # root outside: no capability inside to remount what is read-only
    if cwd:
        out += ["--chdir", cwd]
    if isinstance(policy.network, tuple):  # only through the filtering proxy (coffer.upstreams.egress)
        argv = [sys.executable, "-I", "-S", NETGATE, proxy_socket(tmp), str(netgate.PORT), "--", *argv]
    return [*out, "--", *argv]


def helper_command(binary: str) -> list[str] | None:
    """The command that runs a self-contained helper (code mode's script worker) with nothing but its
    own binary and the system's libraries: no home, no vault, no network, no other process, no
    capability. None where bubblewrap cannot run here (the helper then runs unconfined)."""
    found = support()
    if not found.available or found.bwrap is None:
        return None
    out = [found.bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--ro-bind", "/usr", "/usr"]
    for path in ("/lib", "/lib64", "/lib32", "/bin", "/sbin"):  # merged /usr: links; else the real dirs
        if os.path.islink(path):
            out += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            out += ["--ro-bind", path, path]
    if os.geteuid() == 0:
        out += ["--cap-drop", "ALL"]
    real = os.path.realpath(binary)
    return [*out, "--ro-bind", real, "/helper", "--dev", "/dev", "--proc", "/proc", "--", "/helper"]


def proxy_socket(tmp: str) -> str:
    return os.path.join(tmp, "egress.sock")


def proxy_env() -> dict[str, str]:
    """What points a confined server's HTTP clients at its netgate (Node 24 reads these too when asked)."""
    url = f"http://127.0.0.1:{netgate.PORT}"
    names = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")
    return {**dict.fromkeys(names, url), "NO_PROXY": "localhost,127.0.0.1", "NODE_USE_ENV_PROXY": "1"}


def _within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip(os.sep) + os.sep)


def _ensure_dir(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return False
    return os.path.isdir(path)


DENIED = re.compile(r"(Read-only file system|Permission denied|No such file or directory|Network is unreachable)")


def hint(policy: Policy, error: str, denied_hosts: list[str] | None = None) -> str | None:
    """What to tell a user whose confined server failed on something confinement may have denied."""
    if denied_hosts:
        return (
            f"its proxy refused {', '.join(denied_hosts[-3:])}: allow a host with `--allow-host` (README: Confinement)"
        )
    if policy.off or not DENIED.search(error):
        return None
    if "Network is unreachable" in error and policy.network == "none":
        return 'it runs with network = "none": allow hosts with `--allow-host` (README: Confinement)'
    return "it runs confined: grant a path with `coffer add --allow-read/--allow-write` (README: Confinement)"
