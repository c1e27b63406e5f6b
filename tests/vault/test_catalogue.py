"""Exposed names and the snapshot: valid, short, unique and stable."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from coffer.errors import RegistryError
from coffer.manage import servers
from coffer.trust import curation
from coffer.trust.pinning import Pins
from coffer.vault import catalogue, registry

DATA = Path(__file__).parents[1] / "data" / "real-servers.json"
CLIENT_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def real_tools() -> list[dict]:
    return json.loads(DATA.read_text())


def tool(name: str) -> dict:
    return {"name": name, "description": f"about {name}", "inputSchema": {"type": "object"}}


def test_plain_names_are_prefixed_unchanged() -> None:
    assert catalogue.exposed_name("github", "create_pull_request") == "github__create_pull_request"


def test_long_and_invalid_names_get_a_stable_short_form() -> None:
    long_name = "x" * 200
    first = catalogue.exposed_name("srv", long_name)
    assert first == catalogue.exposed_name("srv", long_name)
    assert len(first) <= catalogue.MAX_NAME and first.startswith("srv__xxx")
    dotted = catalogue.exposed_name("srv", "files.read")
    assert catalogue.VALID_NAME.match(dotted) and dotted.startswith("srv__files_read-")
    assert catalogue.exposed_name("srv", "") != catalogue.exposed_name("srv", "_")


def test_clashes_after_cleaning_get_distinct_names() -> None:
    tools = catalogue.build_tools("s", [tool("a.b"), tool("a_b"), tool("a b"), tool("y" * 80), tool("y" * 81)])
    names = [t.name for t in tools]
    assert len(set(names)) == len(names)
    assert "s__a_b" in names  # the name that was already valid keeps it
    assert all(CLIENT_PATTERN.match("mcp__coffer__" + n) for n in names)
    # order of arrival does not change the outcome
    again = catalogue.build_tools("s", list(reversed([t.raw for t in tools])))
    assert [t.name for t in again] == names


def test_real_catalogue_names_fit_client_limits() -> None:
    by_server: dict[str, list[dict]] = {}
    for entry in real_tools():
        by_server.setdefault(entry["server"], []).append(entry)
    names: list[str] = []
    for server, tools in by_server.items():
        names += [t.name for t in catalogue.build_tools(server, tools)]
    assert len(names) == 222
    assert len(set(names)) == 222
    bare = Counter(t["name"] for t in real_tools())
    assert sum(1 for c in bare.values() if c > 1) >= 1  # real clashes exist and are resolved by the prefix
    assert all(CLIENT_PATTERN.match("mcp__coffer__" + n) for n in names)


def test_snapshot_roundtrip_and_curated_view(coffer_home: Path) -> None:
    assert catalogue.load_snapshot() is None
    catalogue.save_server("b", tools=[tool("two"), tool("one")])
    catalogue.save_server("a", tools=[tool("zed")], resources=[{"uri": "file:///x", "name": "x"}])
    servers.add_server(registry.ServerConfig(name="a", command="echo"))
    servers.add_server(registry.ServerConfig(name="b", command="echo", disabled_tools=["two"]))
    servers.add_server(registry.ServerConfig(name="c", command="echo", enabled=False))
    snap = catalogue.load_snapshot()
    assert snap is not None and sorted(snap.servers) == ["a", "b"]
    assert snap.servers["a"].resources == [{"uri": "file:///x", "name": "x"}]
    raw = json.loads((coffer_home / "catalogue.json").read_text())
    assert raw["servers"]["b"]["names"] == {"b__one": "one", "b__two": "two"}
    reg = registry.load()
    with Pins.open(new_tools="allow") as pins:
        assert [t.name for t in curation.visible_tools(reg, snap, pins)] == ["a__zed", "b__one"]
    catalogue.drop_server("a")
    assert sorted(catalogue.load_snapshot().servers) == ["b"]  # type: ignore[union-attr]


def test_damaged_snapshot_is_rebuilt_on_save(coffer_home: Path) -> None:
    coffer_home.mkdir(parents=True)
    (coffer_home / "catalogue.json").write_text("{not json")
    with pytest.raises(RegistryError, match="coffer refresh"):
        catalogue.load_snapshot()
    catalogue.save_server("a", tools=[tool("x")])
    assert catalogue.load_snapshot() is not None


def test_the_snapshot_keeps_what_a_server_listed_for_each_set_of_capabilities(coffer_home: Path) -> None:
    """A server may list some tools only to clients that can take them: what it listed for each set of
    capabilities it was told of is kept (the definitions once), until it lists otherwise for the same set."""
    everything = {"told": ["elicitation", "extensions", "roots", "sampling"]}
    catalogue.save_server("cs", tools=[tool("echo"), tool("get_roots")], meta=everything)
    catalogue.save_server("cs", tools=[tool("echo")], meta={"told": []})
    entry = catalogue.load_snapshot().servers["cs"]  # type: ignore[union-attr]
    assert [t["name"] for t in entry.tools] == ["echo"] and [t["name"] for t in entry.other_tools] == ["get_roots"]
    assert [t["name"] for t in entry.tools_for(everything["told"]) or []] == ["echo", "get_roots"]
    assert [t["name"] for t in entry.tools_for([]) or []] == ["echo"]
    assert entry.tools_for(["roots"]) is None  # never listed for that: the caller says so
    catalogue.save_server("cs", tools=[tool("echo"), tool("grep")], meta={"told": []})  # it changed: the rest is stale
    entry = catalogue.load_snapshot().servers["cs"]  # type: ignore[union-attr]
    assert entry.tools_for(everything["told"]) is None and entry.other_tools == []
