"""A small example MCP server, bundled so `coffer demo` has something real to serve.

Written with the mcp 2.x SDK's high-level `MCPServer`, the way many upstreams are. It runs as its own
process: `python -m coffer.examples.demo_server`. Notes live in memory for the life of the process.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp.server import MCPServer

mcp = MCPServer("coffer-demo", instructions="A tiny demo server: notes, echo, arithmetic and the time.")
NOTES: list[str] = []


@mcp.tool()
def add_note(text: str) -> str:
    """Save a short note for later in this session."""
    NOTES.append(text.strip())
    return f"saved note #{len(NOTES)}"


@mcp.tool()
def list_notes() -> list[str]:
    """List the notes saved so far, oldest first."""
    return list(NOTES)


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back unchanged (handy to check a connection)."""
    return text


@mcp.tool()
def add(a: float, b: float) -> float:
    """Add two numbers and return the sum."""
    return a + b


@mcp.tool()
def current_time(timezone: str = "UTC") -> str:
    """Get the current date and time in an IANA timezone such as Europe/Paris (default UTC)."""
    try:
        zone = ZoneInfo(timezone) if timezone != "UTC" else UTC
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown timezone {timezone!r}") from None
    return datetime.now(zone).isoformat(timespec="seconds")


@mcp.resource("demo://readme", name="readme", mime_type="text/markdown")
def readme() -> str:
    """What this server is for."""
    return (
        "# Coffer demo server\n\nIt keeps notes in memory, echoes text, adds numbers and tells the time. "
        "Coffer serves its tools as demo__add_note, demo__echo and so on."
    )


if __name__ == "__main__":
    mcp.run()
