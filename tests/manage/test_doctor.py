"""`coffer doctor` and `coffer refresh` through the real CLI, starting real fixture upstreams over stdio."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
import tomlkit
from typer.testing import CliRunner

from coffer.gateway import advertise
from coffer.gateway.pool import probe
from coffer.manage import servers
from coffer.trust.pinning import Pins
from coffer.vault import catalogue, registry
from tests.conftest import run_cli
from tests.fixtures.gateway_harness import add_fixture

FAULTY = Path(__file__).parents[1] / "fixtures" / "faulty_server.py"
RESOURCES = Path(__file__).parents[1] / "fixtures" / "resource_server.py"
CANARY = "canary-secret-value-81f3"


def add_faulty(
    home: Path, name: str, mode: str, env: dict[str, str] | None = None, args: list[str] | None = None
) -> None:
    argv = [str(FAULTY), "--mode", mode, *(args or [])]
    cfg = registry.ServerConfig(name=name, command=sys.executable, args=argv, timeout=10.0, env=env or {})
    servers.add_server(cfg, path=home / "coffer.toml")


def hand_edit(home: Path, server: str, key: str, value: object) -> None:
    """Change the registry the way an editor (or an agent) would: not through `coffer`, so not approved."""
    path = home / "coffer.toml"
    doc = tomlkit.parse(path.read_text())
    doc["servers"][server][key] = value
    path.write_text(tomlkit.dumps(doc))


def test_doctor_reports_every_server(cli: CliRunner, coffer_home: Path, tmp_path: Path) -> None:
    events = tmp_path / "events.log"
    add_fixture(coffer_home, "good")
    add_fixture(coffer_home, "broken", "crash_start")
    add_faulty(coffer_home, "long", "long_name")
    add_faulty(coffer_home, "leaky", "env_stderr", env={"API_TOKEN": CANARY})
    servers.add_server(registry.ServerConfig(name="missing", command="no-such-program-7f2e"))
    add_fixture(coffer_home, "off", enabled=False)
    add_fixture(coffer_home, "edited", events=events)
    hand_edit(coffer_home, "edited", "args", [*registry.load().get("edited").args, "--mode", "normal"])
    before = (coffer_home / "coffer.toml").read_bytes()

    result = run_cli(cli, "doctor", "--json", code=1)
    assert CANARY not in result.stdout + result.stderr  # a server's stderr tail never leaks its secrets
    report = json.loads(result.stdout)
    by = {s["name"]: s for s in report["servers"]}
    assert [s["name"] for s in report["servers"]] == ["good", "broken", "long", "leaky", "missing", "off", "edited"]
    assert {n: s["status"] for n, s in by.items()} == {
        "good": "ok",
        "broken": "failed",
        "long": "ok",
        "leaky": "failed",
        "missing": "failed",
        "off": "disabled",
        "edited": "unapproved",
    }
    assert sorted(report["failed"]) == ["broken", "edited", "leaky", "missing"]

    good = by["good"]
    assert good["tools"] == good["advertised"] == 10 and good["init_seconds"] > 0 and good["tokens_from"] == "live"
    assert good["name_problems"] == [] and good["error"] is None

    assert by["broken"]["error_class"] == "exited"
    assert "fatal: the fixture refuses to start" in by["broken"]["stderr_tail"]
    assert by["leaky"]["stderr_tail"] and any("API_TOKEN=****" in line for line in by["leaky"]["stderr_tail"])
    assert by["missing"]["error"] == "command not found: no-such-program-7f2e"
    assert "coffer approve edited" in by["edited"]["error"]
    assert not events.exists()  # an unapproved launch config is never started

    (problem,) = by["long"]["name_problems"]
    assert "is exposed as 'long__" in problem and "(too long)" in problem
    assert report["shared_tool_names"]["echo"] == ["good", "long"]

    tokens = report["tokens"]
    assert tokens["total"] == tokens["builtins"] + sum(s["tokens"] for s in report["servers"]) > tokens["builtins"] > 0
    assert [c["name"] for c in tokens["costliest"]] == ["good", "long"]
    assert tokens["costliest"][0]["tokens"] == good["tokens"] > by["long"]["tokens"] > 0

    # doctor reads: no snapshot written, registry untouched
    assert not (coffer_home / "catalogue.json").exists()
    assert (coffer_home / "coffer.toml").read_bytes() == before

    # the live token count matches what the catalogue computes from a refreshed snapshot
    run_cli(cli, "refresh", "good")
    snap = catalogue.load_snapshot()
    assert advertise.tokens([t.wire for t in catalogue.server_tools(snap, "good")]) == good["tokens"]


def test_doctor_counts_only_what_agents_see(cli: CliRunner, coffer_home: Path) -> None:
    """Advertised tools and token cost follow the gateway's rule: held tools and unapproved servers cost nothing."""
    good = add_fixture(coffer_home, "good")
    live = anyio.run(probe, good)["tools"]  # what the fixture serves (probe records nothing)
    echo = next(t for t in live if t["name"] == "echo")
    with Pins.open(new_tools="allow") as pins:
        baseline = [{**echo, "description": "The definition the user approved."}]
        pins.observe("good", catalogue.build_tools("good", baseline))
        assert pins.observe("good", catalogue.build_tools("good", live)) == {"good__echo"}  # now held
    add_fixture(coffer_home, "edited")
    catalogue.save_server("edited", tools=live)  # listed once, then its launch line was edited by hand
    hand_edit(coffer_home, "edited", "args", [*registry.load().get("edited").args, "--mode", "normal"])

    by = {s["name"]: s for s in json.loads(run_cli(cli, "doctor", "--json", code=1).stdout)["servers"]}
    assert by["good"]["status"] == "ok" and by["good"]["tools"] == len(live)
    assert by["good"]["advertised"] == len(live) - 1
    assert "1 tool(s) held until approved (`coffer diff good`)" in by["good"]["notes"]
    visible = [t for t in catalogue.build_tools("good", live) if t.tool != "echo"]
    assert by["good"]["tokens"] == advertise.tokens([t.wire for t in visible])
    edited = by["edited"]
    assert edited["status"] == "unapproved" and edited["tokens_from"] == "snapshot"
    assert edited["advertised"] == edited["tokens"] == 0


def test_doctor_human_output(cli: CliRunner, coffer_home: Path) -> None:
    servers.add_server(registry.ServerConfig(name="missing", command="no-such-program-7f2e"))
    catalogue.save_server("missing", tools=[{"name": "t", "description": "d" * 400, "inputSchema": {"type": "object"}}])
    result = run_cli(cli, "doctor", code=1)
    assert "missing" in result.stdout and "failed" in result.stdout and "(snapshot)" in result.stdout
    err = result.stderr.replace("\n", " ")
    assert "missing: command not found: no-such-program-7f2e" in err
    assert "advertised schemas: " in err and "costliest: missing" in err


def test_doctor_empty_vault(cli: CliRunner, coffer_home: Path) -> None:
    result = run_cli(cli, "doctor")
    assert "no servers yet" in result.stderr
    assert json.loads(run_cli(cli, "doctor", "--json").stdout)["servers"] == []


def test_refresh_rewrites_the_snapshot(cli: CliRunner, coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha")
    add_fixture(coffer_home, "beta", "crash_start")
    add_fixture(coffer_home, "gamma", enabled=False)
    old = [{"name": "kept", "description": "from an earlier listing", "inputSchema": {"type": "object"}}]
    catalogue.save_server("beta", tools=old)
    catalogue.save_server("alpha", tools=old)

    result = run_cli(cli, "refresh", "--jobs", "1", "--json", code=1)
    rows = {r["name"]: r for r in json.loads(result.stdout)["servers"]}
    assert set(rows) == {"alpha", "beta"}  # enabled servers only
    assert rows["alpha"]["status"] == "ok" and rows["alpha"]["tools"] == 10
    assert rows["beta"]["status"] == "failed" and "fatal: the fixture refuses to start" in rows["beta"]["stderr_tail"]

    snap = catalogue.load_snapshot()
    assert snap is not None
    assert {t["name"] for t in snap.servers["alpha"].tools} >= {"echo", "add", "grow"}
    assert [t["name"] for t in snap.servers["alpha"].prompts] == ["greet"]
    assert snap.servers["beta"].tools == old  # a failed start keeps the last good listing
    assert "gamma" not in snap.servers

    human = run_cli(cli, "refresh", "gamma")  # named: refreshed even though disabled
    assert "refreshed 1 of 1 server(s)" in human.stderr.replace("\n", "")
    listed = {s["name"]: s for s in json.loads(run_cli(cli, "list", "--json").stdout)["servers"]}
    assert listed["gamma"]["tools"] == {"enabled": 10, "total": 10}
    assert listed["alpha"]["tools"]["total"] == 10


def test_refresh_pins_tools_and_indexes_resources(cli: CliRunner, coffer_home: Path, tmp_path: Path) -> None:
    """A refresh records listings with the pins (a rug pull shows in `coffer diff` at once) and re-indexes resources."""
    servers.add_server(registry.ServerConfig(name="res", command=sys.executable, args=[str(RESOURCES)]))
    update = tmp_path / "upstream-updated"
    add_faulty(coffer_home, "rug", "rugpull", args=["--mutated-if", str(update)])

    rows = {r["name"]: r for r in json.loads(run_cli(cli, "refresh", "--json").stdout)["servers"]}
    assert rows["res"]["status"] == rows["rug"]["status"] == "ok"
    assert rows["res"]["resources_indexed"] == 3  # the PNG and the unreadable resource are skipped
    assert rows["rug"]["resources_indexed"] == 0 and rows["rug"]["held"] == []
    ask = json.loads(run_cli(cli, "ask", "how do I roll back a bad production deploy?", "--json").stdout)
    assert ask["passages"][0]["source"] == {"type": "resource", "server": "res", "uri": "docs://runbook"}

    update.touch()  # the upstream updated itself: the next start serves a different echo and a new tool
    result = run_cli(cli, "refresh", "rug")
    # echo changed; steal_data is new and reaches for credentials (coffer.trust.injection): both held
    held = "rug: held until approved (changed or new): rug__echo, rug__steal_data; see `coffer diff rug`"
    assert held in result.stderr
    diff = json.loads(run_cli(cli, "diff", "rug", "--json").stdout)
    echo, steal = diff["tools"]
    assert echo["name"] == "rug__echo" and echo["state"] == "held" and "evil.example" in echo["diff"]
    assert steal["name"] == "rug__steal_data" and any("secrets" in r for r in steal["injection"])
    assert {e["event"] for e in diff["events"][:2]} == {"held_changed", "held_injection"}
    found = json.loads(run_cli(cli, "search", "echo text", "--json", "-k", "20").stdout)
    names = {t["name"] for t in found["tools"]}
    assert "rug__echo" not in names and "res__echo" in names  # held: not searchable either
    assert "rug__steal_data" in {t.name for t in catalogue.server_tools(catalogue.load_snapshot(), "rug")}

    run_cli(cli, "approve", "rug__echo")
    run_cli(cli, "approve", "rug__steal_data")
    rows = {r["name"]: r for r in json.loads(run_cli(cli, "refresh", "--json").stdout)["servers"]}
    assert rows["rug"]["held"] == [] and json.loads(run_cli(cli, "diff", "rug", "--json").stdout)["tools"] == []


def test_refresh_errors(cli: CliRunner, coffer_home: Path, tmp_path: Path) -> None:
    assert "no enabled servers" in run_cli(cli, "refresh").stderr
    result = run_cli(cli, "refresh", "ghost", code=3)
    assert result.stderr.strip() == "coffer: error: unknown server 'ghost' (see `coffer list`)"
    events = tmp_path / "events.log"
    add_fixture(coffer_home, "edited", events=events)
    hand_edit(coffer_home, "edited", "args", [*registry.load().get("edited").args, "--mode", "normal"])
    out = json.loads(run_cli(cli, "refresh", "edited", "--json", code=1).stdout)["servers"]
    assert out[0]["status"] == "unapproved" and not events.exists()
    run_cli(cli, "approve", "edited")
    assert json.loads(run_cli(cli, "refresh", "--json").stdout)["servers"][0]["status"] == "ok"
    assert events.exists()


def test_one_token_count_everywhere(cli: CliRunner, coffer_home: Path) -> None:
    """doctor's total, the no-profile row, `coffer list` and the console's tools count the same way: each tool as
    tools/list sends it, in tokens of the result cap's tokenizer (they disagreed: 6,339 against 10,841)."""
    add_fixture(coffer_home, "good")
    add_fixture(coffer_home, "other")
    run_cli(cli, "refresh")
    report = json.loads(run_cli(cli, "doctor", "--json").stdout)
    tokens = report["tokens"]
    assert tokens["total"] == tokens["profiles"]["(none)"]["tokens"]
    listed = {s["name"]: s for s in json.loads(run_cli(cli, "list", "--json").stdout)["servers"]}
    by = {s["name"]: s for s in report["servers"]}
    assert listed["good"]["tokens"] == by["good"]["tokens"] > 0
    from coffer.manage.tools import tool_rows  # the console's tools page

    assert sum(t["tokens"] for t in tool_rows() if t["server"] == "good") == by["good"]["tokens"]


def test_doctor_says_a_catalogued_failure_is_an_earlier_runs(
    cli: CliRunner, coffer_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that failed for want of a variable, and lists once it is set: doctor says it lists now and
    that the catalogue's failure is an earlier run's, not both as if current (a new user's trial)."""
    monkeypatch.delenv("COFFER_TEST_LATER", raising=False)
    add_fixture(coffer_home, "later", env={"TOKEN": "${COFFER_TEST_LATER}"})
    run_cli(cli, "refresh", "later", code=1)  # the variable is not set: catalogued as a failure
    monkeypatch.setenv("COFFER_TEST_LATER", "set")
    (row,) = json.loads(run_cli(cli, "doctor", "--json").stdout)["servers"]
    assert row["status"] == "ok"
    (note,) = [n for n in row["notes"] if "catalogue" in n]
    assert note.startswith("listed now, but not yet in the catalogue (an earlier run's failure: ")
    assert "coffer refresh later" in note
    run_cli(cli, "refresh", "later")
    (row,) = json.loads(run_cli(cli, "doctor", "--json").stdout)["servers"]
    assert not [n for n in row["notes"] if "catalogue" in n]
