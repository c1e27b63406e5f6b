"""Tasks (SEP-1686, spec 2025-11-25) through the gateway, and the bridge for hosts that do not use them.

A host's task-augmented `tools/call` is passed on with its `task`; the upstream answers with a task,
which the host gets under an id that names the owning server (`<server>/<upstream id>`: server names
never hold a "/"), so `tasks/get`, `tasks/result` and `tasks/cancel` route to it and `tasks/list`
merges every server's tasks of that host. The upstream's `notifications/tasks/status` reach the host
that created the task. Each task is one invocation-log row, written when it ends, with its real
duration; a watcher polls every task the host has not seen end, so the row is written even when the
host never asks again. A task whose host has gone (its status cannot be delivered, or the gateway
stops) is cancelled upstream.

The SDK refuses a task result from a `tools/call` handler (its surface sieve), so task-augmented calls
are answered from the server's middleware (the public seam, `Server.middleware`), which owns its
result; the task methods are request handlers of their own (`Server.add_request_handler`).

The bridge: a host that does not send `task` may still call a tool whose `execution.taskSupport` is
"required". The router runs it as a task upstream (`run_as_task`): status messages become progress
notifications when the host asked for progress, and the result comes back as a plain `tools/call`
answer, within the server's timeout (past it the task is cancelled upstream).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from coffer.gateway import paging, sessions
from coffer.gateway.sdk import host_client
from coffer.gateway.sdk import host_connection as _connection
from coffer.upstreams.upstream import UpstreamUnavailable

log = logging.getLogger("coffer.tasks")
TERMINAL = frozenset({"completed", "failed", "cancelled"})
SEP = "/"
RELATED_TASK = "io.modelcontextprotocol/related-task"
POLL_MIN_S, POLL_MAX_S = 0.2, 5.0
Logger = Callable[["TaskEntry", str, str | None], None]


@dataclass(eq=False)
class TaskEntry:
    """One task a host created through the gateway."""

    host_id: str
    server: str
    upstream_id: str
    tool: str
    session: Any  # the host session that created it (status notifications go there)
    client: tuple[str | None, str | None]  # the host's name and version, for the log row
    started: float = field(default_factory=time.time)
    t0: float = field(default_factory=time.perf_counter)
    status: str = "working"
    ttl_ms: int | None = None
    poll_ms: int | None = None
    logged: bool = False
    ended: anyio.Event = field(default_factory=anyio.Event)
    owner: object = None  # the engine's host session that made it (`sessions.current()`), None in-process


def host_id(server: str, upstream_id: str) -> str:
    return f"{server}{SEP}{upstream_id}"


def task_required(tool: Any) -> bool:
    """A tool definition (wire dict) whose `execution.taskSupport` is "required"."""
    execution = tool.get("execution") if isinstance(tool, dict) else None
    return isinstance(execution, dict) and execution.get("taskSupport") == "required"


def supports_tasks(caps: dict[str, Any]) -> bool:
    """An upstream that declared task-augmented tools/call."""
    tasks = caps.get("tasks")
    return isinstance(tasks, dict) and isinstance(((tasks.get("requests") or {}).get("tools") or {}).get("call"), dict)


def merged_capability(all_caps: list[dict[str, Any]]) -> types.ServerTasksCapability | None:
    """What the gateway declares under `tasks`: each part some enabled upstream declared."""
    declared = [c["tasks"] for c in all_caps if isinstance(c.get("tasks"), dict)]
    if not declared:
        return None
    out: dict[str, Any] = {}
    if any(isinstance(t.get("list"), dict) for t in declared):
        out["list"] = {}
    if any(isinstance(t.get("cancel"), dict) for t in declared):
        out["cancel"] = {}
    if any(supports_tasks({"tasks": t}) for t in declared):
        out["requests"] = {"tools": {"call": {}}}
    return types.ServerTasksCapability.model_validate(out)


class TaskRelay:
    """The gateway's tasks: ids, routing, status relay, watchers, the log row, cancellation at the end."""

    def __init__(
        self,
        upstream: Callable[[str], Any],
        spawn: Callable[..., None],
        record: Logger,
    ) -> None:
        self._upstream = upstream  # server name -> its Upstream (or None)
        self._spawn = spawn
        self._record = record
        self.tasks: dict[str, TaskEntry] = {}

    # ------------------------------------------------------------------ created

    def adopt(self, ctx: Any, server: str, tool: str, result: dict[str, Any]) -> dict[str, Any]:
        """An upstream answered a task-augmented call with a task: the host gets it under its own id."""
        task = result.get("task")
        if not isinstance(task, dict) or not isinstance(task.get("taskId"), str):
            return result  # a plain result: the server ran it at once
        entry = TaskEntry(
            host_id=host_id(server, task["taskId"]),
            server=server,
            upstream_id=task["taskId"],
            tool=tool,
            session=ctx.session,
            client=host_client(ctx.session),
            ttl_ms=task.get("ttl") if isinstance(task.get("ttl"), int) else None,
            poll_ms=task.get("pollInterval") if isinstance(task.get("pollInterval"), int) else None,
            owner=sessions.current(),
        )
        self.tasks[entry.host_id] = entry
        self._note(entry, task)
        if not entry.ended.is_set():
            self._spawn(self._watch, entry)
        return {**result, "task": {**task, "taskId": entry.host_id}}

    def _note(self, entry: TaskEntry, task: dict[str, Any]) -> None:
        """A status seen (a notification, tasks/get, tasks/list): a task that ended is logged once."""
        status = task.get("status")
        if isinstance(status, str):
            entry.status = status
        if entry.status in TERMINAL and not entry.logged:
            entry.logged = True
            entry.ended.set()
            outcome = {"completed": "ok", "failed": "error", "cancelled": "cancelled"}[entry.status]
            self._record(entry, outcome, None if outcome == "ok" else f"task_{entry.status}")

    async def _watch(self, entry: TaskEntry) -> None:
        """Poll the upstream until the task ends, so its log row is written whatever the host does."""
        while True:
            wait = (entry.poll_ms or 1000) / 1000
            with anyio.move_on_after(min(max(wait, POLL_MIN_S), POLL_MAX_S)):
                await entry.ended.wait()
            if entry.ended.is_set():
                return
            try:
                self._note(entry, await self._send(entry, types.GetTaskRequest(params=_get(entry.upstream_id))))
            except (MCPError, UpstreamUnavailable, anyio.BrokenResourceError, anyio.ClosedResourceError):
                entry.status = "failed"  # the server lost it (restarted, or the task expired)
                self._note(entry, {})

    # ------------------------------------------------------------------ host requests

    def _entry(self, ctx: Any, task_id: str) -> TaskEntry:
        entry = self.tasks.get(task_id)
        if entry is None or _connection(entry.session) is not _connection(ctx.session):
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown task {task_id!r}")
        return entry

    async def _send(self, entry: TaskEntry, request: Any, timeout: float | None = None) -> dict[str, Any]:
        up = self._upstream(entry.server)
        if up is None:
            raise MCPError(
                code=types.INVALID_PARAMS, message=f"task {entry.host_id}: server '{entry.server}' is not running"
            )
        result: dict[str, Any] = await up.request(request, timeout=timeout)
        return result

    def _as_host(self, entry: TaskEntry, result: dict[str, Any]) -> dict[str, Any]:
        out = {**result, "taskId": entry.host_id} if "taskId" in result else dict(result)
        meta = out.get("_meta")
        if isinstance(meta, dict) and isinstance(meta.get(RELATED_TASK), dict):
            out["_meta"] = {**meta, RELATED_TASK: {**meta[RELATED_TASK], "taskId": entry.host_id}}
        return out

    async def get_task(self, ctx: Any, params: types.GetTaskRequestParams) -> dict[str, Any]:
        entry = self._entry(ctx, params.task_id)
        result = await self._send(entry, types.GetTaskRequest(params=_get(entry.upstream_id)))
        self._note(entry, result)
        return self._as_host(entry, result)

    async def task_result(self, ctx: Any, params: types.GetTaskPayloadRequestParams, relay: Any) -> dict[str, Any]:
        """The task's result, once it has one; what the upstream asks the host meanwhile (input_required)
        goes to this host, as during a call."""
        entry = self._entry(ctx, params.task_id)
        up = self._upstream(entry.server)
        wait = max((entry.ttl_ms or 0) / 1000, up.cfg.timeout if up is not None else 60.0)
        request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=entry.upstream_id))
        async with relay.origin(entry.server, ctx, upstream=up):
            result = await self._send(entry, request, timeout=wait)
        if not entry.logged:
            self._note(entry, {"status": "failed" if result.get("isError") else "completed"})
        return self._as_host(entry, result)

    async def cancel_task(self, ctx: Any, params: types.CancelTaskRequestParams) -> dict[str, Any]:
        entry = self._entry(ctx, params.task_id)
        result = await self._send(
            entry, types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=entry.upstream_id))
        )
        self._note(entry, result if result.get("status") else {"status": "cancelled"})
        return self._as_host(entry, result)

    async def list_tasks(self, ctx: Any, params: types.PaginatedRequestParams | None, page_size: int) -> dict[str, Any]:
        """This host's tasks on every server it has tasks on, as each server lists them now."""
        mine = [e for e in self.tasks.values() if _connection(e.session) is _connection(ctx.session)]
        found: list[dict[str, Any]] = []
        for server in dict.fromkeys(e.server for e in mine):
            by_id = {e.upstream_id: e for e in mine if e.server == server}
            try:
                listed = await self._all_pages(server)
            except (MCPError, UpstreamUnavailable):  # that server cannot list now: what Coffer last saw
                listed = [{"taskId": e.upstream_id, "status": e.status} for e in by_id.values()]
            for task in listed:
                entry = by_id.get(str(task.get("taskId")))
                if entry is not None:
                    self._note(entry, task)
                    found.append({**task, "taskId": entry.host_id})
        return paging.paged("tasks", found, params, page_size)

    async def _all_pages(self, server: str) -> list[dict[str, Any]]:
        up = self._upstream(server)
        if up is None:
            raise UpstreamUnavailable(f"server '{server}' is not running")
        tasks: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(50):
            page = await up.request(types.ListTasksRequest(params=types.PaginatedRequestParams(cursor=cursor)))
            tasks += [t for t in page.get("tasks") or [] if isinstance(t, dict)]
            cursor = page.get("nextCursor")
            if not cursor:
                break
        return tasks

    # ------------------------------------------------------------------ from upstreams

    async def on_status(self, server: str, notification: Any) -> None:
        """An upstream's `notifications/tasks/status`: to the host that created the task, under its id;
        a host that cannot be reached any more has its task cancelled upstream."""
        params = getattr(notification, "params", None)
        upstream_id = getattr(params, "task_id", None)
        entry = self.tasks.get(host_id(server, str(upstream_id)))
        if entry is None or params is None:
            return
        wire = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        self._note(entry, wire)
        note = types.TaskStatusNotification(
            params=types.TaskStatusNotificationParams.model_validate({**wire, "taskId": entry.host_id})
        )
        try:
            await entry.session.send_notification(note)
        except Exception:  # the host is gone: nobody will collect this task
            await self._cancel_upstream(entry, "its client went away")

    async def _cancel_upstream(self, entry: TaskEntry, why: str) -> None:
        if entry.status in TERMINAL:
            return
        log.info("cancelling task %s on %s: %s", entry.upstream_id, entry.server, why)
        request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=entry.upstream_id))
        with contextlib.suppress(MCPError, UpstreamUnavailable, anyio.BrokenResourceError, anyio.ClosedResourceError):
            with anyio.move_on_after(5):
                await self._send(entry, request, timeout=5)
        self._note(entry, {"status": "cancelled"})

    async def session_ended(self, key: object) -> None:
        """An engine session ended (its host went): its tasks still running are cancelled upstream."""
        with anyio.CancelScope(shield=True):
            for entry in [e for e in self.tasks.values() if e.owner is key]:
                await self._cancel_upstream(entry, "its client went away")

    async def close(self) -> None:
        """The gateway stops: every task still running is cancelled upstream (nobody can collect it)."""
        with anyio.CancelScope(shield=True):
            for entry in list(self.tasks.values()):
                await self._cancel_upstream(entry, "coffer serve is stopping")

    # ------------------------------------------------------------------ the bridge

    async def run_as_task(
        self,
        up: Any,
        call: types.CallToolRequestParams,
        timeout: float,
        progress: Callable[[float, float | None, str | None], Awaitable[None]] | None,
    ) -> dict[str, Any]:
        """Run a task-required tool for a host that did not ask for a task: create it, wait for its
        result within `timeout` (progress from its status messages), cancel it upstream past that."""
        deadline = anyio.current_time() + timeout
        ttl = int(timeout * 1000)
        request = types.CallToolRequest(params=call.model_copy(update={"task": types.TaskMetadata(ttl=ttl)}))
        created: dict[str, Any] = await up.request(request, timeout=timeout)
        task = created.get("task")
        if not isinstance(task, dict) or not isinstance(task.get("taskId"), str):
            return created  # it ran at once after all
        task_id = task["taskId"]
        done = anyio.Event()
        failure: BaseException | None = None
        result: dict[str, Any] = {}
        try:
            async with anyio.create_task_group() as tg:
                if progress is not None:
                    tg.start_soon(_progress_from_status, up, task_id, task, progress, done)
                remaining = max(deadline - anyio.current_time(), 0.1)
                payload = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
                try:
                    result = await up.request(payload, timeout=remaining)
                except Exception as exc:  # kept out of the task group's ExceptionGroup: callers catch MCPError
                    failure = exc
                done.set()
                tg.cancel_scope.cancel()
        except BaseException as exc:  # cancelled by the host, or the gateway stopping
            failure = exc
        if failure is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception), anyio.move_on_after(5):
                cancel = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
                await up.request(cancel, timeout=5)
            raise failure
        meta = result.get("_meta")
        if isinstance(meta, dict) and RELATED_TASK in meta:  # the host asked for no task: none is named
            rest = {k: v for k, v in meta.items() if k != RELATED_TASK}
            result = {**result, "_meta": rest} if rest else {k: v for k, v in result.items() if k != "_meta"}
        return result


async def _progress_from_status(
    up: Any, task_id: str, task: dict[str, Any], progress: Callable[..., Awaitable[None]], done: anyio.Event
) -> None:
    """Poll the bridged task's status: each new status message is a progress notification to the host."""
    last: str | None = None
    step = 0
    poll = min(max((task.get("pollInterval") or 1000) / 1000, POLL_MIN_S), POLL_MAX_S)
    while not done.is_set():
        message = task.get("statusMessage")
        if isinstance(message, str) and message != last:
            step += 1
            last = message
            await progress(float(step), None, message)
        with anyio.move_on_after(poll):
            await done.wait()
        if done.is_set():
            return
        with contextlib.suppress(MCPError, UpstreamUnavailable):
            task = await up.request(types.GetTaskRequest(params=_get(task_id)), timeout=poll * 4)
        if task.get("status") in TERMINAL:
            return


def _get(task_id: str) -> types.GetTaskRequestParams:
    return types.GetTaskRequestParams(task_id=task_id)


def is_task_call(ctx: Any) -> bool:
    """A host's task-augmented tools/call (2025-11-25: tasks are not part of 2026-07-28's core)."""
    params = ctx.params or {}
    return (
        ctx.method == "tools/call"
        and isinstance(params.get("task"), dict)
        and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
    )
