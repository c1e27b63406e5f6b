"""From a registry entry to a vault entry: which package or remote runs, the launch line pinned to the
entry's version, and what the user must answer (required variables, secrets) before it can.

Choice: npm (`npx -y PKG@VERSION`), then PyPI (`uvx PKG==VERSION`), then OCI (`docker run -i --rm
IMAGE:TAG`, only where docker exists), then a streamable-HTTP remote (`--url`, OAuth as `coffer add
--url` finds it). A package that serves HTTP itself, a `sse` remote, nuget and mcpb are not runnable
here and are named as such when nothing else is.

Secrets never reach a command line (any process can read another's `/proc/<pid>/cmdline`): a secret an
entry passes as an argument goes into the environment instead (docker's `-e NAME=VALUE` becomes `-e
NAME` with NAME in the env); one that can go nowhere else refuses the entry.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from typing import Any

from coffer.discovery.entries import DiscoveryError, Entry, as_dict, as_str

_VAR_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.-]*)\}")
_RUNNERS = ("npm", "pypi", "oci")
_NPM_HOSTS = ["registry.npmjs.org"]  # where npx fetches the package, beside a publisher's allow-list
_PYPI_HOSTS = ["pypi.org", "files.pythonhosted.org"]


@dataclass(frozen=True)
class Input:
    """A value the user gives (`--env NAME=VALUE` or a prompt): an env var, an argument, a header."""

    name: str
    description: str = ""
    required: bool = False
    secret: bool = False
    default: str | None = None
    choices: tuple[str, ...] = ()


@dataclass
class Plan:
    """How an entry runs: a command line (word groups, so an unanswered optional `--flag {value}`
    leaves whole) or a URL, its env and headers with `{placeholders}` for the inputs, and the inputs."""

    entry: Entry
    via: str  # npm | pypi | oci | remote
    words: list[list[str]] = field(default_factory=list)
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, Input] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)  # the sandbox's network list, [] for the default
    image_at: int | None = None  # oci: the group before which `-e NAME` forwards each env var

    def missing(self, answers: dict[str, str]) -> list[Input]:
        """Required inputs with neither an answer nor a default."""
        return [i for i in self.inputs.values() if i.required and i.name not in answers and i.default is None]

    def command(self, values: dict[str, str]) -> list[str]:
        """The launch line with `values` in place; a group with an input that has no value is left out."""
        env = self.environment(values)
        out: list[str] = []
        for n, group in enumerate(self.words):
            if n == self.image_at:
                out += [w for name in env for w in ("-e", name)]
            filled = [_fill(w, values) for w in group]
            if all(w is not None for w in filled):
                out += [w for w in filled if w is not None]
        return out

    def environment(self, values: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in ((k, _fill(t, values)) for k, t in self.env.items()) if v is not None}

    def header_values(self, values: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in ((k, _fill(t, values)) for k, t in self.headers.items()) if v is not None}


def _fill(template: str, values: dict[str, str]) -> str | None:
    """`template` with each `{input}` replaced; None when one has no value."""
    missing = False

    def sub(m: re.Match[str]) -> str:
        nonlocal missing
        if m.group(1) not in values:
            missing = True
            return ""
        return values[m.group(1)]

    out = _VAR_RE.sub(sub, template)
    return None if missing else out


def plan(entry: Entry, docker: bool | None = None, via: str | None = None) -> Plan:
    """The first way this entry can run here (or the one `via` names); DiscoveryError says why none can."""
    docker = shutil.which("docker") is not None if docker is None else docker
    why: list[str] = []
    candidates: list[tuple[str, dict[str, Any]]] = [(str(p.get("registryType")), p) for p in entry.packages]
    candidates.sort(key=lambda c: _RUNNERS.index(c[0]) if c[0] in _RUNNERS else len(_RUNNERS))
    candidates += [("remote", r) for r in entry.remotes]
    for kind, spec in candidates:
        if via is not None and kind != via:
            continue
        reason = _unrunnable(kind, spec, docker)
        if reason:
            why.append(reason)
            continue
        return _remote(entry, spec) if kind == "remote" else _package(entry, kind, spec)
    if via is not None and not why:
        raise DiscoveryError(f"{entry.name} has no {via} package or remote (it runs as: {', '.join(entry.kinds)})")
    detail = "; ".join(dict.fromkeys(why)) or "it lists no package or remote"
    raise DiscoveryError(f"{entry.name} has nothing Coffer can run: {detail}")


def _unrunnable(kind: str, spec: dict[str, Any], docker: bool) -> str | None:
    if kind == "remote":
        rtype = spec.get("type")
        return None if rtype in ("streamable-http", "http") else f"a '{rtype}' remote (Coffer speaks streamable HTTP)"
    if kind not in _RUNNERS:
        return f"a {kind or 'untyped'} package (Coffer runs npm, pypi and oci)"
    transport = as_dict(spec.get("transport"))
    if transport.get("type", "stdio") != "stdio":
        return f"a {kind} package that serves {transport.get('type')} itself (Coffer launches stdio servers)"
    if kind == "oci" and not docker:
        return "an OCI image, and docker is not installed"
    return None


def _package(entry: Entry, kind: str, spec: dict[str, Any]) -> Plan:
    out = Plan(entry, via=kind)
    ident = str(spec["identifier"])
    version = str(spec.get("version") or entry.version)
    runtime = _arguments(spec.get("runtimeArguments"), out)
    package = _arguments(spec.get("packageArguments"), out)
    for var in spec.get("environmentVariables") or []:
        if isinstance(var, dict) and isinstance(var.get("name"), str):
            _env_var(var, out)
    if kind == "npm":
        target = f"{ident}@{version}" if version and "@" not in ident.lstrip("@") else ident
        runtime = [g for g in runtime if g not in (["-y"], ["--yes"])]
        out.words = [["npx"], ["-y"], *runtime, [target], *package]
        out.hosts = [*entry.hosts, *_NPM_HOSTS] if entry.hosts else []
    elif kind == "pypi":
        target = f"{ident}=={version}" if version and "=" not in ident else ident
        out.words = [["uvx"], *runtime, [target], *package]
        out.hosts = [*entry.hosts, *_PYPI_HOSTS] if entry.hosts else []
    else:
        image = ident if _has_tag(ident) or not version else f"{ident}:{version}"
        bare = image.rsplit(":", 1)[0] if _has_tag(image) else image
        runtime = _docker_runtime(runtime, {image, bare, ident}, out)
        out.words = [["docker"], ["run"], ["-i"], ["--rm"], *runtime, [image], *package]
        out.image_at = len(out.words) - len(package) - 1
        out.hosts = list(entry.hosts)
    secrets = {"{" + i.name + "}" for i in out.inputs.values() if i.secret}
    leaked = sorted({ref.strip("{}") for group in out.words for w in group for ref in secrets if ref in w})
    if leaked:
        raise DiscoveryError(
            f"{entry.name}: its {kind} package takes the secret {', '.join(leaked)} on its command line, where "
            "every process can read it; Coffer does not run it so"
        )
    return out


def _remote(entry: Entry, spec: dict[str, Any]) -> Plan:
    out = Plan(entry, via="remote", url=str(spec["url"]))
    if _VAR_RE.search(out.url or ""):
        raise DiscoveryError(f"{entry.name}: its URL has variables Coffer cannot fill: {out.url}")
    for header in spec.get("headers") or []:
        if not isinstance(header, dict) or not isinstance(header.get("name"), str):
            continue
        name = header["name"]
        required = bool(header.get("isRequired", header.get("is_required", False)))
        secret = bool(header.get("isSecret", header.get("is_secret", False)))
        value = header.get("value")
        if isinstance(value, str) and _VAR_RE.search(value):
            out.headers[name] = _template(value, header.get("variables"), out, secret, header)
        elif isinstance(value, str):
            out.headers[name] = value
        else:
            key = _input_name(name)
            out.inputs[key] = Input(key, as_str(header.get("description")), required, secret, _default(header))
            out.headers[name] = "{" + key + "}"
    return out


def _arguments(specs: Any, out: Plan) -> list[list[str]]:
    """An entry's runtime or package arguments as word groups, with `{name}` where an input goes."""
    words: list[list[str]] = []
    for arg in specs or []:
        if not isinstance(arg, dict):
            continue
        name, value = arg.get("name"), arg.get("value")
        required = bool(arg.get("isRequired", False))
        if isinstance(value, str):
            value = _template(value, arg.get("variables"), out, bool(arg.get("isSecret")), arg)
        elif required:
            key = _input_name(str(name or arg.get("valueHint") or "value"))
            out.inputs[key] = Input(key, as_str(arg.get("description")), True, bool(arg.get("isSecret")), _default(arg))
            value = "{" + key + "}"
        else:
            continue  # optional and unset: the server's own default applies
        if arg.get("type") == "named" and isinstance(name, str):
            if arg.get("format") == "boolean" and value in ("true", "false"):
                words += [[name]] if value == "true" else []
            else:
                words.append([name, value])
        else:
            words.append([value])
    return words


def _env_var(var: dict[str, Any], out: Plan) -> None:
    name = var["name"]
    value = var.get("value")
    if isinstance(value, str) and value:
        out.env[name] = _template(value, var.get("variables"), out, bool(var.get("isSecret")), var)
        return
    secret, required = bool(var.get("isSecret")), bool(var.get("isRequired"))
    out.inputs[name] = Input(name, as_str(var.get("description")), required, secret, _default(var), _choices(var))
    out.env[name] = "{" + name + "}"


def _template(value: str, variables: Any, out: Plan, secret: bool = False, owner: dict[str, Any] | None = None) -> str:
    """`value` with each `{var}` left as an input placeholder (its spec from `variables`)."""
    specs = variables if isinstance(variables, dict) else {}
    for var in _VAR_RE.findall(value):
        spec = as_dict(specs.get(var))
        description = as_str(spec.get("description")) or as_str((owner or {}).get("description"))
        out.inputs[var] = Input(
            var,
            description,
            bool(spec.get("isRequired", (owner or {}).get("isRequired", False))),
            bool(spec.get("isSecret", secret)),
            _default(spec),
            _choices(spec),
        )
    return value


def _docker_runtime(groups: list[list[str]], image_names: set[str], out: Plan) -> list[list[str]]:
    """An entry's docker runtime arguments without what Coffer's own `docker run -i --rm IMAGE` says;
    `-e NAME=VALUE` moves into the env (a value there is never on a command line), forwarded by name."""
    kept: list[list[str]] = []
    skip = {"run", "-i", "--interactive", "--rm", *image_names}
    for group in groups:
        if len(group) == 1 and group[0] in skip:
            continue
        if len(group) == 2 and group[0] in ("-e", "--env") and "=" in group[1]:
            name, _, value = group[1].partition("=")
            out.env[name] = value
            continue
        kept.append(group)
    return kept


def _has_tag(image: str) -> bool:
    tail = image.rsplit("/", 1)[-1]
    return ":" in tail or "@" in tail


def _input_name(raw: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", raw.strip("-")).strip("_") or "value"


def _default(spec: dict[str, Any]) -> str | None:
    value = spec.get("default")
    return str(value) if value is not None and not isinstance(value, (dict, list)) else None


def _choices(spec: dict[str, Any]) -> tuple[str, ...]:
    choices = spec.get("choices")
    return tuple(str(c) for c in choices) if isinstance(choices, list) else ()
