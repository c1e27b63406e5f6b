"""One server's entry in coffer.toml: its fields, how it is read from its table (every type checked,
unknown keys kept aside for `coffer list` to name) and how it is written back (defaults left out)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coffer.errors import RegistryError, UsageError
from coffer.vault.masking import mask_args, mask_url, mask_value
from coffer.vault.names import NAME_RE, RESERVED_NAMES

ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_TIMEOUT_S = 60.0
SHARE_MODES = ("auto", "shared", "session", "member")  # coffer.gateway.sessions; member: coffer.gateway.pool
SANDBOX_MODES = ("auto", "off")  # or a table: coffer.upstreams.sandbox
SANDBOX_KEYS = ("network", "read", "write", "ports", "secrets")
HOST_RE = re.compile(
    r"^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:\d{1,5})?$"
)
SERVER_KEYS = {
    *("command", "args", "env", "cwd", "url", "headers", "enabled", "disabled_tools", "timeout", "prefix", "oauth"),
    "share",
    "sandbox",
    "max_result_tokens",
    "source",
    "code_mode",
    "exchange",
}
CODE_MODES = ("read", "all")  # or a list of tool names: coffer.codemode.policy
SOURCE_KEYS = ("registry", "name", "version")  # where a server installed by `coffer add NAME` came from
SOURCE_OPTIONAL = ("mended",)  # what Coffer changed in the registry's launch line so that it runs
EXCHANGE_KEYS = ("scope", "audience")  # token exchange (RFC 8693) options: coffer.trust.exchange


@dataclass
class ServerConfig:
    """One upstream server as the registry describes it (values unexpanded)."""

    name: str
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    enabled: bool = True
    disabled_tools: list[str] = field(default_factory=list)
    timeout: float = DEFAULT_TIMEOUT_S
    prefix: str | None = None  # None: the server name; "": tools and prompts exposed bare
    oauth: bool = False  # an HTTP server that authorises with OAuth (tokens in the secret store, `coffer auth`)
    share: str = "auto"  # under the engine: one process for all sessions or one each (coffer.gateway.sessions)
    max_result_tokens: int | None = None  # its results' cap, below [settings] result_max_tokens (bigresults)
    # what a stdio server may read, write and reach: "auto", "off" or {network, read, write} (upstreams.sandbox)
    sandbox: str | dict[str, Any] = "auto"
    # {registry, name, version}: the registry entry it was installed from (coffer.discovery); provenance
    # only, so not part of the approved launch config (the pinned version is in its launch line)
    source: dict[str, str] | None = None
    # which of its tools a coffer__run script may call: "read" (readOnlyHint tools), "all", or the
    # read-only ones plus these tools (coffer.codemode.policy)
    code_mode: str | list[str] = "read"
    # a team gateway's per-member HTTP server reached with a token the team's provider issues for it in
    # exchange for the member's own (RFC 8693, coffer.trust.exchange): None off; else {scope, audience}
    exchange: dict[str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def exposed_prefix(self) -> str:
        """What goes before `__` in this server's exposed tool and prompt names ("" for none)."""
        return self.name if self.prefix is None else self.prefix

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def launch_line(self, masked: bool = True) -> str:
        """The command a user would recognise; never env values, and secret-looking arguments masked."""
        if self.url:
            return mask_url(self.url) if masked else self.url
        import shlex

        return shlex.join([self.command or "", *(mask_args(self.args) if masked else self.args)])

    def to_dict(self, mask: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "transport": self.transport,
            "enabled": self.enabled,
            "timeout": self.timeout,
            "disabled_tools": list(self.disabled_tools),
        }
        if self.prefix is not None:
            out["prefix"] = self.prefix
        if self.oauth:
            out["oauth"] = True
        if self.exchange is not None:
            out["exchange"] = dict(self.exchange)
        if self.share != "auto":
            out["share"] = self.share
        if self.max_result_tokens is not None:
            out["max_result_tokens"] = self.max_result_tokens
        if self.sandbox != "auto":
            out["sandbox"] = self.sandbox
        if self.source is not None:
            out["source"] = dict(self.source)
        if self.code_mode != "read":
            out["code_mode"] = self.code_mode if isinstance(self.code_mode, str) else list(self.code_mode)
        if self.url:
            out["url"] = mask_url(self.url) if mask else self.url
            out["headers"] = {k: mask_value(v) if mask else v for k, v in self.headers.items()}
        else:
            out["command"] = self.command
            out["args"] = mask_args(self.args) if mask else list(self.args)
            out["cwd"] = self.cwd
        out["env"] = {k: mask_value(v) if mask else v for k, v in self.env.items()}
        return out


def server_from(name: str, raw: dict[str, Any], where: str) -> ServerConfig:
    def want(key: str, kind: type | tuple[type, ...], default: Any) -> Any:
        value = raw.get(key, default)
        if value is not default and not isinstance(value, kind):
            raise RegistryError(f"{where}: servers.{name}.{key} has the wrong type")
        return value

    def str_list(key: str) -> list[str]:
        value = want(key, list, [])
        if not all(isinstance(v, str) for v in value):
            raise RegistryError(f"{where}: servers.{name}.{key} must be a list of strings")
        return list(value)

    def str_map(key: str) -> dict[str, str]:
        value = want(key, dict, {})
        if not all(isinstance(v, str) for v in value.values()):
            raise RegistryError(f"{where}: servers.{name}.{key} values must be strings")
        return dict(value)

    command = want("command", str, None)
    url = want("url", str, None)
    if bool(command) == bool(url):
        raise RegistryError(f"{where}: servers.{name} needs exactly one of 'command' or 'url'")
    timeout = want("timeout", (int, float), DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or timeout <= 0:
        raise RegistryError(f"{where}: servers.{name}.timeout must be a positive number of seconds")
    enabled = want("enabled", bool, True)
    prefix = want("prefix", str, None)
    oauth = want("oauth", bool, False)
    if oauth and not url:
        raise RegistryError(f"{where}: servers.{name}.oauth applies only to a 'url' server")
    exchange = exchange_from(raw.get("exchange", False), url, f"{where}: servers.{name}.exchange")
    cap = want("max_result_tokens", int, None)
    if cap is not None and (isinstance(cap, bool) or cap < 1):
        raise RegistryError(f"{where}: servers.{name}.max_result_tokens must be a positive number of tokens")
    share = want("share", str, "auto")
    if share not in SHARE_MODES:
        raise RegistryError(f"{where}: servers.{name}.share must be one of {', '.join(SHARE_MODES)}, not '{share}'")
    if exchange is not None and (share != "member" or oauth):
        raise RegistryError(
            f'{where}: servers.{name}.exchange needs share = "member" (a token is a member\'s) and no oauth'
        )
    sandbox = sandbox_from(raw.get("sandbox", "auto"), f"{where}: servers.{name}.sandbox")
    source = want("source", dict, None)
    if source is not None and (
        not set(SOURCE_KEYS) <= set(source) <= {*SOURCE_KEYS, *SOURCE_OPTIONAL}
        or not all(isinstance(v, str) for v in source.values())
    ):
        raise RegistryError(f"{where}: servers.{name}.source must be a table of {', '.join(SOURCE_KEYS)} (strings)")
    code_mode = raw.get("code_mode", "read")
    if not (code_mode in CODE_MODES or (isinstance(code_mode, list) and all(isinstance(t, str) for t in code_mode))):
        raise RegistryError(f'{where}: servers.{name}.code_mode must be "read", "all" or a list of tool names')
    if prefix is not None and ((prefix and not NAME_RE.match(prefix)) or prefix in RESERVED_NAMES):
        raise RegistryError(f"{where}: servers.{name}.prefix '{prefix}' is invalid (use '' or a name like a server's)")
    return ServerConfig(
        name=name,
        command=command,
        args=str_list("args"),
        env=str_map("env"),
        cwd=want("cwd", str, None),
        url=url,
        headers=str_map("headers"),
        enabled=enabled,
        disabled_tools=str_list("disabled_tools"),
        timeout=float(timeout),
        prefix=prefix,
        oauth=oauth,
        share=share,
        max_result_tokens=cap,
        sandbox=sandbox,
        source=None if source is None else {k: source[k] for k in (*SOURCE_KEYS, *SOURCE_OPTIONAL) if k in source},
        code_mode=code_mode if isinstance(code_mode, str) else list(code_mode),
        exchange=exchange,
        extra={k: v for k, v in raw.items() if k not in SERVER_KEYS},
    )


def server_table(cfg: ServerConfig) -> Any:
    import tomlkit

    table = tomlkit.table()
    if cfg.url:
        table.add("url", cfg.url)
        if cfg.headers:
            table.add("headers", inline(cfg.headers))
    else:
        table.add("command", cfg.command)
        table.add("args", cfg.args)
        if cfg.cwd:
            table.add("cwd", cfg.cwd)
    if cfg.env:
        table.add("env", inline(cfg.env))
    table.add("enabled", cfg.enabled)
    if cfg.disabled_tools:
        table.add("disabled_tools", sorted(cfg.disabled_tools))
    if cfg.timeout != DEFAULT_TIMEOUT_S:
        table.add("timeout", cfg.timeout)
    if cfg.prefix is not None:
        table.add("prefix", cfg.prefix)
    if cfg.oauth:
        table.add("oauth", True)
    if cfg.exchange is not None:
        table.add("exchange", inline(cfg.exchange) if cfg.exchange else True)
    if cfg.share != "auto":
        table.add("share", cfg.share)
    if cfg.max_result_tokens is not None:
        table.add("max_result_tokens", cfg.max_result_tokens)
    if cfg.sandbox == "off":
        table.add("sandbox", "off")
    elif isinstance(cfg.sandbox, dict):
        sandbox = tomlkit.inline_table()
        sandbox.update({k: cfg.sandbox[k] for k in SANDBOX_KEYS if k in cfg.sandbox})
        table.add("sandbox", sandbox)
    if cfg.source is not None:
        table.add("source", inline(cfg.source))
    if cfg.code_mode != "read":
        table.add("code_mode", cfg.code_mode)
    return table


def exchange_from(value: Any, url: str | None, where: str) -> dict[str, str] | None:
    """`exchange = true`, or a table of `scope` (what the exchanged token asks for) and `audience` (the
    upstream's name at the provider, when it is not its URL)."""
    if value is False:
        return None
    if value is not True and not (
        isinstance(value, dict) and set(value) <= set(EXCHANGE_KEYS) and all(isinstance(v, str) for v in value.values())
    ):
        raise RegistryError(f"{where} must be true or a table of {', '.join(EXCHANGE_KEYS)} (strings)")
    if not url:
        raise RegistryError(f"{where} applies only to a 'url' server")
    return {} if value is True else dict(value)


def sandbox_option(
    mode: str | None,
    read: list[str] | None,
    write: list[str] | None,
    hosts: list[str] | None,
    secrets: list[str] | None = None,
) -> str | dict[str, Any]:
    """`coffer add --sandbox auto|off|none --allow-read/--allow-write/--allow-host/--allow-secret` as a
    `sandbox` value (which paths may be granted at all is coffer.manage.servers.check_grants')."""
    from pathlib import Path

    if mode not in (None, "auto", "off", "none"):
        raise UsageError(f"invalid --sandbox '{mode}': expected auto, off or none")
    if mode == "off" and (read or write or hosts or secrets):
        raise UsageError(
            "--sandbox off runs the server unconfined: --allow-read/--allow-write/--allow-host do not apply"
        )
    if mode == "none" and hosts:
        raise UsageError("--sandbox none cuts the network off: it cannot be combined with --allow-host")
    if mode == "off":
        return "off"
    for host in hosts or ():
        if not HOST_RE.match(host):
            raise UsageError(f"invalid --allow-host '{host}': expected a host name (api.github.com, *.github.com)")
    table: dict[str, Any] = {}
    if mode == "none":
        table["network"] = "none"
    local = [h for h in hosts or () if _loopback_port(h) is not None]
    if local and len(local) == len(hosts or ()):  # only the host's own services: direct, by port
        table["ports"] = sorted({_loopback_port(h) for h in local})
    elif hosts:
        table["network"] = list(hosts)
    if read:
        table["read"] = [str(Path(p).expanduser().resolve()) for p in read]
    if write:
        table["write"] = [str(Path(p).expanduser().resolve()) for p in write]
    if secrets:
        table["secrets"] = [str(Path(p).expanduser().resolve()) for p in secrets]
    return sandbox_from(table, "--allow-host") if table else "auto"


def merge_sandbox(
    current: Any,
    mode: str | None,
    read: list[str] | None,
    write: list[str] | None,
    hosts: list[str] | None,
    secrets: list[str] | None = None,
) -> str | dict[str, Any]:
    """`coffer edit --sandbox --allow-*` over a server's current `sandbox` value: a mode replaces it
    (`auto` starts afresh, `none` cuts the network and keeps the grants), grants add to what it has."""
    if mode is None and current == "off" and (read or write or hosts or secrets):
        raise UsageError('it runs unconfined (sandbox = "off"): give --sandbox auto with the grants to confine it')
    added = sandbox_option(None if mode == "none" else mode, read, write, hosts if mode != "none" else None, secrets)
    if mode == "none" and hosts:
        raise UsageError("--sandbox none cuts the network off: it cannot be combined with --allow-host")
    if added == "off" or mode == "auto":
        return added
    base: dict[str, Any] = dict(current) if isinstance(current, dict) else {}
    new: dict[str, Any] = added if isinstance(added, dict) else {}
    for key in ("read", "write", "ports", "secrets"):
        merged = list(dict.fromkeys([*base.get(key, []), *new.get(key, [])]))
        if merged:
            base[key] = merged
    if mode == "none":
        base["network"] = "none"
    elif "network" in new:
        old = base.get("network")
        base["network"] = list(dict.fromkeys([*(old if isinstance(old, list) else []), *new["network"]]))
    return sandbox_from(base, "--allow-host") if base else "auto"


def _loopback_port(host: str) -> int | None:
    """The port of `localhost:5432` (or 127.0.0.1, [::1]), a service on this machine; None for another host."""
    name, _, port = host.rpartition(":")
    if name.lower() in ("localhost", "127.0.0.1", "[::1]") and port.isdigit() and 0 < int(port) < 65536:
        return int(port)
    return None


def sandbox_from(value: Any, where: str) -> str | dict[str, Any]:
    """A server's `sandbox` value checked: "auto", "off", or a table of network, read and write."""
    if isinstance(value, str):
        if value not in SANDBOX_MODES:
            raise RegistryError(f'{where} must be "auto", "off" or a table, not {value!r}')
        return value
    if not isinstance(value, dict):
        raise RegistryError(f'{where} must be "auto", "off" or a table')
    unknown = sorted(set(value) - set(SANDBOX_KEYS))
    if unknown:
        raise RegistryError(
            f"{where} has unknown keys: {', '.join(unknown)} (expected network, read, write, ports, secrets)"
        )
    out: dict[str, Any] = {}
    network = value.get("network", "all")
    if isinstance(network, str):
        if network not in ("all", "none"):
            raise RegistryError(f'{where}.network must be "all", "none" or a list of host names, not {network!r}')
    elif isinstance(network, list) and network and all(isinstance(h, str) and HOST_RE.match(h) for h in network):
        network = [h.lower() for h in network]
    else:
        raise RegistryError(f'{where}.network must be "all", "none" or a list of host names')
    if network != "all":
        out["network"] = network
    ports = value.get("ports", [])
    if not isinstance(ports, list) or not all(isinstance(p, int) and 0 < p < 65536 for p in ports):
        raise RegistryError(f"{where}.ports must be a list of TCP port numbers")
    if ports:
        out["ports"] = sorted(set(ports))
    for key in ("read", "write", "secrets"):
        paths = value.get(key, [])
        if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
            raise RegistryError(f"{where}.{key} must be a list of paths")
        if paths:
            out[key] = list(paths)
    return out


def inline(values: Mapping[str, Any]) -> Any:
    import tomlkit

    table = tomlkit.inline_table()
    table.update(values)
    return table


def validate_maps(cfg: ServerConfig) -> None:
    for key in cfg.env:
        if not ENV_KEY_RE.match(key):
            raise UsageError(f"invalid environment variable name '{key}'")
    for key in cfg.headers:
        if not re.match(r"^[A-Za-z0-9-]+$", key):
            raise UsageError(f"invalid header name '{key}'")
    if not cfg.url and not cfg.command:
        raise UsageError("a server needs a command (after --) or --url")
    if cfg.url and not re.match(r"^https?://", cfg.url):
        raise UsageError(f"invalid url '{cfg.url}': expected http:// or https://")
