"""Unreachable schema definitions are dropped from what hosts are shown; nothing else changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coffer.vault.catalogue import build_tools
from coffer.vault.schema import prune_unused_defs

DATA = Path(__file__).parents[1] / "data" / "real-servers.json"

SHARED = {"addr": {"type": "string"}, "user": {"type": "object", "properties": {"a": {"$ref": "#/$defs/addr"}}}}


def test_definitions_no_reference_reaches_are_dropped() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "$defs": dict(SHARED)}
    assert prune_unused_defs(schema) == {"type": "object", "properties": {"q": {"type": "string"}}}
    assert "$defs" in schema  # the input is never changed


def test_reachable_definitions_stay_transitively() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {"who": {"$ref": "#/$defs/user"}},
        "$defs": {**SHARED, "unused": {"type": "number"}},
    }
    out = prune_unused_defs(schema)
    assert out["$defs"] == SHARED  # user, and addr through user
    assert out["$schema"] == schema["$schema"] and out["properties"] == schema["properties"]


def test_draft07_definitions_and_escaped_names() -> None:
    schema = {
        "properties": {"x": {"$ref": "#/definitions/a~1b"}, "y": {"$ref": "#/definitions/with%20space"}},
        "definitions": {"a/b": {"type": "string"}, "with space": {"type": "integer"}, "gone": {}},
    }
    assert set(prune_unused_defs(schema)["definitions"]) == {"a/b", "with space"}


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"x": {"$ref": "other.json#/defs/a"}}, "$defs": {"a": {}}},  # remote
        {"properties": {"x": {"$ref": "#/properties/y"}}, "$defs": {"a": {}}},  # another pointer
        {"properties": {"x": {"$ref": "#thing"}}, "$defs": {"a": {"$anchor": "thing"}}},  # anchor
        {"properties": {"x": {"$id": "inner", "$ref": "#/$defs/a"}}, "$defs": {"a": {}, "b": {}}},  # nested $id
        {"properties": {"x": {"$dynamicRef": "#node"}}, "$defs": {"a": {}}},
    ],
)
def test_schemas_that_may_resolve_otherwise_are_left_as_they_are(schema: dict[str, Any]) -> None:
    assert prune_unused_defs(schema) is schema


def test_schemas_without_definitions_are_the_same_object() -> None:
    schema = {"type": "object", "properties": {"$ref": {"type": "string"}}}  # a property named "$ref"
    assert prune_unused_defs(schema) is schema
    assert prune_unused_defs("not a schema") == "not a schema"


def test_the_real_catalogue_loses_only_unreachable_definitions() -> None:
    """Notion's server attaches the same $defs to every tool: most tools reach none of them."""
    raw = json.loads(DATA.read_text())
    before = after = 0
    for item in raw:
        (tool,) = build_tools(item["server"], [{k: v for k, v in item.items() if k != "server"}])
        listed = tool.wire["inputSchema"]
        before += len(json.dumps(item["inputSchema"], separators=(",", ":")))
        after += len(json.dumps(listed, separators=(",", ":")))
        # everything but the root definitions is the same
        strip = {k: v for k, v in item["inputSchema"].items() if k not in ("$defs", "definitions")}
        assert {k: v for k, v in listed.items() if k not in ("$defs", "definitions")} == strip
        text = json.dumps(listed)
        for container in ("$defs", "definitions"):
            for name in listed.get(container, {}):
                assert f"#/{container}/{name}" in text  # every kept definition is referenced
    assert before - after > 50_000
