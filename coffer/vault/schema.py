"""Trim what a tool's input schema carries but can never use: definitions no `$ref` reaches.

Some servers generate every tool's schema with the whole API's shared definitions attached (Notion's
server gives each of its tools the same ~2,200-char `$defs`, including tools that reference none).
A definition that no reference reaches from the root has no effect on validation, so dropping it
loses no schema content; on the 222 real tools it is 52,528 of 298,663 chars (about 13,000 tokens a
client pays on every request). Only plain local references are followed; a schema that could resolve
a reference any other way (`$id` below the root, anchors, dynamic or remote references) is left
exactly as it came. `$schema` is kept: MCP reads it for the dialect (2020-12 when absent).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

CONTAINERS = ("$defs", "definitions")
# keywords that let a reference resolve other than by a plain "#/$defs/NAME" pointer from the root
_UNSAFE = frozenset({"$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveRef", "$recursiveAnchor"})


def prune_unused_defs(schema: Any) -> Any:
    """`schema` without root definitions unreachable by `$ref`; the same object when nothing is dropped."""
    if not isinstance(schema, dict) or not any(isinstance(schema.get(c), dict) for c in CONTAINERS):
        return schema
    targets: dict[tuple[str, str], Any] = {
        (c, name): body for c in CONTAINERS if isinstance(schema.get(c), dict) for name, body in schema[c].items()
    }
    body_refs = {key: _refs_of(body) for key, body in targets.items()}
    if any(refs_ is None for refs_ in body_refs.values()):
        return schema
    # references from the schema outside the root containers, then through the definitions they reach
    pending: list[str] = []
    if not _collect({k: v for k, v in schema.items() if k not in CONTAINERS}, pending, root=True):
        return schema
    reached: set[tuple[str, str]] = set()
    while pending:
        ref = pending.pop()
        if ref == "#":
            continue
        key = _target(ref)
        if key is None:
            return schema  # a local pointer elsewhere (e.g. "#/properties/x"): keep everything
        if key in reached or key not in targets:
            continue
        reached.add(key)
        pending.extend(body_refs[key] or [])
    if len(reached) == len(targets):
        return schema
    out = dict(schema)
    for container in CONTAINERS:
        if isinstance(schema.get(container), dict):
            kept = {n: b for n, b in schema[container].items() if (container, n) in reached}
            if kept:
                out[container] = kept
            else:
                del out[container]
    return out


def _target(ref: str) -> tuple[str, str] | None:
    """("$defs", NAME) for "#/$defs/NAME[/...]" (JSON-pointer and percent escapes undone), else None."""
    for container in CONTAINERS:
        head = f"#/{container}/"
        if ref.startswith(head):
            name = unquote(ref[len(head) :].split("/", 1)[0]).replace("~1", "/").replace("~0", "~")
            return (container, name)
    return None


def _refs_of(node: Any) -> list[str] | None:
    refs: list[str] = []
    return refs if _collect(node, refs, root=False) else None


def _collect(node: Any, refs: list[str], root: bool) -> bool:
    """Gather every `$ref` below `node` into `refs`; False when some reference could resolve other than
    by a local pointer (a remote or relative ref, an anchor, an `$id` below the root)."""
    stack = [(node, root)]
    while stack:
        item, is_root = stack.pop()
        if isinstance(item, dict):
            if _UNSAFE.intersection(item) or ("$id" in item and not is_root):
                return False
            ref = item.get("$ref")
            if isinstance(ref, str):
                if not ref.startswith("#"):
                    return False
                refs.append(ref)
            stack.extend((value, False) for value in item.values())
        elif isinstance(item, list):
            stack.extend((value, False) for value in item)
    return True


__all__ = ["prune_unused_defs"]
