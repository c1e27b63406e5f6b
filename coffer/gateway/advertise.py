"""Which tools a profile advertises (`coffer serve --profile NAME`), for clients without tool search.

Pure: from the visible tools (curation already applied), the profile, how often each tool was called
(the invocation log) and the registry's server order. The built-ins come first; then, with
`max_tools`, the pinned tools, then the most used, then by server order and name, cut at the cap
(built-ins counted). `mode = "search"` advertises the built-ins only. Whenever a profile hides a tool
an agent may call, `coffer__call_tool` is advertised too, so nothing becomes unreachable.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
    """What advertising these tools costs a client per request: the tokens of each tool as tools/list
    sends it (compact JSON, every field), counted with the tokenizer of the result cap
    (coffer.results.tokens). The one definition: `doctor`, `list`, `show`, profiles and the console."""
    return sum(tokens_each(tools_list))


def tokens_each(tools_list: Sequence[Mapping[str, Any]]) -> list[int]:
    """`tokens` per tool. Counts are kept by a hash of the tool's JSON (no text) in the cache dir, so
    `coffer list` and the console load the tokenizer only for tools they have not counted before."""
    import hashlib

    texts = [json.dumps(t, separators=(",", ":"), ensure_ascii=False) for t in tools_list]
    keys = [hashlib.sha256(text.encode()).hexdigest()[:20] for text in texts]
    known = _counted()
    missing = [i for i, key in enumerate(keys) if key not in known]
    if missing:
        from coffer.results.tokens import count

        for i in missing:
            known[keys[i]] = count(texts[i])
        _save_counted(known)
    return [known[key] for key in keys]


_COUNTED: dict[str, int] = {}
COUNTED_MAX = 20_000  # counts kept on disk (a vault's tools, several versions of each)


def _counted_path() -> Any:
    from coffer.vault import paths

    return paths.cache_dir() / "tokens.json"


def _counted() -> dict[str, int]:
    if not _COUNTED:
        with contextlib.suppress(OSError, ValueError, TypeError):
            data = json.loads(_counted_path().read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("version") == 1 and isinstance(data.get("counts"), dict):
                _COUNTED.update({k: int(v) for k, v in data["counts"].items() if isinstance(v, int)})
    return _COUNTED


def _save_counted(known: dict[str, int]) -> None:
    """Best effort: a cache."""
    from coffer.vault.fsutil import atomic_write

    keep = dict(list(known.items())[-COUNTED_MAX:])
    with contextlib.suppress(OSError):
        atomic_write(_counted_path(), json.dumps({"version": 1, "counts": keep}))


__all__ = ["CALL", "Advertised", "select", "tokens", "tokens_each", "tools_result"]
