"""How `coffer serve` is hosted: the one place that picks the engine or in-process serving, and in-process
serving itself.

`serve()` is what both CLI paths call (the quick path in coffer.cli.quick and the Typer command): through
the vault's engine (coffer.engine.front, the default), or everything in this process (`--standalone`,
or `COFFER_STANDALONE=1` for every `coffer serve`), as uvicorn's `run()` picks its supervisor. In-process,
the gateway is served on this process's stdio (coffer.gateway.stdio) or a loopback HTTP port
(coffer.gateway.http); the process ends when stdin closes or on SIGTERM/SIGINT/SIGHUP, and every upstream
process group is gone before it does (each stop is bounded to a few seconds).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from coffer.errors import INTERRUPTED

if TYPE_CHECKING:
    from coffer.gateway.server import Gateway

log = logging.getLogger("coffer.serve")
IN_PROCESS_ENV = "COFFER_STANDALONE"  # "1": every `coffer serve` runs in-process (as --standalone)
HOST_WAIT_S = 2.0  # an upstream's handshake waits at most this long for the host's (normally instant)


_stopped_by: list[int] = []  # the signal that ended an in-process stdio serve


def in_process(standalone: bool = False) -> bool:
    """Whether `coffer serve` runs in-process: `--standalone`, or `COFFER_STANDALONE=1` in its environment."""
    return standalone or os.environ.get(IN_PROCESS_ENV) == "1"


def serve(
    http_port: int | None, profile: str | None, auth: bool = True, standalone: bool = False, team: bool = False
) -> NoReturn:
    """Serve until the host goes or a signal arrives, then exit the process: through the engine, or
    in-process (always, for `team`: the gateway behind the team's provider). Raises CofferError before
    anything starts (a port in use, no engine, a [team] table that does not hold)."""
    if team:
        _check_registry(True)
        run_in_process(http_port, profile, auth, team=True)
    _check_registry(in_process(standalone))
    if http_port is None and sys.stdin.isatty():  # a person ran it: agents start it with a pipe
        sys.stderr.write("coffer: serving MCP on stdio: waiting for an MCP client on stdin (Ctrl-C to stop)\n")
    if in_process(standalone):
        run_in_process(http_port, profile, auth)
    from coffer.engine import front

    if http_port is None:
        front.run(profile)
    for sig in (signal.SIGTERM, signal.SIGHUP):  # its port closes; the engine stays for its other sessions
        signal.signal(sig, lambda *_: os._exit(0))
    front.run_http(http_port, profile, auth)


def _check_registry(alone: bool) -> None:
    """A coffer.toml that does not parse is never served as an empty vault: with no engine to keep the
    last good one (or in-process), the start fails with the parse error; a running engine keeps serving
    its last good registry, and this session is told so on stderr."""
    from coffer.errors import RegistryError
    from coffer.vault import registry

    try:
        registry.load()
    except RegistryError as exc:
        from coffer.engine import control

        if alone or not control.running():
            raise RegistryError(f"{exc} (nothing is served until it parses)") from None
        sys.stderr.write(f"coffer: {exc}: the running engine serves the last good registry until it parses\n")


def setup_logging() -> None:
    """Logs to stderr (the host owns stdout), redacted: resolved secret and env values never appear."""
    from coffer.trust.redact import RedactingFilter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("coffer: %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)


def run_in_process(
    http_port: int | None = None, profile: str | None = None, auth: bool = True, team: bool = False
) -> NoReturn:
    """Serve from this process until stdin closes or a signal arrives, then exit (never returns).

    Raises CofferError before anything starts when the HTTP port cannot be bound.
    """
    import anyio

    from coffer.loopback import tcp_listener

    verifier = None
    if team:
        from coffer.trust.team import Verifier, team_from
        from coffer.vault import registry

        reg = registry.load()
        verifier = Verifier(team_from(reg.team, reg.profiles))
    bind = verifier.team.listen if verifier is not None else "127.0.0.1"
    sock = None if http_port is None else tcp_listener(http_port, bind)  # a port in use: one error, no half start
    token = None
    if sock is not None and auth and verifier is None:
        from coffer.trust.http_token import serve_token

        token = serve_token()
    setup_logging()
    from coffer.vault import shellenv

    # this process serves its one session: its own values stay, the user's shell's fill what it lacks (an
    # agent that trims the environment leaves no certificates); the engine takes the shell's first instead
    shellenv.fill(os.environ, shellenv.recorded())
    code = 0
    try:
        anyio.run(_main, sock, profile, token, verifier)
        code = INTERRUPTED if _stopped_by[:1] == [signal.SIGINT] else 0
    except KeyboardInterrupt:
        code = INTERRUPTED
    except BaseException as exc:  # report, then still exit without leaving threads behind
        log.error("coffer serve stopped: %s", _describe(exc))
        code = 1
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    # Worker threads (a ranker build, a blocked read) must not keep a dead server alive.
    os._exit(code)


async def _main(
    http_sock: socket.socket | None, profile: str | None = None, token: str | None = None, team: Any = None
) -> None:
    import anyio

    from coffer.gateway.server import Gateway
    from coffer.gateway.stdio import process_streams
    from coffer.log.calls import CallLog

    calllog = CallLog.open()
    # stdio has one host: upstreams are told what it can take; HTTP hosts come and go (coffer.gateway.relay)
    gateway = Gateway(calllog=calllog, host_wait=HOST_WAIT_S if http_sock is None else None, profile=profile)
    try:
        async with gateway.running(), anyio.create_task_group() as tg:
            if http_sock is None:
                tg.start_soon(_watch_signals, tg.cancel_scope)
                async with process_streams() as (read, write):
                    await gateway.serve(read, write)
            else:
                await _serve_http(gateway, http_sock, token, team)
            tg.cancel_scope.cancel()
    finally:
        await anyio.to_thread.run_sync(calllog.close)


async def _watch_signals(scope: Any) -> None:
    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for sig in signals:
            _stopped_by.append(sig)
            scope.cancel()
            return


async def _serve_http(gateway: Gateway, sock: socket.socket, token: str | None, team: Any = None) -> None:
    from coffer.gateway import http

    port = sock.getsockname()[1]
    served = http.server(gateway, token, team=team)

    def stop(signum: int, _frame: Any) -> None:
        """A signal before uvicorn takes them over (or the one it re-raises once it has stopped): noted
        for the exit status, and the server told to stop; never an exit before the upstreams stop."""
        _stopped_by.append(signum)
        served.should_exit = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    sys.stderr.write(http.serving_line(port, token is not None, team))
    await served.serve(sockets=[sock])


def _describe(exc: BaseException) -> Any:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
