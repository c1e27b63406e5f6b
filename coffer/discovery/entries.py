"""One registry entry (a server.json with the registry's `_meta`), read forgivingly: the registry serves
several schema revisions side by side, publishers fill fields loosely, and one odd entry must never cost
the rest of a page. What is not understood is left out, never guessed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from coffer.errors import CofferError

OFFICIAL_META = "io.modelcontextprotocol.registry/official"
PUBLISHER_META = "io.modelcontextprotocol.registry/publisher-provided"
NAME_RE = re.compile(r"^[A-Za-z0-9.-]+/[A-Za-z0-9._-]+$")  # reverse-DNS namespace / server
# words that say nothing about what a server does, dropped from short names ("github-mcp-server" -> github)
_FILLER = ("mcp", "server", "servers", "model", "context", "protocol")
_NAMESPACE_FILLER = {"mcp", "www", "coffer"}  # publishers whose name says nothing of a server


class DiscoveryError(CofferError):
    """A registry is down or answers garbage, or an entry names nothing Coffer can run."""

    exit_code = 8
    code = "discovery"


@dataclass(frozen=True)
class Tool:
    """A tool an entry says its server serves (ToolHive's `tool_definitions`), for ranking only."""

    name: str
    description: str = ""


@dataclass
class Entry:
    """What Coffer reads of one server.json version; `server` keeps the whole object for launching."""

    registry: str
    name: str
    version: str
    title: str = ""
    description: str = ""
    repository: str = ""
    status: str = "active"  # active | deprecated | deleted
    is_latest: bool = True
    updated_at: str = ""  # the registry's, ISO 8601: what `updated_since` compares
    tools: list[Tool] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)  # publisher's network allow-list, as sandbox hosts
    server: dict[str, Any] = field(default_factory=dict)

    @property
    def short(self) -> str:
        return short_name(self.name)

    @property
    def kinds(self) -> list[str]:
        """How it can run: package registry types and remote transports, in the entry's order."""
        out = [str(p.get("registryType", "")) for p in self.packages]
        out += [f"remote:{r.get('type', '')}" for r in self.remotes]
        return [k for k in dict.fromkeys(out) if k]

    @property
    def packages(self) -> list[dict[str, Any]]:
        return [p for p in self.server.get("packages") or [] if isinstance(p, dict) and p.get("identifier")]

    @property
    def remotes(self) -> list[dict[str, Any]]:
        return [r for r in self.server.get("remotes") or [] if isinstance(r, dict) and r.get("url")]

    def text(self) -> str:
        """What the ranker reads beside the name: title, description, and the tools the entry lists."""
        tools = " ".join(f"{t.name} {t.description.split(chr(10))[0]}" for t in self.tools)
        return " ".join(p for p in (self.title, self.description, tools) if p)

    def summary(self, installed: str | None = None) -> dict[str, Any]:
        """The JSON `coffer find --json` prints per entry."""
        return {
            "name": self.name,
            "short": self.short,
            "title": self.title,
            "description": self.description,
            "version": self.version,
            "runs_as": self.kinds,
            "tools": [t.name for t in self.tools],
            "repository": self.repository,
            "registry": self.registry,
            "installed": installed,
        }


def parse_item(item: Any, registry: str) -> Entry:
    """One element of a `servers` list (`{server, _meta}`), or a bare server.json. Raises DiscoveryError
    when it has no usable name or version (the caller skips it)."""
    if not isinstance(item, dict):
        raise DiscoveryError("an entry is not a JSON object")
    server = item.get("server", item)
    if not isinstance(server, dict):
        raise DiscoveryError("an entry's 'server' is not a JSON object")
    name, version = server.get("name"), server.get("version")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise DiscoveryError(f"an entry has no valid name: {str(name)[:60]!r}")
    if not isinstance(version, str) or not version.strip():
        raise DiscoveryError(f"{name}: the entry has no version")
    official = as_dict(as_dict(item.get("_meta")).get(OFFICIAL_META))
    tools, hosts = _publisher_meta(as_dict(as_dict(server.get("_meta")).get(PUBLISHER_META)))
    repo = as_dict(server.get("repository")).get("url")
    return Entry(
        registry=registry,
        name=name,
        version=version.strip(),
        title=as_str(server.get("title")),
        description=as_str(server.get("description")),
        repository=repo if isinstance(repo, str) else "",
        status=as_str(official.get("status") or server.get("status")).lower() or "active",
        is_latest=official.get("isLatest", True) is not False,
        updated_at=as_str(official.get("updatedAt") or official.get("publishedAt")),
        tools=tools,
        hosts=hosts,
        server=server,
    )


def _publisher_meta(meta: dict[str, Any]) -> tuple[list[Tool], list[str]]:
    """Tools and network hosts from any publisher's `_meta` that carries them, at any depth up to 3
    (ToolHive nests them as publisher -> image -> {tool_definitions, tools, permissions})."""
    tools: dict[str, Tool] = {}
    hosts: list[str] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        for item in node.get("tool_definitions") or []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                tools[item["name"]] = Tool(item["name"], as_str(item.get("description")))
        for item in node.get("tools") or []:
            if isinstance(item, str) and item not in tools:
                tools[item] = Tool(item)
        outbound = as_dict(as_dict(as_dict(node.get("permissions")).get("network")).get("outbound"))
        for host in outbound.get("allow_host") or []:
            if isinstance(host, str) and host.strip("."):
                bare = host.strip().lower().lstrip(".")
                hosts.extend([bare, f"*.{bare}"] if host.startswith(".") else [bare])
        if depth < 3:
            for value in node.values():
                if isinstance(value, dict):
                    walk(value, depth + 1)

    walk(meta, 0)
    return list(tools.values()), list(dict.fromkeys(hosts))


def publisher(name: str) -> str:
    """Who publishes under `name`'s namespace, as the registry verified it: the GitHub account of
    `io.github.ACCOUNT/...`, else the domain's own label (`com.figma.mcp/mcp` -> figma)."""
    labels = name.split("/", 1)[0].lower().split(".")
    if labels[:2] in (["io", "github"], ["io", "gitlab"]) and len(labels) > 2:
        return labels[2]
    return labels[1] if len(labels) > 1 else labels[0]


def first_party(name: str) -> bool:
    """Whether the server is its publisher's own product: the namespace's owner is what the server is
    named for (`com.stripe/mcp`, `io.github.grafana/mcp-grafana`), not a third party's server for it
    (`io.github.someone/stripe-mcp`)."""
    owner = re.sub(r"[^a-z0-9]", "", publisher(name))
    words = {re.sub(r"[^a-z0-9]", "", w) for w in re.split(r"[-_.]", short_name(name))}
    server_part = re.sub(r"[^a-z0-9]", "", name.rsplit("/", 1)[-1].lower())
    return bool(owner) and (owner in words or server_part.startswith(owner) or server_part.endswith(owner))


def meant(holders: list[tuple[str, str]]) -> tuple[str, str] | None:
    """Which server a short name means among the (registry, name) pairs that have it: the only one, else
    the only one that is its maker's own (`github` is GitHub's server, not one of its many clones); None
    while it stays ambiguous. `coffer add SHORT` resolves by it and `coffer find` shows a short name only
    where it holds, so what `find` prints is what `add` takes."""
    if len(holders) == 1:
        return holders[0]
    own = [h for h in holders if first_party(h[1])]
    return own[0] if len(own) == 1 else None


def short_name(name: str) -> str:
    """A vault name for a registry name: `io.github.github/github-mcp-server` -> github,
    `io.github.modelcontextprotocol/server-time` -> time, `com.neon/mcp` -> neon."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.rsplit("/", 1)[-1].lower()) if w]
    while words and words[0] in _FILLER:
        words.pop(0)
    while words and words[-1] in _FILLER:
        words.pop()
    if not words:  # the server part said nothing (`com.gitlab/mcp`): its publisher does
        owner = publisher(name)
        words = re.split(r"[^a-z0-9]+", owner if owner not in _NAMESPACE_FILLER else "server")
    short = "-".join(w for w in words if w)[:20].strip("-")
    return short if short and short != "coffer" else "server"


def as_dict(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (server.json fields are filled loosely)."""
    return value if isinstance(value, dict) else {}


def as_str(value: Any) -> str:
    """`value` stripped when it is a string, else ""."""
    return value.strip() if isinstance(value, str) else ""
