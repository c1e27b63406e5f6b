"""What a team member reaches through `coffer serve --http --team` (coffer.trust.team maps the member's
claims to a profile): the profile is a wall there, where for one user it only chooses what is shown.

Each request runs with its member current (`speaking`, the first middleware), so every handler and the
tasks and threads it starts know whom they serve without being told. The wall is checked where things
are found, not where they are shown: `reaches` on every tools/call (direct, `coffer__call_tool`, a
script's), `servers_reached` on every prompt and resource request and on `coffer__ask`; the lists and
search only leave out what those would refuse. Refusals read as a name not found: a member learns
nothing of what lies outside its profile.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from coffer.gateway.advertise import matches
from coffer.gateway.sdk import http_speaker
from coffer.trust.team import speaking as _speaking
from coffer.vault.catalogue import CatalogueTool
from coffer.vault.profiles import Profile


async def speaking(ctx: Any, call_next: Any) -> Any:
    """Middleware: the request's team member (if any) is current while it is handled."""
    member = http_speaker(ctx)
    if member is None:
        return await call_next(ctx)
    with _speaking(member):
        return await call_next(ctx)


def reaches(bound: Profile | None, tool: CatalogueTool) -> bool:
    """Whether a member bounded by `bound` (None: no bound) may find and call `tool`."""
    if bound is None:
        return True
    return matches(bound, tool) or any(fnmatch.fnmatchcase(tool.name, p) for p in bound.pinned)


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
