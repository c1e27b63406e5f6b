"""The confinement policy of one stdio upstream: deny by default, allow what the server needs.

A policy says what a server may do beyond the base every confined server gets (the system, its
runtime, its own home, a private temporary directory: coffer.upstreams.sandbox): more paths to read
or write, which network, which extra TCP ports. It comes from, in order:

- its entry's `sandbox` table (`coffer add/edit --sandbox none --allow-read/--allow-write/--allow-host`),
  or `sandbox = "off"`;
- `auto`: a fitting profile for a server Coffer knows by its launch line (filesystem, git, ...);
- always, what the launch line names: existing folders and data files read-write, the code it runs by
  path readable with its project, the ports of the local URLs it names.

Registry data only ever narrows it (a publisher's host list); nothing here widens a policy because an
upstream asked. No policy opens the vault's walls (coffer.upstreams.walls): Coffer's own files are never
granted, and a secret place (`SECRETS`) only by name (`secrets`, `--allow-secret`); a grant that holds
either still hides it (bubblewrap) or leaves it out (Landlock).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from coffer.upstreams import runtimes
from coffer.vault.registry import ServerConfig

# Every agent's config, with the tokens of the servers it runs (each client coffer.clients.known reads).
AGENT_CONFIGS = (
    ".claude.json",
    ".claude",
    ".cursor",
    ".codex",
    ".gemini",
    ".config/Claude",
    ".config/Code/User",
    ".codeium",
    ".kiro",
    ".continue",
    ".config/zed",
    ".config/opencode",
    ".config/goose",
)
# Credentials and what holds them, under the user's home: never readable through a launch line's paths
# or a grant that contains them, and a grant of one of them warns (docs/confinement.md).
SECRETS = (
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
    *AGENT_CONFIGS,
    ".bash_history",
    ".zsh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
)
WEB_PORTS = (53, 80, 443)  # the default network: DNS and the web, any host; other ports by grant
RUNNER_HOSTS = {  # what a package runner itself fetches from, added to a host list given by hand
    "npx": ("registry.npmjs.org",),
    "pnpx": ("registry.npmjs.org",),
    "bunx": ("registry.npmjs.org",),
    "uvx": ("pypi.org", "files.pythonhosted.org"),
    "uv": ("pypi.org", "files.pythonhosted.org"),
    "pipx": ("pypi.org", "files.pythonhosted.org"),
}
LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0")
WHY_DEFAULT = "the default: reads only the system and its runtime, writes its own home, web ports only"


@dataclass(frozen=True)
class Policy:
    """What one upstream may do beyond the base. `off`: unconfined (its entry says so). `why`: where
    the policy came from, for `coffer show`."""

    network: str | tuple[str, ...] = "all"  # "all" (the internet's web ports), "none", or only these hosts
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    named: tuple[str, ...] = ()  # writable because the launch line names them; never uncovers a secret place
    code: tuple[str, ...] = ()  # readable: the code the launch line runs by path, with its project
    ports: tuple[int, ...] = ()  # more TCP ports it may connect to, the host's loopback included
    secrets: tuple[str, ...] = ()  # secret places (or paths in them) opened by name: read, and written where granted
    roots_only: bool = False  # the server itself serves only the folders it is named and a session's roots
    off: bool = False
    why: str = WHY_DEFAULT

    def describe(self) -> str:
        """One line, as a person reads it."""
        if self.off:
            return 'off (sandbox = "off"): runs with the user\'s full authority'
        if self.network == "none":
            net = "no network"
        elif self.network == "all":
            net = "web ports (80, 443) on any host"
        else:
            net = "only " + ", ".join(self.network) + " (through Coffer's proxy)"
        if self.ports:
            net += "; also TCP port " + ", ".join(str(p) for p in self.ports) + " (local services included)"
        parts = [net, "writes its own home and temp"]
        writes = list(dict.fromkeys((*self.write, *self.named)))
        if writes:
            parts[-1] += ", " + ", ".join(writes)
        reads = list(dict.fromkeys((*self.read, *self.secrets, *self.code)))
        if reads:
            parts.append("also reads " + ", ".join(reads))
        return "; ".join(parts)


def policy_for(cfg: ServerConfig) -> Policy:
    """The policy in force for `cfg`: its own table, `off`, or (auto) a known server's, else the default;
    with what its launch line names."""
    return replace(_policy_for(cfg), roots_only=works_on_roots(cfg))


def _policy_for(cfg: ServerConfig) -> Policy:
    raw: Any = cfg.sandbox
    if raw == "off":
        return Policy(off=True, why='sandbox = "off" in its entry')
    named, code, ports = _named(cfg)
    if isinstance(raw, dict):
        network = raw.get("network", "all")
        hosts = network if isinstance(network, str) else _with_runner_hosts(cfg, tuple(network))
        return Policy(
            network=hosts,
            read=tuple(expand(p, cfg) for p in raw.get("read", ())),
            write=tuple(expand(p, cfg) for p in raw.get("write", ())),
            named=named,
            code=code,
            ports=runtimes.unique((*ports, *(int(p) for p in raw.get("ports", ())))),
            secrets=tuple(expand(p, cfg) for p in raw.get("secrets", ())),
            why="its own [servers.NAME] sandbox table",
        )
    known = _known(cfg)
    if known is not None:
        return Policy(known.network, known.read, known.write, named, code, ports, known.secrets, why=known.why)
    why = WHY_DEFAULT + (", and the paths its launch line names" if named else "")
    return Policy(named=named, code=code, ports=ports, why=why)


def _with_runner_hosts(cfg: ServerConfig, hosts: tuple[str, ...]) -> tuple[str, ...]:
    """A host list for a server started by npx or uvx: its runner's own registry hosts too."""
    runner = os.path.basename(cfg.command or "")
    return runtimes.unique((*hosts, *RUNNER_HOSTS.get(runner, ())))


def expand(path: str, cfg: ServerConfig) -> str:
    """A granted path as the sandbox binds it: `~` expanded, relative paths from the server's cwd."""
    expanded = os.path.expanduser(path)
    if not os.path.isabs(expanded):
        expanded = os.path.join(cfg.cwd or os.getcwd(), expanded)
    return os.path.normpath(expanded)


_CODE = (".py", ".js", ".mjs", ".cjs", ".ts", ".sh", ".jar", ".exe")


def _named(cfg: ServerConfig) -> tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]]:
    """What its launch line names: (read-write, code, ports). Read-write: existing directories and data
    files among its arguments (`PATH`, `--opt=PATH`) and path-valued env entries, the directory a named
    file is to be created in (not the home directory, nor one just under /), and its explicit cwd. Code:
    a script it runs (readable with its project; never writable: a server must not rewrite its own code).
    Ports: those of the local URLs it names (`--db postgres://localhost:5432/x`)."""
    found = [cfg.cwd] if cfg.cwd else []
    code: list[str] = []
    ports: list[int] = []
    values = [a.split("=", 1)[1] if a.startswith("-") and "=" in a else a for a in cfg.args]
    script = shell_script(cfg)
    if script is not None:  # `bash -c "cd /proj && uv run server.py"`: the paths and programs it names
        words, programs, folder = _shell_words(script)
        values += [os.path.join(folder, w) if folder and not w.startswith(("/", "~", "-")) else w for w in words]
        found += [expand(folder, cfg)] if folder and os.path.isdir(expand(folder, cfg)) else []
        path_env = cfg.env.get("PATH") or os.environ.get("PATH")
        for program in programs:
            where = program if os.sep in program else shutil.which(program, path=path_env)
            if where:
                code += runtimes.program_dirs(expand(where, cfg), path_env)
    literal = [v for v in cfg.env.values() if "${" not in v]
    for value in [*values, *literal]:
        port = _local_port(value)
        if port is not None:
            ports.append(port)
    values += [v for v in literal if v.startswith(("/", "~"))]
    for value in values:
        if not value or value.startswith("-") or (os.sep not in value and not value.startswith((".", "~"))):
            continue
        path = expand(value, cfg)
        is_code = os.path.isfile(path) and (path.endswith(_CODE) or os.access(path, os.X_OK))
        if is_code:
            code.append(runtimes.project_of(path))
        elif os.path.isfile(path) or os.path.isdir(path):
            found.append(path)
        elif not os.path.exists(path) and _creatable_in(os.path.dirname(path)):
            found.append(os.path.dirname(path))
    return runtimes.unique(found), runtimes.unique(code), runtimes.unique(ports)


_SHELLS = ("sh", "bash", "zsh", "dash", "ksh")


def shell_script(cfg: ServerConfig) -> str | None:
    """The script of a `sh -c SCRIPT` / `bash -lc SCRIPT` launch line, or None."""
    if os.path.basename(cfg.command or "") not in _SHELLS:
        return None
    for i, arg in enumerate(cfg.args[:-1]):
        if re.fullmatch(r"-[a-z]*c[a-z]*", arg):
            return cfg.args[i + 1]
    return None


def _shell_words(script: str) -> tuple[list[str], list[str], str | None]:
    """A shell script's words as a launch line's arguments, the programs it runs, and the folder its first
    `cd` goes to (where its relative paths are). A script shlex cannot read gives nothing."""
    try:
        lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return [], [], None
    words: list[str] = []
    programs: list[str] = []
    folder: str | None = None
    command: str | None = None
    for token in tokens:
        if all(c in "();&|<>" for c in token):
            command = None
            continue
        if command is None:
            if re.fullmatch(r"[A-Za-z_]\w*=.*", token):  # VAR=value before the command
                words.append(token.split("=", 1)[1])
                continue
            command = token
            if token not in ("cd", "exec", "env", "export"):
                programs.append(token)
            continue
        if command == "cd" and folder is None:
            folder = token
            continue
        words.append(token)
    return words, programs, folder


def _local_port(value: str) -> int | None:
    """The port of a URL that names this host (`http://localhost:8000`, `postgres://127.0.0.1:5432/db`)."""
    if "://" not in value:
        return None
    try:
        parts = urlsplit(value.strip())
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        return None
    if host not in {h.strip("[]") for h in LOOPBACK}:
        return None
    return port or {"http": 80, "https": 443}.get(parts.scheme)


def _creatable_in(folder: str) -> bool:
    """A folder a named file may be created in: it exists, and it is not the home directory, one of its
    ancestors, or a directory right under / (granting those would open the user's dotfiles or /tmp)."""
    if not os.path.isdir(folder):
        return False
    real = os.path.realpath(folder)
    return real.count(os.sep) >= 2 and not runtimes.within(runtimes.home(), real)


# Servers whose launch line says what they need (`auto`): the package or program, or a path inside it.
_FILESYSTEM = re.compile(r"(^|[/@])(server-filesystem|mcp-server-filesystem)(@[\w.^~-]+)?($|/)")
_GIT = re.compile(r"(^|/)mcp-server-git(==[\w.]+)?$")
_OFFLINE = re.compile(
    r"(^|[/@])(mcp-server-time|server-memory|mcp-server-sequential-thinking|server-sequential-thinking)(@[\w.^~-]+)?($|/)"
)
_KUBERNETES = re.compile(r"(^|[/@])(mcp-server-kubernetes)(@[\w.^~-]+)?($|/)")
_RUNNERS = {"npx", "uvx", "pipx", "bunx", "pnpx", "pnpm", "yarn", "dlx", "uv"}
ROOTS_SERVERS = (_FILESYSTEM,)  # servers that work on the client's declared roots


def works_on_roots(cfg: ServerConfig) -> bool:
    """A server that moves to the roots a session declares (server-filesystem): those are granted too."""
    words = [os.path.basename(cfg.command or ""), *cfg.args]
    return cfg.sandbox != "off" and any(p.search(w) for p in ROOTS_SERVERS for w in words)


def _known(cfg: ServerConfig) -> Policy | None:
    """A fitting policy for servers Coffer knows by their launch line (docs/confinement.md)."""
    words = [os.path.basename(cfg.command or ""), *cfg.args]
    runner = any(os.path.basename(w) in _RUNNERS for w in words[:2])
    home = os.path.expanduser("~")
    if any(_FILESYSTEM.search(w) for w in words):
        return Policy(why="auto: the filesystem server, its root arguments and the session's roots read-write")
    if any(_GIT.search(w) for w in words):
        repo = _option(cfg.args, ("--repository", "-r"))
        write = (expand(repo, cfg),) if repo else ()
        network = "all" if runner else "none"
        return Policy(network=network, write=write, why="auto: the git server, its repository read-write")
    if any(_KUBERNETES.search(w) for w in words):
        kube = os.path.join(home, ".kube")  # a secret place: opened by the profile, as --allow-secret would
        return Policy(read=(kube,), secrets=(kube,), why="auto: a Kubernetes client, reads ~/.kube")
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
