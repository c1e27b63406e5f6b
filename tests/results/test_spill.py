"""coffer.results.spill: a big line's long strings decoded into files a slice at a time, exactly as a
whole-line parse would decode them, however the slices fall (escapes, surrogate pairs, multi-byte
UTF-8 and runs of backslashes on every cut), and put back where a result must go on whole."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from coffer.results import spill

PIECES = ["a", "é", "中", "😀", "\n", '"', "\\", "\\\\", "\t", "\u2028", "\x00", "\ud83d", "/", " "]


def line_of(result: dict[str, Any], rid: int = 7) -> bytearray:
    return bytearray(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}, ensure_ascii=False).encode())


def text_of_size(rng: random.Random, chars: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(chars))


@pytest.mark.parametrize("ascii_escapes", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_a_split_string_reads_back_exactly_as_a_whole_parse_gives_it(
    tmp_path: Path, seed: int, ascii_escapes: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spill, "MIN_BYTES", 64)
    rng = random.Random(seed)
    big = text_of_size(rng, 6000)
    result = {"content": [{"type": "text", "text": big}, {"type": "text", "text": "small"}], "isError": False}
    raw = json.dumps({"jsonrpc": "2.0", "id": 7, "result": result}, ensure_ascii=ascii_escapes)
    line = bytearray(raw.encode("utf-8", "surrogatepass"))  # a raw lone surrogate is invalid UTF-8 here
    expected = json.loads(line.decode("utf-8", "replace"))  # as the transport's whole-line parse reads it
    cut = spill.split(line, tmp_path, chunk=97 + seed)  # hundreds of cuts, each at an awkward place
    assert cut is not None and not line  # the line is let go of
    envelope, tokens = cut
    parsed = json.loads(envelope)
    assert len(tokens) == 1 and parsed["result"]["content"][0]["text"] == tokens[0]
    spilled = spill.claim(parsed["result"])
    assert [s.chars for s in spilled] == [len(expected["result"]["content"][0]["text"])]
    assert "".join(spilled[0].slices(size=50)) == expected["result"]["content"][0]["text"]
    assert spill.whole(parsed["result"], spilled) == expected["result"]
    assert not list(tmp_path.iterdir())  # made whole: its file is gone


def test_only_a_content_value_is_left_spilled_the_rest_is_restored_at_once(tmp_path: Path) -> None:
    big = "x" * (spill.MIN_BYTES + 10)
    result = {"content": [{"type": "text", "text": big}], "_meta": {"echo": big + "y"}}
    line = line_of(result)
    cut = spill.split(line, tmp_path)
    assert cut is not None
    envelope, tokens = cut
    parsed = json.loads(envelope)["result"]
    spill.settle(parsed, tokens, call=True)
    assert parsed["_meta"]["echo"] == big + "y" and parsed["content"][0]["text"].startswith(spill.MARK)
    assert len(list(tmp_path.iterdir())) == 1
    not_a_call = json.loads(envelope)["result"]  # the same placeholders, for a response that is no call's
    spill.settle(not_a_call, [parsed["content"][0]["text"]], call=False)
    assert not_a_call["content"][0]["text"] == big and not list(tmp_path.iterdir())


def test_lines_it_cannot_help_are_left_to_the_usual_parse(tmp_path: Path) -> None:
    many_small = line_of({"content": [{"type": "text", "text": f"row {n}"} for n in range(40_000)]})
    assert spill.split(many_small, tmp_path) is None and many_small  # untouched
    short = line_of({"content": [{"type": "text", "text": "y" * 1000}]})
    assert spill.split(short, tmp_path) is None
    raw = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"' + b"a\x01" * 300_000 + b'"}]}}'
    control = bytearray(raw)
    assert spill.split(control, tmp_path) is None and control  # JSON refuses it: the usual parse says so
    assert not list(tmp_path.iterdir())


def test_a_value_nobody_claims_is_dropped_with_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cut = spill.split(line_of({"content": [{"type": "text", "text": "z" * spill.MIN_BYTES}]}), tmp_path)
    assert cut is not None and len(list(tmp_path.iterdir())) == 1
    monkeypatch.setattr(spill, "STALE_S", -1.0)  # its call was cancelled long ago
    spill.forget([])  # nothing named: nothing dropped
    assert len(list(tmp_path.iterdir())) == 1
    assert spill.split(line_of({"content": [{"type": "text", "text": "w" * spill.MIN_BYTES}]}), tmp_path)
    assert len(list(tmp_path.iterdir())) == 1  # the stale one went when the next was made
    spill.forget(cut[1])


def test_a_store_that_cannot_be_written_leaves_the_line_to_the_usual_parse(tmp_path: Path) -> None:
    line = line_of(
        {"content": [{"type": "text", "text": "q" * spill.MIN_BYTES}, {"type": "text", "text": "r" * spill.MIN_BYTES}]}
    )
    before = bytes(line)
    with pytest.raises(OSError):
        spill.split(line, tmp_path / "missing")  # the transport catches it and parses the line as it is
    assert bytes(line) == before and not (tmp_path / "missing").exists()


def test_a_failure_on_the_second_string_takes_the_first_ones_file_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    two = {
        "content": [{"type": "text", "text": "q" * spill.MIN_BYTES}, {"type": "text", "text": "r" * spill.MIN_BYTES}]
    }
    real, made = spill._decode, []

    def disk_full_on_the_second(*args: Any) -> spill.Spilled:
        if made:
            raise OSError(28, "No space left on device")
        made.append(real(*args))
        return made[-1]

    monkeypatch.setattr(spill, "_decode", disk_full_on_the_second)
    line = line_of(two)
    with pytest.raises(OSError):
        spill.split(line, tmp_path)
    assert len(made) == 1 and not list(tmp_path.iterdir()) and json.loads(line)["result"] == two
