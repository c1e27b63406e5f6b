"""`coffer add` probes the new server into the catalogue; `coffer serve` rejects bad flags."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from coffer.vault import catalogue, registry
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import FIXTURE


def test_add_probes_and_catalogues_the_tools(cli: CliRunner, coffer_home: Path) -> None:
    result = run_cli(cli, "add", "alpha", "--", sys.executable, str(FIXTURE), "--name", "alpha")
    assert "'alpha' serves 10 tools, 1 prompt, 1 resource" in result.stderr  # type: ignore[attr-defined]
    snap = catalogue.load_snapshot()
    assert snap is not None and "echo" in [t["name"] for t in snap.servers["alpha"].tools]
    listed = run_cli(cli, "list", "--json").stdout  # type: ignore[attr-defined]
    assert '"enabled": 10' in listed.replace(" ", "").replace('"enabled":10', '"enabled": 10')
    # recorded as refresh records it: the listing is the pinned baseline, the readme is indexed
    diff = json.loads(run_cli(cli, "diff", "alpha", "--json").stdout)  # type: ignore[attr-defined]
    assert diff["tools"] == [] and [e["event"] for e in diff["events"]][:2] == ["baseline", "config_added"]
    ask = json.loads(run_cli(cli, "ask", "where are the launch codes?", "--json").stdout)  # type: ignore[attr-defined]
    assert ask["passages"][0]["source"] == {"type": "resource", "server": "alpha", "uri": "fixture://alpha/readme"}


def test_add_no_probe_starts_nothing(cli: CliRunner, coffer_home: Path) -> None:
    run_cli(cli, "add", "alpha", "--no-probe", "--", sys.executable, str(FIXTURE))
    snap = catalogue.load_snapshot()
    assert snap is None or "alpha" not in snap.servers
    assert "alpha" in registry.load().servers


def test_a_failed_probe_keeps_the_registration_and_fails(cli: CliRunner, coffer_home: Path) -> None:
    args = ["add", "dead", "--timeout", "5", "--", sys.executable, str(FIXTURE), "--mode", "crash_start"]
    result = run_cli(cli, *args, code=6)
    errors = [line for line in result.stderr.splitlines() if line.startswith("coffer: error:")]  # type: ignore[attr-defined]
    assert len(errors) == 1
    assert "exited with code 3" in errors[0] and "fatal: the fixture refuses to start" in errors[0]
    assert "is registered" in errors[0] and "`coffer remove dead`" in errors[0]
    assert "dead" in registry.load().servers
    snap = catalogue.load_snapshot()  # remembered: `coffer serve` will not wait for it
    assert snap is not None and "exited with code 3" in str(snap.servers["dead"].error)
    listed = json.loads(run_cli(cli, "list", "--json").stdout)["servers"][0]  # type: ignore[attr-defined]
    assert listed["state"] == "did not list" and "exited with code 3" in listed["list_error"]
    assert listed["tools"] is None and "exited with code 3" in listed["reason"]  # no count, not 0/0
    shown = json.loads(run_cli(cli, "show", "dead", "--json").stdout)["server"]  # type: ignore[attr-defined]
    assert shown["catalogued"] is False and shown["tools"] == [] and shown["state"] == "did not list"


def test_add_json_is_one_document_and_fails_with_the_probe(cli: CliRunner, coffer_home: Path) -> None:
    args = ["add", "dead", "--json", "--timeout", "5", "--", sys.executable, str(FIXTURE), "--mode", "crash_start"]
    result = run_cli(cli, *args, code=6)
    doc = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert doc["version"] == 1 and doc["server"]["name"] == "dead" and doc["probe"]["ok"] is False
    ok = json.loads(run_cli(cli, "add", "alpha", "--json", "--", sys.executable, str(FIXTURE)).stdout)  # type: ignore[attr-defined]
    assert ok["probe"] == {"ok": True, "counts": {"tools": 10, "prompts": 1, "resources": 1, "resource_templates": 1}}
    assert json.loads(run_cli(cli, "disable", "alpha__echo", "--json").stdout)["changed"] is True  # type: ignore[attr-defined]
    removed = json.loads(run_cli(cli, "remove", "dead", "--json").stdout)  # type: ignore[attr-defined]
    assert removed == {"version": 1, "removed": "dead", "secrets_removed": []}


def test_serve_rejects_a_bad_port(cli: CliRunner) -> None:
    result = run_cli(cli, "serve", "--http", "70000", code=2)
    assert "invalid port 70000" in result.stderr  # type: ignore[attr-defined]


def test_demo_runs_the_whole_loop_in_a_throwaway_vault(cli: CliRunner, coffer_home: Path) -> None:
    import json

    report = json.loads(run_cli(cli, "demo", "--json").stdout)["demo"]  # type: ignore[attr-defined]
    names = [t["name"] for t in report["tools"]]
    assert names[:2] == ["coffer__search_tools", "coffer__ask"]
    assert {"demo__add_note", "demo__list_notes", "demo__echo", "demo__add", "demo__current_time"} <= set(names)
    assert report["search"]["results"][0]["name"] == "demo__current_time"
    assert report["call"]["tool"] == "demo__current_time" and not report["call"]["is_error"]
    assert report["call"]["result"].endswith("+00:00")
    assert not coffer_home.exists() or not any(coffer_home.iterdir())  # the user's vault was never touched


def test_demos_steps_read_as_whole_lines(cli: CliRunner, coffer_home: Path) -> None:
    """Each step's heading is a line of its own: as a table's title it wrapped inside the narrow table
    (`3. coffer__search_tools "what` over `time is it right now"`)."""
    lines = run_cli(cli, "demo").stdout.splitlines()  # type: ignore[attr-defined]
    assert '3. coffer__search_tools "what time is it right now"' in lines
    assert any(line.startswith("2. tools/list: 8 tools") for line in lines)
    assert any(line.startswith("4. called demo__current_time") for line in lines)
