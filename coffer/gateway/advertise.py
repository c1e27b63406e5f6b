"""Which tools a profile advertises (`coffer serve --profile NAME`), for clients without tool search.

Pure: from the visible tools (curation already applied), the profile, how often each tool was called
(the invocation log) and the registry's server order. The built-ins come first; then, with
`max_tools`, the pinned tools, then the most used, then by server order and name, cut at the cap
(built-ins counted). `mode = "search"` advertises the built-ins only. Whenever a profile hides a tool
an agent may call, `coffer__call_tool` is advertised too, so nothing becomes unreachable.

For a team member (coffer.trust.team) the profile is a wall, not a choice of what to show: `reaches`
decides every tools/call (direct, `coffer__call_tool`, a script's), `servers_reached` every prompt and
resource request and `coffer__ask`, `walled` what search ranks; the lists only leave out what those
would refuse, and a refusal reads as a name not found, so a member learns nothing of what lies outside.
A member whose profile the owner removed is refused everything (`WallGone`, fail closed).
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp import MCPError

from coffer.gateway.builtins import CALL
from coffer.vault.catalogue import CatalogueTool
from coffer.vault.registry import Profile


@dataclass
class Advertised:
    names: list[str]  # exposed names of the upstream tools shown, in order
    hides: bool  # some tool an agent may call is not shown (coffer__call_tool is then advertised)


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def matches(profile: Profile, tool: CatalogueTool) -> bool:
    """Whether `profile`'s server and tool filters let `tool` through (pins aside)."""
    return (not profile.servers or tool.server in profile.servers) and (
        not profile.tools or _matches(tool.name, profile.tools) or _matches(tool.tool, profile.tools)
    )


def select(
    profile: Profile,
    tools: Sequence[CatalogueTool],
    builtin_count: int,
    usage: Mapping[tuple[str, str], int],
    server_order: Sequence[str],
) -> Advertised:
    """The upstream tools `profile` shows, deterministic for the same inputs."""
    position = {name: i for i, name in enumerate(server_order)}
    candidates = [t for t in tools if matches(profile, t)]
    pinned = [t.name for p in profile.pinned for t in tools if fnmatch.fnmatchcase(t.name, p)]
    ordered: list[str] = []
    if profile.mode != "search":
        rest = sorted(
            (t for t in candidates if t.name not in pinned),
            key=lambda t: (-usage.get((t.server, t.tool), 0), position.get(t.server, len(position)), t.name),
        )
        ordered = list(dict.fromkeys([*pinned, *(t.name for t in rest)]))
    hides = len(ordered) < len(tools)
    if profile.max_tools is not None:
        room = profile.max_tools - builtin_count
        if hides or len(ordered) > room:
            hides, room = True, room - 1  # coffer__call_tool takes a place
        ordered = ordered[: max(0, room)]
    return Advertised(ordered, hides)


def tools_result(
    builtins: list[dict[str, Any]],
    call_tool: dict[str, Any],
    tools: Sequence[CatalogueTool],
    shown: Advertised | None,
    cap: int | None = None,
) -> list[dict[str, Any]]:
    """The tools/list answer: built-ins, `coffer__call_tool` when something is hidden, the shown tools."""
    if shown is None:
        return [*builtins, *(t.wire for t in tools)]
    visible = {t.name: t for t in tools}
    out = [*builtins, *([call_tool] if shown.hides else [])]
    out += [visible[n].wire for n in shown.names if n in visible]
    return out[:cap] if cap is not None else out


def tokens(tools_list: Sequence[Mapping[str, Any]]) -> int:
    """What advertising these tools costs a client per request (`coffer.results.tokens.tool_tokens`,
    the one definition: `doctor`, `list`, profiles and the console)."""
    from coffer.results.tokens import tool_tokens

    return sum(tool_tokens(tools_list))


__all__ = ["CALL", "Advertised", "select", "tokens", "tools_result"]


def reaches(bound: Profile | None, tool: CatalogueTool) -> bool:
    """Whether a member bounded by `bound` (None: no bound) may find and call `tool`."""
    if bound is None:
        return True
    return matches(bound, tool) or _matches(tool.name, bound.pinned)


def walled(bound: Profile | None, tools: Sequence[CatalogueTool], key: str) -> tuple[list[CatalogueTool], str]:
    """The tools a bounded member reaches, and the catalogue key a ranker over just them is kept under
    (it changes with what they are, so an owner's edit of the profile is a new ranker)."""
    if bound is None:
        return list(tools), key
    reached = [t for t in tools if reaches(bound, t)]
    return reached, f"{key}-{hashlib.sha256(chr(0).join(t.name for t in reached).encode()).hexdigest()[:16]}"


def servers_reached(bound: Profile | None, tools: Iterable[CatalogueTool]) -> set[str] | None:
    """The servers whose prompts, resources and knowledge a bounded member reaches (None: every one):
    those its profile names, else those of the tools it reaches when it names tools."""
    if bound is None or not (bound.servers or bound.tools):
        return None
    if bound.servers:
        return set(bound.servers)
    return {t.server for t in tools if reaches(bound, t)}


class WallGone(MCPError):
    """The profile walling a member in was removed by the vault's owner while in use: every request of
    the member's is refused (fail closed), as a JSON-RPC error that says why. INTERNAL_ERROR: the vault,
    not the request, is what is wrong, and the member cannot mend it."""

    def __init__(self, profile: str) -> None:
        said = (
            f"coffer: the profile '{profile}' that bounds what you reach was removed from the vault by its "
            "owner; nothing is served to you until the owner maps you to a profile that exists ([team.members])"
        )
        super().__init__(code=types.INTERNAL_ERROR, message=said)
