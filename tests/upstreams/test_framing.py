"""Newline-delimited JSON-RPC framing: lines out of arbitrary chunks, buffers for a write."""

from __future__ import annotations

import json

from coffer.upstreams.framing import (
    BIG_LINE,
    SMALL_MESSAGE,
    WRITE_CHUNK,
    LineSplitter,
    framed,
    loads_owned,
)


def test_lines_come_out_whole_however_the_chunks_cut_them() -> None:
    stream = b'{"a": 1}\n{"b": "two"}\n\n{"c": [3]}\n{"unterminated": true}'
    for size in (1, 2, 3, 7, len(stream)):
        splitter = LineSplitter()
        got = [
            bytes(line) for start in range(0, len(stream), size) for line in splitter.feed(stream[start : start + size])
        ]
        assert got == [b'{"a": 1}', b'{"b": "two"}', b"", b'{"c": [3]}'], size
        assert splitter.rest() == b'{"unterminated": true}'
        assert splitter.rest() == b""  # taken once


def test_an_overlong_line_is_dropped_as_it_arrives_and_the_next_one_is_kept() -> None:
    splitter = LineSplitter(limit=10)
    assert list(splitter.feed(b"x" * 8)) == []
    assert list(splitter.feed(b"y" * 8)) == [] and splitter.overflowing  # known before its newline comes
    assert list(splitter.feed(b"zzz\nok\n")) == [None, b"ok"]  # the long one ends as None
    assert not splitter.overflowing
    assert list(splitter.feed(b"w" * 11)) == [] and splitter.rest() is None  # unterminated and too long


def test_a_small_message_is_one_buffer_and_a_big_one_slices_without_a_copy() -> None:
    assert list(framed(b'{"id": 1}')) == [b'{"id": 1}\n']
    big = b"b" * (WRITE_CHUNK * 2 + 5)
    assert len(big) > SMALL_MESSAGE
    parts = list(framed(big))
    assert [len(p) for p in parts] == [WRITE_CHUNK, WRITE_CHUNK, 5, 1] and parts[-1] == b"\n"
    assert all(isinstance(p, memoryview) and p.obj is big for p in parts[:-1])  # views of the caller's bytes


def test_a_big_line_is_parsed_and_emptied_and_bad_utf8_becomes_the_replacement_character() -> None:
    small = bytearray(b'{"text": "caf\xc3\xa9"}')
    assert loads_owned(small) == {"text": "café"} and small  # a small line is left as it was
    text = "line\n" * (BIG_LINE // 5 + 1)
    line = bytearray(json.dumps({"text": text, "bad": "x"}).encode().replace(b'"x"', b'"\xff"'))
    assert len(line) >= BIG_LINE
    got = loads_owned(line)
    assert got == {"text": text, "bad": "\ufffd"}
    assert line == b""  # emptied: the caller holds no second copy while the parse result lives
