"""Coffer: a local-first vault of MCP servers and the gateway that serves them as one.

The parts, one package each, bottom to top; a part imports only the parts below it, never a circle
(tests/test_architecture.py checks this from the import graph):

    errors                  one-line errors with stable exit codes (every part may raise them)
    vault/  loopback        paths, coffer.toml (registry), the catalogue snapshot and exposed names, SQLite helpers |
                            the one TCP listener factory (TCP_NODELAY on every accepted connection)
    trust/  ranking/  log/  approval, pins, curation, secrets, redaction | BM25 + embeddings | the invocation log
    memory/  discovery/     notes and indexed resources behind coffer__ask | MCP registries: cache, find, plans
    results/  telemetry/    big results kept and read back | OpenTelemetry export when its variables ask
    upstreams/  codemode/   the client side of the wire: one session per server, its pipe, its supervisor |
                            coffer__run scripts in pydantic-monty's sandbox, and which tools they may call
    gateway/                the host side: stdio/http -> server -> routes -> view/relay -> pool (-> upstreams)
    clients/  engine/       agents' config files: read, plan and write (import plans, install, move) |
                            how `coffer serve` is hosted: the per-user engine, or in-process
    manage/                 use cases across parts: add/import/remove, probe, refresh, doctor, vault search, demo,
                            enable/disable, review/approve, usage and profiles
    examples/               example upstream servers run as their own processes (`coffer demo`)
    console/                `coffer ui`: the web console over manage/ (guarded loopback server, static page)
    cli/                    Typer commands: parse, call one part, render
    __main__                `python -m coffer`

Where a new feature goes: a new file format or location, vault; a rule about what an agent may see,
trust; anything that speaks MCP to upstreams, upstreams; to hosts, gateway; a command that strings
several parts together, manage (the CLI only parses and renders).
"""

from __future__ import annotations

import functools


@functools.cache
def _version() -> str:
    """The version as pyproject.toml writes it, the one place it is written: a checkout reads the file
    itself (an editable or older install's metadata may say otherwise), an installed wheel its metadata."""
    import tomllib
    from pathlib import Path

    try:
        text = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8")
        project = tomllib.loads(text).get("project", {})
        if project.get("name") == "coffer" and isinstance(project.get("version"), str):
            return str(project["version"])
    except (OSError, ValueError):  # no checkout around the package (an installed wheel): its metadata
        pass
    from importlib import metadata

    try:
        return metadata.version("coffer")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def __getattr__(name: str) -> str:
    """`coffer.__version__`, read on first use (PEP 562)."""
    if name == "__version__":
        return _version()
    raise AttributeError(f"module 'coffer' has no attribute {name!r}")
