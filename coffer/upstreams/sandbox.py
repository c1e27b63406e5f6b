"""Confinement: what a stdio upstream may read, write, reach and see is decided here, not by the upstream.

Deny by default, allow what the server needs. Every stdio upstream starts confined unless its entry
says `sandbox = "off"`, under the supervisor (coffer.upstreams.reaper), so the engine, in-process
serving, `coffer call`, `doctor` and `refresh` all get it. A confined server:

- reads only the operating system, its runtime (coffer.upstreams.runtimes), the code its launch line
  runs, and what its policy grants (coffer.upstreams.policy); nothing else of the user's home, no other
  home directory, no mounted media, no `/run/user`;
- writes only a home of its own (private, persistent: `<data>/sandbox/<name>/home`, also its working
  directory where its entry sets none, and where its package runner's cache lives, so no server can
  change the code another one runs), a private temporary directory, and what the launch line names or
  the policy grants;
- reaches the internet's web ports (80, 443, DNS) by default, not the host's other loopback services,
  not abstract unix sockets; `network = "none"`, a host list, or more ports by grant;
- sees, traces and signals only its own processes.

Two mechanisms, the first found: bubblewrap (`bwrap`: mount, PID, IPC and, for "none" and host lists,
network namespaces), with Landlock inside it for ports, abstract sockets and signals; or Landlock
alone (kernel 5.13+, ABI read at run time, coffer.upstreams.lockdown) where bwrap is missing, so a
plain `pip install` is confined too. Where neither exists the server runs unconfined and Coffer says
so, unless `[settings] sandbox_required = true` refuses such starts.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from coffer.errors import UpstreamError
from coffer.upstreams import lockdown, netgate, runtimes, walls
from coffer.upstreams.policy import SECRETS, WEB_PORTS, Policy, policy_for
from coffer.vault import paths
from coffer.vault.registry import ServerConfig

__all__ = ["SECRETS", "Policy", "policy_for"]
log = logging.getLogger("coffer.sandbox")
BWRAP_ENV = "COFFER_BWRAP"  # the bubblewrap to use, where `bwrap` on PATH is not the one ("none": never)
LANDLOCK_ENV = "COFFER_LANDLOCK"  # "none": never use Landlock (to see what a machine without it gets)
NETGATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netgate.py")
LOCKDOWN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lockdown.py")
# Devices a confined server may write under Landlock alone (bubblewrap gives it a /dev of its own).
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts")
_CERTS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
_XDG = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")


@dataclass(frozen=True)
class Support:
    """What this machine offers for confinement. `problem`: why bubblewrap is not used here."""

    bwrap: str | None  # the working bubblewrap's path
    landlock_abi: int | None
    user_namespaces: bool
    problem: str | None = None

    @property
    def mechanism(self) -> str | None:
        if self.bwrap is not None and self.problem is None:
            return "bubblewrap"
        return "landlock" if self.landlock_abi else None

    @property
    def available(self) -> bool:
        return self.mechanism is not None

    @property
    def unconfined_why(self) -> str | None:
        """Why servers here run unconfined; None where they do not."""
        if self.available:
            return None
        return f"{self.problem or 'no bubblewrap'}, and this kernel has no Landlock"

    def describe(self) -> str:
        """Which mechanism confines, and what it cannot do, in a person's words."""
        abi = self.landlock_abi or 0
        if self.mechanism == "bubblewrap":
            extra = (
                f" and Landlock ABI {abi} (ports, abstract sockets, signals)"
                if abi >= 6
                else f" and Landlock ABI {abi} (ports only: abstract sockets stay reachable)"
                if abi >= 4
                else " (no Landlock: the default network keeps the host's loopback and abstract sockets)"
            )
            return "confined by bubblewrap" + extra
        if self.mechanism == "landlock":
            cannot = [
                "it cannot tell hosts apart, only ports (and not UDP)",
                "unix sockets by path stay reachable where the files are readable",
                "its children see no /proc/self",
            ]
            if abi < 4:
                cannot.append("no network rules before ABI 4: the network stays open")
            if abi < 6:
                cannot.append("abstract sockets and signals are scoped from ABI 6")
            return f"confined by Landlock (ABI {abi}; bubblewrap not found): files by allow-list, " + "; ".join(cannot)
        return f"UNCONFINED: {self.unconfined_why}"


@functools.cache
def support() -> Support:
    """Probe once per process: a bubblewrap that can make the namespaces we use (about 5 ms), Landlock's ABI."""
    abi = landlock_abi() if os.environ.get(LANDLOCK_ENV) != "none" else None
    userns = _int_file("/proc/sys/user/max_user_namespaces") != 0
    if not sys.platform.startswith("linux"):
        return Support(None, None, False, f"confinement is implemented for Linux only (this is {sys.platform})")
    chosen = os.environ.get(BWRAP_ENV) or "bwrap"
    bwrap = shutil.which(chosen) if chosen != "none" else None
    if bwrap is None:
        return Support(None, abi, userns, "bubblewrap (bwrap) is not installed")
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
        raise UpstreamError(f"server '{cfg.name}' not started: sandbox_required is set and {found.unconfined_why}")
    if cfg.name not in _warned:
        _warned.add(cfg.name)
        log.warning("server '%s' runs unconfined: %s", cfg.name, found.unconfined_why)
    return None


def landlock_abi() -> int | None:
    """The kernel's Landlock ABI version (None without Landlock)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return lockdown.abi() or None
    except (OSError, AttributeError):
        return None


def _int_file(path: str) -> int | None:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def home_path(name: str, member: str | None = None) -> Path:
    """Where a server's own home is (made by `home_of` at its first start); a team member's process of
    it has one of its own beside it (`members/<hash of sub>`), so members never share files."""
    if member is None:
        return paths.data_dir() / "sandbox" / name / "home"
    digest = hashlib.sha256(member.encode()).hexdigest()[:32]
    return paths.data_dir() / "sandbox" / name / "members" / digest / "home"


def home_of(name: str, member: str | None = None) -> Path:
    """A server's own home: private (0700) and persistent across starts, never the user's."""
    path = home_path(name, member)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    top = paths.data_dir() / "sandbox"
    for folder in [path, *path.parents]:
        if folder == top:
            break
        os.chmod(folder, 0o700)
    return path


def forget(name: str) -> None:
    """A removed server's home goes with it."""
    shutil.rmtree(home_path(name).parent, ignore_errors=True)


@dataclass
class Start:
    """One confined start: what it may read and write (real paths), its ports, environment and cwd, and
    how its argv runs confined. Kept on the upstream to explain a denial."""

    mechanism: str
    policy: Policy
    home: str
    tmp: str
    cwd: str
    read: list[str] = field(default_factory=list)
    write: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)  # walls inside what it may read or write: carved out
    ports: list[int] | None = None  # TCP connect ports (None: not limited by port)
    env: dict[str, str] = field(default_factory=dict)
    in_force: list[walls.Wall] = field(default_factory=list)  # every wall, to say why a path is hidden
    home_at: str = ""  # where its own home is seen: the user's home path, or its own (a grant holds the user's)
    listed: list[str] = field(default_factory=list)  # Landlock: folders carved around a wall, listable only
    roots: list[str] = field(default_factory=list)  # the roots a session declared, for a server that works on them

    def confine(self, argv: list[str]) -> list[str]:
        argv = [self.resolved(a) for a in argv]
        if self.mechanism == "bubblewrap":
            return self._bwrap(argv)
        read = [p for p in self.read if p != "/proc"]
        rules = {
            "files": True,
            "read": read,
            "write": self.write,
            "list": self.listed,
            "own_proc": True,
            "ports": self.ports,
            "required": True,
        }
        return [sys.executable, "-I", "-S", LOCKDOWN, json.dumps(rules), "--", *argv]

    def visible(self, path: str) -> bool:
        """Whether the server can see `path` (a path on the host, as its error names it)."""
        real = os.path.realpath(path)
        allowed = [os.path.realpath(p) for p in (*self.read, *self.write)]
        for wall in (x for x in self.hidden if runtimes.within(real, x)):  # hidden, but for what is bound inside it
            return any(runtimes.within(real, p) and runtimes.within(p, wall) for p in allowed)
        if any(runtimes.within(real, p) for p in allowed):
            return True
        user = runtimes.home()
        if self.mechanism == "bubblewrap" and self.home_at != self.home and runtimes.within(real, user):
            return os.path.lexists(os.path.join(self.home, os.path.relpath(real, user)))  # its own, at the user's
        return False

    def writable(self, path: str) -> bool:
        real = os.path.realpath(path)
        return self.visible(path) and any(runtimes.within(real, os.path.realpath(p)) for p in self.write)

    def resolved(self, arg: str) -> str:
        """An argument as the server is given it: a path through a symlink in a folder it does not see
        (`python ~/bin/server.py`, linked into a project) or with `..` through one
        (`/a/tools/../server/main.py`) becomes the real path it was granted; anything else is as written."""
        option, sep, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
        if not value or (option and not sep):
            return arg
        full = os.path.join(self.cwd, value)
        if not os.path.isabs(value) and os.sep not in value:
            return arg
        if not os.path.exists(full) or any(runtimes.within(os.path.normpath(full), d) for d in runtimes.system_dirs()):
            return arg
        real = os.path.realpath(full)
        dotted = ".." in value.split(os.sep)
        if real == os.path.normpath(full) and not dotted:
            return arg  # no link, no ..
        folder = os.path.realpath(os.path.dirname(os.path.normpath(full)))
        if not dotted and any(runtimes.within(folder, p) for p in (*self.read, *self.write)):
            return arg  # a link in a folder it sees: followed inside as outside
        return f"{option}={real}" if option else real

    def wall_of(self, path: str) -> walls.Wall | None:
        """The wall that hides `path` from this server on purpose, or None."""
        return walls.holding(os.path.realpath(path), self.in_force)

    def _bwrap(self, argv: list[str]) -> list[str]:
        bwrap = support().bwrap
        assert bwrap is not None
        out = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        if self.policy.network != "all":  # "none", or a host list: no route out but the filtering proxy
            out.append("--unshare-net")
        binds: list[tuple[str, str, str]] = []  # (how, source, target)
        system = runtimes.system_dirs()
        for path in system:
            if os.path.islink(path):
                out += ["--symlink", os.readlink(path), path]
            else:
                binds.append(("--ro-bind", path, path))
        binds.append(("--bind", self.home, self.home_at))  # its own home: where the user's was, or its own path
        special = (*DEVICES, "/dev", "/proc")
        binds += [("--ro-bind", p, p) for p in self.read if p not in system and p not in special]
        binds += [("--bind", p, p) for p in self.write if p != self.home and p not in special]
        binds = list(dict.fromkeys(binds))
        depth = lambda b: (b[2].rstrip(os.sep).count(os.sep), b[2])  # noqa: E731  parents before what is inside them
        outside = sorted((b for b in binds if not any(_strictly(b[2], x) for x in self.hidden)), key=depth)
        within = sorted((b for b in binds if b not in outside), key=depth)
        out += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm", "--dir", "/run"]
        for how, source, target in outside:
            out += [how, source, target]
        if any(target == "/" for _, _, target in outside):  # a grant of / covered them: its own again
            out += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/dev/shm"]
        for wall in self.hidden:  # inside a grant: an empty tmpfs over a folder, /dev/null over a file
            out += ["--tmpfs", wall] if os.path.isdir(wall) else ["--ro-bind", "/dev/null", wall]
        for how, source, target in within:  # its own home and temp, or a grant, inside a wall: made in the tmpfs
            if os.path.isdir(source):
                out += ["--dir", target]
            out += [how, source, target]
        out += [a for x in self.hidden if os.path.isdir(x) for a in ("--remount-ro", x)]
        if os.geteuid() == 0:
            out += ["--cap-drop", "ALL"]  # root outside: no capability inside to remount what is read-only
        out += ["--chdir", self.home_at if self.cwd == self.home else self.cwd]
        inner = argv
        if isinstance(self.policy.network, tuple):  # only through the filtering proxy (coffer.upstreams.egress)
            inner = [sys.executable, "-I", "-S", NETGATE, proxy_socket(self.tmp), str(netgate.PORT), "--", *inner]
        line = [*out, "--", *inner]
        if (support().landlock_abi or 0) >= 4:  # ports and scopes around bubblewrap: no files, so it may mount
            rules = {"files": False, "ports": self.ports, "scoped": True}
            line = [sys.executable, "-I", "-S", LOCKDOWN, json.dumps(rules), "--", *line]
        return line


def _strictly(path: str, parent: str) -> bool:
    return path != parent and runtimes.within(path, parent)


def runtime_reads(program: str, env: dict[str, str]) -> list[str]:
    """What `program` needs to read beyond the system to run at all: its runtime's folders, and the CA
    files its environment names (a company's CA outside /etc)."""
    certs = [env[k] for k in _CERTS if env.get(k, "").startswith("/")]
    return [*runtimes.program_dirs(program, env.get("PATH")), *certs]


def prepare(
    cfg: ServerConfig,
    policy: Policy,
    program: str,
    env: dict[str, str],
    roots: tuple[str, ...] = (),
    member: str | None = None,
) -> Start:
    """Everything a confined start of `cfg` needs, made: its home, a private temp, the paths it may read
    and write, its ports, its environment and working directory. `roots`: a session's declared roots,
    for a server that works on them; `member`: the team member it runs for, whose home is its own.
    Nothing here opens a wall (coffer.upstreams.walls): a path in one is dropped, a path that holds one
    has it carved out, but for its own home and temp and the secret places its policy opened by name."""
    mechanism = support().mechanism
    assert mechanism is not None
    home = os.path.realpath(home_of(cfg.name, member))
    tmp = os.path.realpath(tempfile.mkdtemp(prefix=f"{cfg.name}-", dir=temp_root()))
    own: list[str] = []  # the filtering proxy's forwarder runs inside bubblewrap, on this interpreter
    if mechanism == "bubblewrap" and isinstance(policy.network, tuple):
        own = [*runtimes.program_dirs(sys.executable, None), os.path.dirname(NETGATE)]
    every = walls.walls(policy.secrets)
    opened = [os.path.realpath(p) for p in policy.secrets]

    def kept(found: list[str]) -> list[str]:
        """Real paths that exist and lie in no wall, but for its own and what its policy opened by name."""
        out = []
        for real in (os.path.realpath(p) for p in found if os.path.exists(p)):
            wall = walls.holding(real, every)
            named = wall is not None and not wall.coffer and any(runtimes.within(real, o) for o in opened)
            if real in (home, tmp) or wall is None or named:
                out.append(real)
        return list(runtimes.unique(out))

    system = [*runtimes.system_dirs(), "/dev", "/proc"]
    read = kept([*system, *runtime_reads(program, env), *own, *policy.code, *policy.read, *policy.secrets])
    write = kept([home, tmp, *policy.named, *roots, *policy.write])
    hidden = runtimes.outermost([w.path for w in every if any(_strictly(w.path, p) for p in (*read, *write))])
    user = runtimes.home()
    covered = mechanism == "bubblewrap" and any(runtimes.within(user, p) for p in (*read, *write) if p != home)
    uv_pythons = os.path.join(os.path.expanduser("~"), ".local", "share", "uv", "python")
    env = {k: v for k, v in env.items() if k not in _XDG or k in cfg.env}
    env["TMPDIR"] = tmp
    if mechanism == "landlock" or covered:  # its HOME is its own path: the user's is granted, or not seen
        env["HOME"] = home
        if os.path.isdir(uv_pythons):
            env.setdefault("UV_PYTHON_INSTALL_DIR", uv_pythons)
    listed: list[str] = []  # the folders carved around a wall: listable (Landlock gives that to all beneath)
    if mechanism == "landlock":  # Landlock cannot deny inside an allowed folder: allow around each wall instead
        carve = [*hidden, "/proc"]  # and its own /proc/PID only, whatever holds /proc (lockdown's own_proc)
        read = _around(read, carve, listed) + [p for p in read if any(_strictly(p, x) for x in hidden)]
        write = _around(write, carve, listed) + [p for p in write if any(_strictly(p, x) for x in hidden)]
        write += [d for d in DEVICES if os.path.exists(d)]
    named = [p for p in (*policy.named, *policy.code) if os.path.realpath(p) in (*read, *write)]
    cwd = cfg.cwd if cfg.cwd and os.path.realpath(cfg.cwd) in write else None
    cwd = cwd or (os.getcwd() if any(runtimes.within(os.getcwd(), p) for p in named) else home)
    return Start(
        mechanism,
        policy,
        home,
        tmp,
        cwd,
        list(runtimes.unique(read)),
        list(runtimes.unique(write)),
        hidden,
        _ports(policy, mechanism),
        env,
        every,
        home if covered else os.path.expanduser("~"),
        [p for p in runtimes.unique(listed) if p != "/proc"],
        list(roots),
    )


def temp_root() -> str:
    """Where confined servers' private temps are made (`/tmp/coffer-<uid>/servers`): inside one of Coffer's
    walls, so no server finds another's temp or its proxy socket by listing /tmp."""
    root = paths.owned_private_dir(paths.private_tmp_root()) / "servers"
    root.mkdir(mode=0o700, exist_ok=True)
    return str(root)


def _ports(policy: Policy, mechanism: str) -> list[int] | None:
    """TCP ports it may connect to; None where a network namespace decides (bubblewrap, "none" or hosts)."""
    if policy.network == "all":
        return sorted({*WEB_PORTS, *policy.ports})
    if mechanism == "bubblewrap":
        return None
    if policy.network == "none":
        return []
    ports = {int(h.rsplit(":", 1)[1]) for h in policy.network if re.search(r":\d+$", h)}
    return sorted({*WEB_PORTS, *ports, *policy.ports} if len(ports) < len(policy.network) else {*ports, *policy.ports})


def _around(allowed: list[str], hidden: list[str], carved: list[str]) -> list[str]:
    """`allowed`, with any folder that holds a hidden place replaced by its other entries (recursively, by
    real path: a symlink among them that leads into a hidden place, or to a folder holding one, is
    followed as Landlock would follow it). The folders so replaced are added to `carved`."""
    out: list[str] = []
    seen: set[str] = set()
    for path in allowed:
        out += _carve(path, hidden, seen)
    carved.extend(sorted(seen))
    return out


def _carve(path: str, hidden: list[str], seen: set[str]) -> list[str]:
    real = os.path.realpath(path)
    if any(runtimes.within(real, x) for x in hidden) or real in seen:
        return []
    if not any(runtimes.within(x, real) for x in hidden) or not os.path.isdir(real):
        return [real]
    seen.add(real)
    out: list[str] = []
    try:
        entries = os.listdir(real)
    except OSError:
        return []
    for entry in entries:
        out += _carve(os.path.join(real, entry), hidden, seen)
    return out


def cleanup(start: Start) -> None:
    shutil.rmtree(start.tmp, ignore_errors=True)


def helper_command(binary: str) -> list[str] | None:
    """The command that runs a self-contained helper (code mode's script worker) with nothing but its
    own binary and the system's libraries: no home, no vault, no network, no other process, no
    capability. None where bubblewrap cannot run here (the helper then runs unconfined)."""
    found = support()
    if found.mechanism != "bubblewrap" or found.bwrap is None:
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
