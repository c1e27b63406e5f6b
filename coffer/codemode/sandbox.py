"""One script run in pydantic-monty, its host calls answered by the gateway.

Each run gets a fresh worker process (a pool of one, about 3 ms to start), so nothing survives from one
script to the next and a crash costs only that run. The script is driven snapshot by snapshot: each call
of a host function pauses it, the host answers (awaiting the real tool call), and it resumes with the
value or an exception it can catch. `call_tool` answers in place, and works with or without `await`;
`call_tools` runs a batch concurrently. Limits: wall time over the whole run (tool calls included),
CPU time and heap inside the sandbox, tool calls per script, bytes printed. Cancelling the run (the
outer call) cancels the inner call in flight and stops the worker.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from coffer.codemode.checks import ScriptRefused, check
from coffer.codemode.policy import Limits
from coffer.codemode.values import Outcome, ToolFailed
from coffer.vault import paths
from coffer.vault.fsutil import atomic_write

Caller = Callable[[str, dict[str, Any]], Awaitable[Any]]  # exposed name, arguments -> the script's value
Searcher = Callable[[str, int], Awaitable[list[dict[str, Any]]]]  # query, top_k -> tools a script may call
BATCH_CONCURRENCY = 8  # inner calls of one call_tools batch in flight at once
SLEEPS = frozenset({"system.sleep", "system.async_sleep"})  # the only OS calls a script gets answered
NO_OS = "scripts have no files, network, environment or processes: reach those through call_tool"


@dataclass
class Host:
    """What a script can ask of the gateway."""

    call: Caller
    search: Searcher


class _Run:
    def __init__(self, host: Host, limits: Limits) -> None:
        self.host = host
        self.limits = limits
        self.outcome = Outcome()
        self._printed: list[str] = []
        self._size = 0
        self.overflowed = False

    def on_print(self, _stream: str, text: str) -> None:
        if self.overflowed:
            return
        size = len(text.encode("utf-8", "replace"))
        if self._size + size > self.limits.output_bytes:
            self.overflowed = True
            return
        self._size += size
        self._printed.append(text)

    @property
    def printed(self) -> str:
        return "".join(self._printed)

    async def answer(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The host function `name` called with these arguments; raises ToolFailed for the script."""
        if name == "call_tool":
            tool, arguments = _bind(name, args, kwargs, ("name", "arguments"))
            return await self.call(tool, arguments)
        if name == "call_tools":
            (batch,) = _bind(name, args, kwargs, ("calls",), required=1)
            return await self.call_many(batch)
        if name == "search_tools":
            query, top_k = _bind(name, args, kwargs, ("query", "top_k"))
            if not isinstance(query, str) or not query.strip():
                raise ToolFailed("TypeError", "search_tools(query, top_k=5) needs the action you want, as text")
            k = 5 if top_k is None else top_k
            if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 20:
                raise ToolFailed("ValueError", "search_tools: top_k must be a whole number from 1 to 20")
            return await self.host.search(query, k)
        raise ToolFailed("NameError", f"name '{name}' is not defined")

    async def call(self, tool: Any, arguments: Any) -> Any:
        if not isinstance(tool, str) or not tool:
            raise ToolFailed("TypeError", "call_tool(name, arguments) needs a tool's name, as text")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ToolFailed("TypeError", f"call_tool('{tool}', arguments): arguments must be a dict")
        if self.outcome.calls >= self.limits.calls:
            raise ToolFailed(
                "RuntimeError",
                f"this script already made {self.limits.calls} tool calls, its limit (settings.code_mode_max_calls)",
            )
        self.outcome.calls += 1
        return await self.host.call(tool, arguments)

    async def call_many(self, batch: Any) -> list[Any]:
        """Every call of the batch, concurrently; a failed one is `{"error": message}` in its place."""
        if not isinstance(batch, list | tuple):
            raise ToolFailed("TypeError", "call_tools(calls) needs a list of [name, arguments] pairs")
        pairs = []
        for item in batch:
            if isinstance(item, dict):
                pairs.append((item.get("name"), item.get("arguments")))
            elif isinstance(item, list | tuple) and 1 <= len(item) <= 2:
                pairs.append((item[0], item[1] if len(item) == 2 else None))
            else:
                raise ToolFailed("TypeError", "call_tools(calls): each call is [name, arguments] or a dict")
        results: list[Any] = [None] * len(pairs)
        limiter = anyio.CapacityLimiter(BATCH_CONCURRENCY)

        async def one(i: int, tool: Any, arguments: Any) -> None:
            async with limiter:
                try:
                    results[i] = await self.call(tool, arguments)
                except ToolFailed as exc:
                    results[i] = {"error": f"{exc.kind}: {exc}"}

        async with anyio.create_task_group() as tg:
            for i, (tool, arguments) in enumerate(pairs):
                tg.start_soon(one, i, tool, arguments)
        return results


def _bind(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any], params: tuple[str, ...], required: int = 1
) -> list[Any]:
    """Positional and keyword arguments as the host function's parameters, or a TypeError for the script."""
    if len(args) > len(params) or set(kwargs) - set(params):
        raise ToolFailed("TypeError", f"{name}({', '.join(params)}) was called with the wrong arguments")
    bound = [*args, *[None] * (len(params) - len(args))]
    for i, param in enumerate(params):
        if param in kwargs:
            if i < len(args):
                raise ToolFailed("TypeError", f"{name}() got '{param}' twice")
            bound[i] = kwargs[param]
    if any(bound[i] is None for i in range(required)):
        raise ToolFailed("TypeError", f"{name}() needs '{params[0]}'")
    return bound


def monty_binary() -> str | None:
    """pydantic-monty's worker binary, found by pydantic-monty's own resolver (MONTY_BIN, this
    environment's scripts directories, PATH), so the binary confined is the one its pool would run;
    None where it finds none (or moved the resolver: the pool then runs whatever it finds, unconfined)."""
    try:
        from pydantic_monty._binary import find_monty_binary

        return find_monty_binary()
    except (ImportError, FileNotFoundError):
        return None


def confined_worker(confine: Callable[[str], list[str] | None]) -> str | None:
    """A launcher that starts the worker under `confine`'s command (coffer.upstreams.sandbox's
    `helper_command`: its binary and the system's libraries, nothing else), kept in the cache dir and
    named by its content; None where there is nothing to confine with (the worker runs as it is)."""
    binary = monty_binary()
    argv = confine(binary) if binary is not None else None
    if argv is None:
        return None
    text = "#!/bin/sh\nexec " + shlex.join(argv) + ' "$@"\n'
    path = paths.cache_dir() / "codemode" / f"worker-{hashlib.sha256(text.encode()).hexdigest()[:16]}.sh"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text, mode=0o700)
    return str(path)


async def run(code: str, host: Host, limits: Limits, worker: str | None = None) -> Outcome:
    """Run `code` (`worker`: the worker's launcher, `confined_worker`'s; None: the binary itself);
    every failure of the script (not of the gateway) is the Outcome's error."""
    import pydantic_monty as pm

    state = _Run(host, limits)
    outcome = state.outcome
    try:
        check(code)
    except ScriptRefused as exc:
        outcome.error = str(exc)
        return outcome
    resource = pm.ResourceLimits(
        max_feed_duration_secs=limits.wall_s,
        max_memory=limits.memory_bytes,
        max_suspensions=limits.calls + 1000,  # every call, name lookup and sleep counts: calls are ours to count
        max_total_sleep_secs=limits.wall_s,
    )
    try:
        with anyio.fail_after(limits.wall_s):
            async with (
                pm.AsyncMonty(binary_path=worker, min_processes=1, max_processes=1) as pool,
                pool.checkout(
                    script_name="script.py", limits=resource, os_policy=pm.OSPolicy(sleep="system")
                ) as session,
            ):
                snap: Any = await session.feed_start(code, print_callback=state.on_print)
                while not isinstance(snap, pm.MontyComplete):
                    snap = await _step(pm, state, snap)
                outcome.value = snap.output
    except TimeoutError:
        outcome.timed_out = True
        outcome.error = f"TimeoutError: the script ran past its time limit of {limits.wall_s:g}s"
        outcome.notes.append("settings.code_mode_timeout_s sets the limit.")
    except pm.MontySyntaxError as exc:
        outcome.error = f"SyntaxError: {exc.display('msg')}"
    except pm.MontyRuntimeError as exc:
        outcome.error = exc.display("traceback")
        if "memory limit exceeded" in str(exc):
            outcome.notes.append("settings.code_mode_memory_mb sets the limit.")
    except pm.MontyError as exc:  # the worker crashed or was cut off: this run only
        outcome.error = f"the sandbox stopped: {type(exc).__name__}: {exc}"
    outcome.printed = state.printed
    if state.overflowed:  # the cause, even when the script then ran out of time or memory printing on
        outcome.error = f"the script printed more than {limits.output_bytes:,} bytes: print less, or return a summary"
        outcome.notes.append("settings.code_mode_output_kb sets the limit.")
    return outcome


def _seconds(args: Any) -> float:
    value = args[0] if args else 0
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ToolFailed("ValueError", "sleep length must be a non-negative number")
    return float(value)


async def _step(pm: Any, state: _Run, snap: Any) -> Any:
    """Answer one pause of the script and resume it."""
    if isinstance(snap, pm.AsyncNameLookupSnapshot):
        return await snap.resume()  # an undefined name: NameError in the script
    if isinstance(snap, pm.AsyncFunctionSnapshot):
        name = str(snap.function_name)
        if snap.is_os_function and name not in SLEEPS:
            return await snap.resume({"exception": PermissionError(NO_OS)})
        try:
            if snap.is_os_function:  # time.sleep, asyncio.sleep: waited here, within the wall time
                await anyio.sleep(_seconds(snap.args))
                value = None
            else:
                value = await state.answer(name, tuple(snap.args), dict(snap.kwargs))
        except ToolFailed as exc:
            return await snap.resume({"exc_type": exc.kind, "message": str(exc)})
        if not snap.allow_eager_await:  # called as a function: the value, in place
            return await snap.resume({"return_value": value})
        pending = await snap.resume({"future": ...})  # `await call_tool(...)`: a future, settled at once
        return await pending.resume({snap.call_id: {"return_value": value}})
    raise RuntimeError(f"coffer: the sandbox paused in a way it does not expect: {type(snap).__name__}")
