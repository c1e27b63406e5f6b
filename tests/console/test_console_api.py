"""`coffer ui` over real HTTP on 127.0.0.1: who it answers (token, cookie, Host, Origin), that its figures
are the CLI's, and that two consoles and the CLI editing at once lose nothing in the real coffer.toml."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx2 as httpx  # the MCP SDK's own HTTP client
import pytest
import tomlkit

from tests.console.conftest import Console, console_env, start_console, stop_console


def bearer(console: Console) -> dict[str, str]:
    return {"authorization": f"Bearer {console.token}"}


def writer(console: Console) -> dict[str, str]:
    """What the page sends with a change: the token (as a cookie there), its own Origin, JSON."""
    return bearer(console) | {"origin": console.base, "content-type": "application/json"}


def coffer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coffer", *args], env=console_env(home), capture_output=True, text=True
    )


def registry_text(home: Path) -> str:
    return (home / "coffer.toml").read_text()


def disabled_tools(home: Path) -> dict[str, list[str]]:
    doc = tomlkit.parse(registry_text(home))
    return {name: list(table.get("disabled_tools", [])) for name, table in doc["servers"].items()}


def test_nothing_is_answered_without_the_token(console: Console, console_home: Path) -> None:
    before = registry_text(console_home)
    for path in ("/", "/api/servers", "/static/console.js", "/api/nope"):
        answer = httpx.get(console.base + path)
        assert answer.status_code == 401, path
        assert "token" in answer.json()["error"]
    assert httpx.get(f"{console.base}/?token=wrong").status_code == 401
    assert httpx.get(f"{console.base}/api/servers", headers={"authorization": "Bearer wrong"}).status_code == 401
    assert (
        httpx.get(f"{console.base}/api/servers", cookies={f"coffer-console-{console.port}": "wrong"}).status_code == 401
    )
    # a malformed Cookie header is no token, not a crash
    assert httpx.get(f"{console.base}/api/servers", headers={"cookie": 'x="\\'}).status_code == 401
    # the token is not enough from another site: DNS rebinding (Host) and cross-origin requests (Origin)
    rebound = httpx.get(f"{console.base}/api/servers", headers=bearer(console) | {"host": f"evil.test:{console.port}"})
    assert rebound.status_code == 403
    cross = httpx.get(f"{console.base}/api/servers", headers=bearer(console) | {"origin": "http://evil.test"})
    assert cross.status_code == 403
    # a change must be JSON from the page's own origin: a form post or a request with no Origin is refused
    target = f"{console.base}/api/servers/github/enabled"
    body = json.dumps({"enabled": False})
    assert (
        httpx.post(target, content=body, headers=bearer(console) | {"content-type": "application/json"}).status_code
        == 403
    )
    form = writer(console) | {"content-type": "application/x-www-form-urlencoded"}
    assert httpx.post(target, content="enabled=false", headers=form).status_code == 403
    assert httpx.post(target, content=body, headers=writer(console) | {"origin": "http://evil.test"}).status_code == 403
    assert registry_text(console_home) == before


def test_the_token_url_becomes_a_cookie(console: Console) -> None:
    with httpx.Client(base_url=console.base) as browser:
        entered = browser.get(f"/?token={console.token}")
        assert entered.status_code == 303 and entered.headers["location"] == "/"
        cookie = entered.headers["set-cookie"]
        assert f"coffer-console-{console.port}=" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        page = browser.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-frame-options"] == "DENY" and page.headers["referrer-policy"] == "no-referrer"
        assert browser.get("/static/console.js").status_code == 200
        assert browser.get("/api/overview").json()["registry"] == "~/vault/coffer.toml"  # the vault is ~/vault


def test_figures_are_the_clis(console: Console, console_home: Path) -> None:
    def api(path: str) -> dict:
        answer = httpx.get(console.base + path, headers=bearer(console), timeout=60)
        assert answer.status_code == 200, answer.text
        return answer.json()

    listed = json.loads(coffer(console_home, "list", "--json").stdout)["servers"]
    shown = api("/api/servers")["servers"]
    assert [{k: v for k, v in s.items() if k not in ("processes", "sandbox")} for s in shown] == listed
    states = {s["name"]: s["state"] for s in shown}
    assert states["fetch"] == "needs approval" and states["time"] == "tools held"
    assert sum(s["tools"]["total"] for s in shown) == 222

    stats = json.loads(coffer(console_home, "log", "stats", "--since", "7d", "--json").stdout)
    usage = api("/api/usage?window=7d")
    assert usage["tools"] == stats["stats"] and usage["never_called"] == stats["never_called"]
    assert sum(p["calls"] for p in usage["timeline"]["points"]) == 600 == sum(s["count"] for s in usage["servers"])
    assert sum(s["errors"] for s in usage["servers"]) == sum(t["errors"] for t in stats["stats"])

    found = json.loads(coffer(console_home, "search", "open a pull request", "-k", "5", "--json").stdout)
    hits = api("/api/search?q=open%20a%20pull%20request&k=5")
    assert [(t["name"], t["score"]) for t in hits["tools"]] == [(t["name"], t["score"]) for t in found["tools"]]
    for hit in hits["tools"]:  # the parts add up to the score, unless the hit took an implied need's place
        parts = hit["parts"]
        assert set(parts) == {"lexical", "semantic", "name", "implied"}
        if not parts["implied"]:
            assert parts["lexical"] + parts["semantic"] + parts["name"] == pytest.approx(hit["score"], abs=1e-5)

    profiles = {p["name"]: p for p in api("/api/profiles")["profiles"]}
    listed_profiles = {
        p["name"]: p for p in json.loads(coffer(console_home, "profile", "list", "--json").stdout)["profiles"]
    }
    for name in ("coding", "lean"):
        assert profiles[name]["advertised"] == listed_profiles[name]["advertised"]
        assert profiles[name]["tokens"] == listed_profiles[name]["tokens"]
    assert profiles["coding"]["clients"] == ["Claude Code"]
    assert profiles[None]["clients"] == ["Codex"] and profiles["lean"]["clients"] == ["goose"]
    assert profiles["coding"]["advertised"] <= 40 < profiles[None]["advertised"]


def test_two_consoles_and_the_cli_lose_nothing(console: Console, console_home: Path) -> None:
    """Thirty tools disabled at once, ten by each editor: every one is in coffer.toml afterwards, and
    the rest of the file (comments, other servers) is as it was."""
    other = start_console(console_home)
    try:
        listed = httpx.get(f"{console.base}/api/tools", headers=bearer(console)).json()["tools"]
        tools = [t["tool"] for t in listed if t["server"] == "github"][:20]
        tools += [t["tool"] for t in listed if t["server"] == "filesystem"][:10]
        jobs = [(console, "github", t) for t in tools[:10]] + [(other, "github", t) for t in tools[10:20]]
        cli_jobs = [f"filesystem__{t}" for t in tools[20:]]

        def by_console(job: tuple[Console, str, str]) -> int:
            where, server, tool = job
            url = f"{where.base}/api/tools/{server}/{tool}/enabled"
            return httpx.post(
                url, content=json.dumps({"enabled": False}), headers=writer(where), timeout=60
            ).status_code

        def by_cli(target: str) -> int:
            return coffer(console_home, "disable", target).returncode

        with ThreadPoolExecutor(max_workers=12) as pool:
            codes = list(pool.map(by_console, jobs))
            cli_codes = list(pool.map(by_cli, cli_jobs))
        assert codes == [200] * 20 and cli_codes == [0] * 10
        off = disabled_tools(console_home)
        assert sorted(off["github"]) == sorted(tools[:20])
        assert sorted(off["filesystem"]) == sorted(tools[20:])
        # each console sees the other's and the CLI's changes at once
        seen = httpx.get(f"{other.base}/api/servers", headers=bearer(other)).json()["servers"]
        assert {s["name"]: s["tools"]["enabled"] for s in seen}["github"] == 6
        # and turning one back on is the CLI's `enable`
        url = f"{other.base}/api/tools/github/{tools[0]}/enabled"
        answer = httpx.post(url, content=json.dumps({"enabled": True}), headers=writer(other)).json()
        assert answer == {"version": 1, "target": f"github__{tools[0]}", "enabled": True, "changed": True}
        assert tools[0] not in disabled_tools(console_home)["github"]
    finally:
        stop_console(other)


def test_approve_and_errors_are_the_clis(console: Console, console_home: Path) -> None:
    def post(path: str, body: object) -> httpx.Response:
        return httpx.post(console.base + path, content=json.dumps(body), headers=writer(console), timeout=60)

    review = httpx.get(f"{console.base}/api/servers/fetch/review", headers=bearer(console)).json()
    assert review["config"]["state"] == "changed" and '+    "--ignore-robots-txt"' in review["config"]["diff"]
    held = httpx.get(f"{console.base}/api/servers/time/review", headers=bearer(console)).json()["tools"]
    assert [t["tool"] for t in held] == ["get_current_time"] and held[0]["injection"]
    launch, *listed = post("/api/servers/fetch/approve", {}).json()["approved"]
    assert launch == "launch config" and set(listed) <= {"fetch__fetch"}  # what the new launch lists, if it can start
    assert post("/api/servers/time/approve", {"tool": "get_current_time"}).json()["approved"] == [
        "time__get_current_time"
    ]
    states = {s["name"]: s["state"] for s in json.loads(coffer(console_home, "list", "--json").stdout)["servers"]}
    assert states["fetch"] == "ok" and states["time"] == "ok"

    before = registry_text(console_home)
    unknown = post("/api/tools/github/no_such_tool/enabled", {"enabled": False})
    assert unknown.status_code == 404 and unknown.json()["error"] == (
        "unknown tool 'no_such_tool' on server 'github' (see `coffer show github`)"
    )
    assert post("/api/servers/nope/enabled", {"enabled": False}).status_code == 404
    assert post("/api/servers/github/enabled", {"enabled": "no"}).status_code == 400
    bad = httpx.post(f"{console.base}/api/servers/github/enabled", content="{", headers=writer(console))
    assert bad.status_code == 400 and bad.json()["error"] == "the body is not JSON"
    assert httpx.get(f"{console.base}/api/usage?window=2y", headers=bearer(console)).status_code == 400
    assert httpx.get(f"{console.base}/api/search?q=", headers=bearer(console)).json()["error"] == "the query is empty"
    assert httpx.get(f"{console.base}/api/nope", headers=bearer(console)).status_code == 404
    assert registry_text(console_home) == before


def test_a_port_in_use_is_one_line(console: Console, console_home: Path) -> None:
    taken = coffer(console_home, "ui", "--no-browser", "--port", str(console.port))
    assert taken.returncode != 0
    assert taken.stderr.strip().splitlines() == [
        f"coffer: error: cannot serve on 127.0.0.1:{console.port}: Address already in use"
    ]
    bad = coffer(console_home, "ui", "--no-browser", "--port", "70000")
    assert bad.returncode == 2 and "invalid --port 70000" in bad.stderr


@pytest.mark.anyio
async def test_a_running_engine_is_shown(coffer_home: Path) -> None:
    """With `coffer serve` open, the servers page has each upstream's pid, start and memory from the
    engine, and the overview its session."""
    from tests.fixtures.gateway_harness import add_fixture, serve

    add_fixture(coffer_home, "alpha")
    add_fixture(coffer_home, "beta", "crash_start")
    running = start_console(coffer_home)
    try:
        async with serve(coffer_home) as served:
            await served.session.list_tools()
            async with httpx.AsyncClient(base_url=running.base, headers=bearer(running)) as client:
                for _ in range(200):
                    rows = {s["name"]: s for s in (await client.get("/api/servers")).json()["servers"]}
                    if rows["alpha"]["processes"] and rows["beta"]["processes"][0]["last_error"]:
                        break
                    await anyio.sleep(0.05)
                alpha = rows["alpha"]["processes"][0]
                assert alpha["state"] == "ready" and alpha["pids"] and alpha["ready_since"] > 0 and alpha["pss_kib"] > 0
                assert "exit" in rows["beta"]["processes"][0]["last_error"]  # the server's last error, as doctor has it
                overview = (await client.get("/api/overview")).json()
                assert len(overview["engine"]["sessions"]) == 1
    finally:
        stop_console(running)


def test_it_opens_the_desktop_browser_and_never_a_terminal_one(console_home: Path, tmp_path: Path) -> None:
    """With a display, the URL goes to the user's browser ($BROWSER, as Python's webbrowser reads it);
    with none (a server, an SSH session) nothing is opened and the printed URL is the way in."""
    opened = tmp_path / "opened"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf %s "$1" > {opened}\n')
    browser.chmod(0o755)
    desktop = start_console(console_home, browser=True, env={"DISPLAY": ":0", "BROWSER": str(browser)})
    try:
        for _ in range(200):
            if opened.exists() and opened.read_text():
                break
            time.sleep(0.05)
        assert opened.read_text() == desktop.url
        assert httpx.get(desktop.url, follow_redirects=True).status_code == 200
    finally:
        stop_console(desktop)
    opened.unlink()
    headless = start_console(
        console_home, browser=True, env={"DISPLAY": "", "WAYLAND_DISPLAY": "", "BROWSER": str(browser)}
    )
    try:
        assert httpx.get(f"{headless.base}/api/overview", headers=bearer(headless)).status_code == 200
    finally:
        stop_console(headless)
    assert headless.proc.stderr is not None
    assert "no display here: open the URL above in a browser" in headless.proc.stderr.read()
    assert not opened.exists()


def test_prune_and_undo_are_the_clis(console: Console, console_home: Path) -> None:
    def post(path: str, body: object) -> httpx.Response:
        return httpx.post(console.base + path, content=json.dumps(body), headers=writer(console), timeout=60)

    before = tomlkit.parse(registry_text(console_home))["profiles"]["coding"].unwrap()
    pruned = post("/api/profiles/coding/prune", {"unused_for_days": 30})
    assert pruned.status_code == 200, pruned.text
    data = pruned.json()
    called = {
        (r["server"], r["tool"]) for r in json.loads(coffer(console_home, "log", "stats", "--json").stdout)["stats"]
    }
    assert data["kept"] and all(tuple(name.split("__", 1)) in called for name in data["kept"])
    assert data["left_out"] and not any(tuple(name.split("__", 1)) in called for name in data["left_out"])
    assert tomlkit.parse(registry_text(console_home))["profiles"]["coding"]["tools"].unwrap() == data["kept"]
    assert post("/api/profiles/coding/undo", {}).json()["restored"]["name"] == "coding"
    assert tomlkit.parse(registry_text(console_home))["profiles"]["coding"].unwrap() == before
    again = post("/api/profiles/coding/undo", {})
    assert again.status_code == 404 and again.json()["error"] == "profile 'coding' has no prune to undo"
    assert post("/api/profiles/coding/prune", {"unused_for_days": 0}).status_code == 400
    # a profile that does not exist yet is made from every visible tool, as `coffer profile prune` does
    fresh = post("/api/profiles/fresh/prune", {"unused_for_days": 30}).json()
    assert fresh["created"] is True and "fresh" in tomlkit.parse(registry_text(console_home))["profiles"]
    assert post("/api/profiles/fresh/undo", {}).json()["restored"] is None
    assert "fresh" not in tomlkit.parse(registry_text(console_home))["profiles"]
