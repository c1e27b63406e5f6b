"""The use cases behind `coffer add` and `coffer import`, called as the CLI (and the console) call them:
real fixture upstreams started once, a real coffer.toml, catalogue and pins."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from coffer.errors import ConflictError
from coffer.manage import servers
from coffer.trust.pinning import Pins
from coffer.vault import catalogue, registry
from tests.fixtures.gateway_harness import FIXTURE


def fixture(name: str, prefix: str | None = None, mode: str = "normal") -> registry.ServerConfig:
    args = [str(FIXTURE), "--name", name, "--mode", mode]
    return registry.ServerConfig(name=name, command=sys.executable, args=args, prefix=prefix, timeout=10)


def test_add_registers_approves_and_lists_once(coffer_home: Path) -> None:
    told: list[str] = []
    added = servers.add(fixture("alpha"), on_registered=lambda cfg: told.append(cfg.name))
    assert told == ["alpha"] and added.failure is None
    assert added.counts is not None and added.counts["tools"] >= 5
    assert added.probe == {"ok": True, "counts": added.counts}
    snap = catalogue.load_snapshot()
    assert snap is not None and {t["name"] for t in snap.servers["alpha"].tools} >= {"echo", "add"}
    with Pins.open(new_tools="allow") as pins:
        assert pins.server_state(registry.load().get("alpha")) == "approved"


def test_add_without_probe_or_disabled_starts_nothing(coffer_home: Path) -> None:
    assert servers.add(fixture("quiet"), probe=False).probe is None
    off = fixture("off")
    off.enabled = False
    assert servers.add(off).probe is None
    snap = catalogue.load_snapshot()
    assert snap is None or not ({"quiet", "off"} & set(snap.servers))


def test_a_server_that_cannot_list_stays_registered_with_the_reason(coffer_home: Path) -> None:
    cfg = registry.ServerConfig(name="broken", command=sys.executable, args=["-c", "raise SystemExit(3)"], timeout=5)
    added = servers.add(cfg)
    assert added.failure is not None and added.counts is None
    assert "'broken' is registered, but it could not list its tools" in str(added.failure)
    assert "coffer remove broken" in str(added.failure)
    assert added.probe == {"ok": False, "error": added.failure.cause}
    assert "broken" in registry.load().servers


def test_a_clash_rolls_the_add_back(coffer_home: Path) -> None:
    servers.add(fixture("alpha", prefix=""))
    before = (coffer_home / "coffer.toml").read_text()
    with pytest.raises(ConflictError, match=r"not added: 'beta' would expose names .*echo"):
        servers.add(fixture("beta", prefix=""))
    assert (coffer_home / "coffer.toml").read_text() == before
    snap = catalogue.load_snapshot()
    assert snap is not None and "beta" not in snap.servers


def test_import_client_plans_adds_lists_and_reports_progress(coffer_home: Path, tmp_path: Path) -> None:
    source = tmp_path / "mcp.json"
    entry = {"command": sys.executable, "args": [str(FIXTURE), "--name", "imported"]}
    source.write_text(json.dumps({"mcpServers": {"imported": entry, "taken": entry | {"args": ["x"]}}}))
    servers.add(fixture("taken"), probe=False)
    bars: list[tuple[int, str]] = []
    ticks: list[str] = []

    class Bar:
        def __init__(self, total: int, label: str) -> None:
            bars.append((total, label))

        def __enter__(self) -> object:
            return ticks.append

        def __exit__(self, *exc: object) -> None:
            return None

    done = servers.import_client("json", source, progress=Bar)
    actions = {item.name: item.action for item in done.plan.items}
    assert actions["imported"] == "added" and actions["taken"] == "skip"
    assert bars == [(1, "listing the imported servers")] and ticks == ["imported"]
    assert [(r.name, r.status) for r in done.probed] == [("imported", "ok")]
    assert done.moved == []

    dry = servers.import_client("json", source, dry_run=True)
    assert dry.probed == [] and all(item.action != "added" for item in dry.plan.items)


EVERYTHING = Path(__file__).resolve().parents[2] / ".ci" / "node" / "node_modules" / "@modelcontextprotocol"
EVERYTHING = EVERYTHING / "server-everything" / "dist" / "index.js"


@pytest.mark.anyio
@pytest.mark.skipif(not EVERYTHING.exists(), reason="run .ci/run for server-everything")
async def test_add_probes_as_the_engine_will_run_the_server(coffer_home: Path) -> None:
    """server-everything shows its elicitation, sampling and roots tools only to a client that declares
    them: `add` probes it told what the engine tells it, so the first session after the add sees them all
    from the snapshot (Claude Code and Codex ignore list_changed, so a short first list stays short)."""
    import anyio
    import mcp_types as types

    from tests.fixtures.gateway_harness import serve

    cfg = registry.ServerConfig(name="ev", command="node", args=[str(EVERYTHING), "stdio"], timeout=30)
    added = await anyio.to_thread.run_sync(lambda: servers.add(cfg))
    assert added.failure is None
    snap = catalogue.load_snapshot()
    assert snap is not None
    listed = {t["name"] for t in snap.servers["ev"].tools}
    assert {"trigger-elicitation-request", "trigger-sampling-request", "get-roots-list"} <= listed
    assert {"elicitation", "sampling", "roots"} <= set(snap.servers["ev"].told)

    async def sample(ctx: object, params: object) -> types.CreateMessageResult:
        content = types.TextContent(type="text", text="ok")
        return types.CreateMessageResult(role="assistant", content=content, model="test")

    async def elicit(ctx: object, params: object) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async def roots(ctx: object) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[])

    async with serve(coffer_home, sampling=sample, elicitation_callback=elicit, list_roots_callback=roots) as s:
        first = set(await s.tool_names())
    assert {f"ev__{name}" for name in listed} <= first
