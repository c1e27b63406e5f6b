"""Newline-delimited JSON-RPC, the framing of stdio: lines split out of what a pipe gives, messages
framed into what is written to one. Shared by `coffer serve`'s own stdin and stdout
(coffer.gateway.stdio) and each stdio upstream's pipes (coffer.upstreams.transport); what it is written
for is size: a 50 MB message is neither copied to find its end nor to add its newline.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage

MAX_LINE_BYTES = 64 * 1024 * 1024  # one JSON-RPC frame; a bigger unterminated one marks the upstream broken
WRITE_CHUNK = 1024 * 1024


class LineSplitter:
    """Bytes in, complete lines out, in linear time: each chunk is searched once and a line is built in
    the bytearray that is then parsed (no copy of it). A line that outgrows `limit` is dropped as it
    arrives (`overflowing` says so at once) and comes out as None when it ends. Shared by the client's
    stdin (`coffer.gateway.stdio`) and each upstream's stdout."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self.overflowing = False
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> Iterator[bytearray | None]:
        """The lines `chunk` completes, one at a time (a consumer that lets go of each holds one at
        most); consume it whole, or the rest of the chunk is not taken in."""
        view, start = memoryview(chunk), 0
        while (newline := chunk.find(b"\n", start)) != -1:
            if not self.overflowing:
                self._buffer += view[start:newline]
            start = newline + 1
            yield self._take()
        if not self.overflowing:
            self._buffer += view[start:]
            if len(self._buffer) > self.limit:
                self._buffer, self.overflowing = bytearray(), True

    def rest(self) -> bytearray | None:
        """The unterminated last line at EOF (None: it was over the limit); empty when there is none."""
        return self._take()

    def _take(self) -> bytearray | None:
        line = None if self.overflowing else self._buffer
        self._buffer, self.overflowing = bytearray(), False
        return line


def pieces(data: bytes) -> Iterator[memoryview]:
    """`data` in WRITE_CHUNK slices: written one at a time with a drain between, a pipe's buffer never
    holds a second whole copy of a 50 MB message."""
    view = memoryview(data)
    return (view[start : start + WRITE_CHUNK] for start in range(0, len(view), WRITE_CHUNK))


WRITE_BATCH = 64  # queued messages written together at most
SMALL_MESSAGE = 64 << 10  # a message up to this size is joined with its newline (and its neighbours)


def framed(data: bytes) -> Iterator[bytes | memoryview]:
    """One message's buffers with its newline: a small one joined with it (one write, where two woke the
    reader twice), a big one in `pieces` with no copy and the newline after."""
    if len(data) <= SMALL_MESSAGE:
        yield data + b"\n"
        return
    yield from pieces(data)
    yield b"\n"


def lines(batch: list[SessionMessage], calls: set[types.RequestId] | None) -> Iterator[bytes | memoryview]:
    """The buffers to write for `batch`: as `framed`, with consecutive small messages in one buffer;
    pydantic's bytes as they are (no str copy, no re-encoding). The ids of tools/call requests go into
    `calls`."""
    joined: list[bytes] = []
    for message in batch:
        sent = message.message
        if calls is not None and isinstance(sent, types.JSONRPCRequest) and sent.method == "tools/call":
            calls.add(sent.id)
        data = wire_bytes(sent)
        if len(data) <= SMALL_MESSAGE:
            joined += (data, b"\n")
            continue
        if joined:
            yield b"".join(joined)
            joined = []
        yield from framed(data)
    if joined:
        yield b"".join(joined)


def wire_bytes(message: types.JSONRPCMessage) -> bytes:
    """A message as the JSON bytes pydantic writes (what model_dump_json returns, before it decodes them)."""
    return message.__pydantic_serializer__.to_json(message, by_alias=True, exclude_unset=True)


BIG_LINE = 1 << 20  # lines from here up are parsed by `loads_owned`'s low-peak path


def loads_owned(line: bytearray) -> Any:
    """JSON from a line the caller hands over (it is emptied when large), at the lowest peak we found.

    Small lines: pydantic-core's from_json, the fastest. Large ones: from_json copies every string that
    has an escape through a buffer of its own (a 50 MB result of log lines, `\\n` on every line, peaks at
    4x its size, measured), and the stdlib's json.loads of the bytes decodes them to a str first (3x,
    with the line). So the line is decoded to text, the bytes are freed, then the text is parsed: 2x at
    the peak (text and result). Invalid UTF-8 becomes U+FFFD, as the SDK's own reader does."""
    from pydantic_core import from_json

    if len(line) < BIG_LINE:
        return from_json(line)
    import json

    text = line.decode("utf-8", "replace")
    line.clear()
    return json.loads(text)
