"""Big results at the gateway: a tools/call result over the cap is kept whole (coffer.results) and the
host gets a preview with a `coffer://results/<id>` link; `resources/read` of that link gives the
original back, and `coffer__read_result` a range of it or the lines matching a pattern.

The cap, in tokens: `[settings] result_max_tokens` (default 25,000, Claude Code's own limit; 0 turns
keeping off), a server's `max_result_tokens`, and lower still when the request's `_meta` carries the
host's own limit (`io.coffer/maxResultTokens` in tokens, or `anthropic/maxResultSizeChars` in
characters). A result under the cap is passed on as it came, untouched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError

from coffer.errors import CofferError
from coffer.gateway.builtins import CallFailure, text_result
from coffer.results import archive, kept, preview, spill, text
from coffer.vault.registry import ServerConfig

DEFAULT_CAP = 25_000
META_TOKENS = "io.coffer/maxResultTokens"
META_CHARS = "anthropic/maxResultSizeChars"
CHARS_PER_TOKEN = 3  # a host's character limit, read as tokens: cautious (English runs ~4 a token)


def cap_for(settings: Mapping[str, Any], cfg: ServerConfig | None, meta: Mapping[str, Any] | None) -> int:
    """The token cap for one call (0: results are passed whole)."""
    cap = settings.get("result_max_tokens", DEFAULT_CAP)
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
        raise CallFailure("error", "bad_settings", f"settings.result_max_tokens must be an integer >= 0, not {cap!r}")
    if cfg is not None and cfg.max_result_tokens is not None:
        cap = cfg.max_result_tokens if cap == 0 else min(cap, cfg.max_result_tokens)
    for key, scale in ((META_TOKENS, 1), (META_CHARS, CHARS_PER_TOKEN)):
        value = (meta or {}).get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            host = max(1, value // scale)
            cap = host if cap == 0 else min(cap, host)
    return cap


async def shrink(
    result: dict[str, Any], server: str, tool: str, cap: int, settings: Mapping[str, Any], schema: bool = False
) -> tuple[dict[str, Any], archive.Kept | None]:
    """`result` as the host should get it: itself when under the cap, else a preview of it kept whole
    (`schema`: the tool declares an output schema, whose structured content must pass whole). Its long
    strings may have been decoded into files by the transport (coffer.results.spill): claimed here, read
    a slice at a time, and made strings again only where the result goes on whole."""
    spilled = spill.claim(result)
    try:
        if not spilled and (cap <= 0 or preview.surely_under(result, cap)):  # on the loop: no tokenizer
            return result, None
        measure = await anyio.to_thread.run_sync(preview.measure, result, cap) if cap > 0 else None
        if measure is None or not measure.over:
            return dict(await anyio.to_thread.run_sync(spill.whole, result, spilled)), None
        keep_days, _ = archive.settings_of(settings)
        saved = await anyio.to_thread.run_sync(kept.keep, result, server, tool, measure, settings)
        shown = await anyio.to_thread.run_sync(preview.build, result, saved, cap, keep_days, schema)
        return shown, saved
    finally:
        for value in spilled:
            value.discard()


def is_kept_uri(uri: str) -> bool:
    return uri.startswith(archive.URI_PREFIX)


async def read(uri: str) -> dict[str, Any]:
    """`resources/read` of a kept result: the original, whole. One text part comes back as that text; a
    single image, audio or blob as itself; anything else as the result's JSON."""
    try:
        original = await anyio.to_thread.run_sync(archive.load, uri)
    except CofferError as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
    items = [i for i in original.get("content") or [] if isinstance(i, dict)]
    if len(items) == 1 and items[0].get("type") == "text" and original.get("structuredContent") is None:
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": items[0].get("text", "")}]}
    if len(items) == 1 and items[0].get("type") in ("image", "audio"):
        return {"contents": [{"uri": uri, "mimeType": items[0].get("mimeType"), "blob": items[0].get("data", "")}]}
    if len(items) == 1 and items[0].get("type") == "resource" and isinstance(items[0].get("resource"), dict):
        res = dict(items[0]["resource"]) | {"uri": uri}
        return {"contents": [res]}
    body = await anyio.to_thread.run_sync(lambda: json.dumps(original, ensure_ascii=False))
    return {"contents": [{"uri": uri, "mimeType": "application/json", "text": body}]}


async def read_tool(args: Mapping[str, Any], cap: int) -> dict[str, Any]:
    """`coffer__read_result`: a range of a kept result's text, or the lines matching `pattern`."""
    rid = args.get("id")
    if not isinstance(rid, str):
        raise CallFailure("error", "bad_arguments", "coffer__read_result needs the 'id' of a kept result")
    pattern = args.get("pattern")
    budget = cap or DEFAULT_CAP
    try:
        if pattern is not None:
            if not isinstance(pattern, str):
                raise CallFailure("error", "bad_arguments", "'pattern' must be a string")
            context = _int(args, "context", 0)
            ignore_case = bool(args.get("ignore_case", False))
            found = await anyio.to_thread.run_sync(text.grep, rid, pattern, budget, context, ignore_case)
            return text_result(found)
        offset, length = _int(args, "offset", 0), _int(args, "length", 20_000)
        return text_result(await anyio.to_thread.run_sync(text.read_range, rid, offset, length, budget))
    except CofferError as exc:
        raise CallFailure("error", "bad_arguments", str(exc)) from exc


def _int(args: Mapping[str, Any], key: str, default: int) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CallFailure("error", "bad_arguments", f"'{key}' must be an integer")
    return value
