"""The console's JSON API: each route is one use case of coffer.manage (or the log's read queries),
called the way the CLI calls it, so what the page shows is what `coffer list/show/log stats/profile`
print and what it changes is what `coffer enable/disable/approve` would write."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from coffer.errors import CofferError, NotFoundError, UsageError
from coffer.log import query as log
from coffer.log import series
from coffer.log.calls import open_log
from coffer.vault import registry

VERSION = 1
STATUS = {"usage": 400, "not_found": 404, "conflict": 409, "registry": 409, "discovery": 422}
WINDOWS = {"1h": 3600, "24h": 86_400, "7d": 7 * 86_400, "30d": 30 * 86_400, "90d": 90 * 86_400}


def _json(data: dict[str, Any], status: int = 200) -> JSONResponse:
    return JSONResponse({"version": VERSION, **data}, status_code=status)


def _endpoint(work: Callable[..., dict[str, Any]], writes: bool = False) -> Callable[[Request], Any]:
    """Run `work(params, body)` off the event loop (files and SQLite block); a CofferError becomes its
    one-line message with a 4xx status, as the CLI turns it into one line and an exit code."""

    async def handle(request: Request) -> JSONResponse:
        body: dict[str, Any] = {}
        if writes:
            try:
                parsed = await request.json()
            except ValueError:
                return _json({"error": "the body is not JSON"}, 400)
            if not isinstance(parsed, dict):
                return _json({"error": "the body must be a JSON object"}, 400)
            body = parsed
        params = dict(request.path_params) | dict(request.query_params)
        try:
            return _json(await run_in_threadpool(work, params, body))
        except CofferError as exc:
            return _json({"error": str(exc), "code": exc.code}, STATUS.get(exc.code, 500))

    return handle


def overview(_params: dict[str, str], _body: dict[str, Any]) -> dict[str, Any]:
    """The vault's place and its engine (None when none runs)."""
    from coffer.engine import control
    from coffer.vault import paths

    return {"registry": _tilde(paths.registry_path()), "engine": control.status(), "now": time.time()}


def _tilde(path: Path) -> str:
    """A path under the user's home as `~/...`, as a person writes it (and as a screenshot may show it)."""
    with contextlib.suppress(ValueError, RuntimeError):
        return "~/" + str(path.relative_to(Path.home()))
    return str(path)


def servers(_params: dict[str, str], _body: dict[str, Any]) -> dict[str, Any]:
    """`coffer list --json`'s rows (one state per server, the engine's view of its process in it), each
    with what the running engine says of its processes and what its sandbox lets it read, write and
    reach (coffer.upstreams.explain, as `coffer show` says it)."""
    from coffer.manage.states import engine_status, server_rows
    from coffer.manage.tools import code_mode_on
    from coffer.upstreams import explain

    reg = registry.load()
    engine = engine_status()  # asked once: the states and the processes are of the same moment
    rows = server_rows(reg, engine)
    for row in rows:
        cfg = reg.servers.get(row["name"])
        row["sandbox"] = explain.lines(cfg) if cfg is not None and not cfg.url else []
    live: dict[str, list[dict[str, Any]]] = {}
    for up in (engine or {}).get("upstreams", []):
        live.setdefault(up["name"], []).append(up)
    for row in rows:
        row["processes"] = live.get(row["name"], [])
    return {"servers": rows, "engine": engine, "code_mode": code_mode_on()}


def set_code_mode(_params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """coffer__run on or off for every client (profiles that say otherwise keep their own)."""
    from coffer.manage.tools import set_code_mode as write

    on = body.get("on")
    if not isinstance(on, bool):
        raise UsageError('give {"on": true} or {"on": false}')
    return {"code_mode": on, "changed": write(on)}


def review(params: dict[str, str], _body: dict[str, Any]) -> dict[str, Any]:
    from coffer.manage.review import review as review_server

    return review_server(params["name"])


def approve(params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    from coffer.manage.review import approve as approve_target

    tool = body.get("tool")
    target = params["name"] if not tool else f"{params['name']}{registry.SEP}{tool}"
    return {"approved": approve_target(target)}


def set_server(params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    return _toggle(params["name"], body)


def set_tool(params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    return _toggle(f"{params['name']}{registry.SEP}{params['tool']}", body)


def _toggle(target: str, body: dict[str, Any]) -> dict[str, Any]:
    from coffer.manage.tools import toggle

    enabled = body.get("enabled")
    if not isinstance(enabled, bool):
        raise UsageError('give {"enabled": true} or {"enabled": false}')
    done = toggle(target, enabled)
    return {"target": target, "enabled": enabled, "changed": done.changed}


def tools(_params: dict[str, str], _body: dict[str, Any]) -> dict[str, Any]:
    """Every catalogued tool, and the `coffer__*` built-ins advertised beside them (counted as the
    Profiles page counts them: what a client without a profile is sent)."""
    from coffer.codemode import policy
    from coffer.gateway.builtins import tool_definitions
    from coffer.manage.tools import tool_rows
    from coffer.results.tokens import tool_tokens

    reg = registry.load()
    defs = tool_definitions(policy.enabled(reg.settings))
    return {"tools": tool_rows(reg), "builtins": {"count": len(defs), "tokens": sum(tool_tokens(defs))}}


def search(params: dict[str, str], _body: dict[str, Any]) -> dict[str, Any]:
    """`coffer search`, with each hit's score parts (lexical, semantic, name fit, implied), and what it
    says of what the vault lacks: `lacking`, `closest` and `registry` where the query asks for a service
    no tool here serves (then no tools), `unknown` and `registry` beside the tools for words no tool
    knows that registry servers do (the registry cache only)."""
    from coffer.manage.search import search_or_lacking

    query = params.get("q", "")
    try:
        k = int(params.get("k", "10"))
    except ValueError:
        raise UsageError(f"k must be a whole number, got {params.get('k')!r}") from None
    result, lacking = search_or_lacking(query, min(k, 50), explain=True)
    hits = [
        {"name": d.id, "description": d.text, "score": s, "parts": parts}
        for (d, s), parts in zip(result.hits, result.parts or [{} for _ in result.hits], strict=True)
    ]
    out = {
        "query": query,
        "ranker": result.ranker,
        "total_searched": result.total,
        "note": result.note,
        "tools": hits,
        "hidden": result.hidden,  # matches the user has not let agents see, counted (coffer search says the same)
    }
    if lacking:  # what coffer search says of what the vault lacks (no tools at all where it abstains)
        out |= lacking.fields(hits)
    return out


def find(params: dict[str, str], _body: dict[str, Any]) -> dict[str, Any]:
    """`coffer find`: servers in the vault's registries for a query, installed ones marked."""
    from coffer.manage import discover

    found = discover.find(params.get("q", ""), None, _int(params, "k", 10, 50))
    return {"servers": found.hits, "searched": found.searched, "registries": found.registries, "notes": found.notes}


def install_plan(params: dict[str, str], _body: dict[str, Any]) -> dict[str, Any]:
    """`coffer add NAME --dry-run`: what an install would run and which inputs it asks for."""
    from coffer.manage import discover

    entry = discover.resolve(params.get("name", ""), params.get("registry") or None)
    return {"plan": discover.prepare(entry, {}, params.get("as") or None, dry_run=True).describe()}


def install(_params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """`coffer add NAME` from a registry, the inputs answered in the body (`env`), as `--env` answers them."""
    from coffer.manage import discover

    env = body.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise UsageError("env must be an object of input names to strings")
    entry = discover.resolve(str(body.get("name", "")), body.get("registry") or None)
    answers = {k: v for k, v in env.items() if v != ""}
    prepared = discover.prepare(entry, answers, body.get("as") or None)
    added = discover.install(prepared, probe=body.get("probe", True) is not False)
    return {"added": added.cfg.name, "launch": added.cfg.launch_line(), "counts": added.counts}


def _int(params: dict[str, str], key: str, default: int, most: int) -> int:
    try:
        return min(int(params.get(key, str(default))), most)
    except ValueError:
        raise UsageError(f"{key} must be a whole number, got {params.get(key)!r}") from None


def usage(params: dict[str, str], _body: dict[str, Any]) -> dict[str, Any]:
    """The log page: calls over time, per server and per tool (the figures of `coffer log stats`), and
    the listed tools never called, over a window (1h, 24h, 7d, 30d, 90d); `member`: one team member's."""
    from coffer.manage.usage import usage as tool_usage

    window = params.get("window", "7d")
    if window not in WINDOWS:
        raise UsageError(f"unknown window '{window}': expected one of {', '.join(WINDOWS)}")
    now = time.time()
    member = params.get("member") or None
    filters = log.Filters(since=now - WINDOWS[window], member=member)
    db = open_log()
    try:
        found = tool_usage(filters, db)
        return {
            "window": window,
            "member": member,
            "members": log.members(db, now - WINDOWS[window]),  # a team gateway's: the filter offers them
            "timeline": series.timeline(db, filters, now),
            "servers": series.by_server(db, filters),
            "tools": found["stats"],
            "never_called": found["never_called"],
        }
    finally:
        db.conn.close()


def profiles(_params: dict[str, str], _body: dict[str, Any]) -> dict[str, Any]:
    """What each profile (and no profile) advertises and costs, and which clients run it."""
    from coffer.manage.profiles import clients_by_profile, previews

    reg = registry.load()
    clients = clients_by_profile()
    rows = previews([None, *reg.profiles], reg)
    for row in rows:
        row["clients"] = clients.get(row["name"] or "", [])
    return {"profiles": rows}


def prune(params: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """`coffer profile prune NAME --unused-for Nd`: the profile without the tools no call used lately."""
    from coffer.manage import usage as tool_usage

    days = body.get("unused_for_days")
    if isinstance(days, bool) or not isinstance(days, int | float) or days <= 0:
        raise UsageError('give {"unused_for_days": N} with N > 0')
    done = tool_usage.prune(params["name"], float(days) * 86_400)
    return {"profile": done.profile.to_dict(), "kept": done.kept, "left_out": done.left_out, "created": done.created}


def undo_prune(params: dict[str, str], _body: dict[str, Any]) -> dict[str, Any]:
    """`coffer profile prune NAME --undo`."""
    from coffer.manage import usage as tool_usage

    restored = tool_usage.undo(params["name"])
    return {"restored": restored.to_dict() if restored else None}


def missing(_params: dict[str, str], _body: dict[str, Any]) -> dict[str, Any]:
    raise NotFoundError("no such console route")


ROUTES = [
    Route("/api/overview", _endpoint(overview)),
    Route("/api/servers", _endpoint(servers)),
    Route("/api/servers/{name}/review", _endpoint(review)),
    Route("/api/servers/{name}/approve", _endpoint(approve, writes=True), methods=["POST"]),
    Route("/api/servers/{name}/enabled", _endpoint(set_server, writes=True), methods=["POST"]),
    Route("/api/code-mode", _endpoint(set_code_mode, writes=True), methods=["POST"]),
    Route("/api/find", _endpoint(find)),
    Route("/api/find/plan", _endpoint(install_plan)),
    Route("/api/servers/add", _endpoint(install, writes=True), methods=["POST"]),
    Route("/api/tools", _endpoint(tools)),
    Route("/api/tools/{name}/{tool}/enabled", _endpoint(set_tool, writes=True), methods=["POST"]),
    Route("/api/search", _endpoint(search)),
    Route("/api/usage", _endpoint(usage)),
    Route("/api/profiles", _endpoint(profiles)),
    Route("/api/profiles/{name}/prune", _endpoint(prune, writes=True), methods=["POST"]),
    Route("/api/profiles/{name}/undo", _endpoint(undo_prune, writes=True), methods=["POST"]),
    Route("/api/{rest:path}", _endpoint(missing), methods=["GET", "POST"]),
]
