"""The console in a real browser: Playwright driving the system's Chromium (`.ci/run` installs Debian's
`chromium`) through every page of `coffer ui` on the 16 real servers' vault, clicking what a person
clicks and checking coffer.toml and the trust store afterwards. Screenshots go to $COFFER_SCREENSHOTS
(else the test's temporary folder).

Without Playwright or Chromium these tests skip, except where COFFER_REQUIRE_BROWSER=1 (CI) makes
that a failure.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from coffer.log.calls import open_log
from coffer.manage import servers, states
from coffer.upstreams import sandbox as coffer_sandbox
from coffer.vault import catalogue, registry
from tests.console.conftest import Console

# as the machine's own check starts it: headless, and nothing that reaches for the network
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    return os.environ.get("COFFER_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def require_chromium() -> str:
    """The system's Chromium for Playwright; the test is skipped without it or Playwright, unless
    COFFER_REQUIRE_BROWSER=1 (CI) makes that a failure."""
    required = os.environ.get("COFFER_REQUIRE_BROWSER") == "1"
    try:
        import playwright  # noqa: F401
    except ImportError:
        if required:
            raise
        pytest.skip("Playwright is not installed (pip install playwright)")
    path = chromium_path()
    if path is None:
        if required:
            raise AssertionError("COFFER_REQUIRE_BROWSER=1 but no chromium on PATH")
        pytest.skip("no chromium on PATH (apt install chromium)")
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    where = Path(os.environ.get("COFFER_SCREENSHOTS") or tmp_path / "screenshots")
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture
def page(browser: Any, console: Console) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    tab.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    tab.goto(console.url)
    tab.wait_for_selector("main[aria-busy=false] #servers")
    yield tab
    context.close()
    assert problems == [], problems  # no script error, no refused resource, no CSP violation


def registry_doc(home: Path) -> Any:
    return tomlkit.parse((home / "coffer.toml").read_text())


def shoot(tab: Any, shots: Path, name: str) -> None:
    path = shots / f"console-{name}.png"
    tab.screenshot(path=str(path))
    assert path.stat().st_size > 10_000  # a rendered page, not a blank one


def wait_notice(tab: Any, text: str) -> None:
    tab.wait_for_selector(f"#notice:not([hidden]):has-text('{text}')")


def test_servers_page_reviews_and_approves(page: Any, console_home: Path, shots: Path) -> None:
    assert "token" not in page.url  # the token went into a cookie; the address bar no longer shows it
    rows = page.locator("#servers tbody tr[data-server]")
    assert rows.count() == 16
    assert page.locator("tr[data-server=fetch] .badge").inner_text() == "needs approval"
    assert page.locator("tr[data-server=time] .badge").inner_text() == "tools held"
    assert page.locator("tr[data-server=github] td").nth(3).inner_text() == "26/26"
    launch = page.locator("tr[data-server=filesystem] details.launch")  # too long to show whole at first
    whole = "npx -y @modelcontextprotocol/server-filesystem /tmp/projects/coffer /tmp/projects/notes"
    assert launch.locator("summary").inner_text().endswith("…") and not launch.locator("code").is_visible()
    launch.locator("summary").click()
    assert launch.locator("code").is_visible() and launch.locator("code").inner_text() == whole
    assert page.locator("tr[data-server=time] div.launch").inner_text() == "uvx mcp-server-time --local-timezone UTC"
    sandbox = page.locator("tr[data-server=filesystem] td.sandbox")  # what its sandbox lets it do, as `show` says
    if coffer_sandbox.support().available:
        assert "confined by" in sandbox.inner_text() and "may write:" in sandbox.inner_text()
        assert "may reach: ports 53, 80, 443" in (sandbox.locator("div").first.get_attribute("title") or "")
    shoot(page, shots, "servers")

    page.locator("tr[data-server=time] button:has-text('Review')").click()
    review = page.locator("[data-review=time]")
    review.wait_for()
    assert "time__get_current_time: definition changed" in review.inner_text()
    assert "held: its" in review.inner_text()  # what the injection scan found
    assert review.locator("pre.diff .add").count() >= 1
    shoot(page, shots, "review")
    review.locator("button:has-text('Approve time')").click()
    wait_notice(page, "approved time")
    page.wait_for_selector("tr[data-server=time] .badge:has-text('ok')")

    page.locator("tr[data-server=fetch] button:has-text('Review')").click()
    page.locator("[data-review=fetch]").wait_for()
    assert "Launch config: changed since approval" in page.locator("[data-review=fetch]").inner_text()
    page.locator("[data-review=fetch] button").click()
    page.wait_for_selector("tr[data-server=fetch] .badge:has-text('ok')")
    listed = {row["name"]: row["state"] for row in states.server_rows()}
    assert listed["time"] == listed["fetch"] == "ok"

    page.get_by_role("switch", name="enable server notion").click()
    wait_notice(page, "notion disabled")
    assert registry_doc(console_home)["servers"]["notion"]["enabled"] is False
    assert registry.load().servers["notion"].enabled is False
    page.wait_for_selector("tr[data-server=notion] .badge:has-text('disabled')")


def test_servers_page_turns_code_mode_on_and_counts_what_scripts_may_call(page: Any, console_home: Path) -> None:
    from coffer.codemode import policy
    from coffer.manage.tools import set_script_tools

    # the recorded catalogue carries no readOnlyHint: the user allows two of github's tools by name
    assert set_script_tools("github", ["create_issue", "get_issue"])
    github = registry.load().servers["github"]
    tools = catalogue.server_tools(catalogue.load_snapshot(), "github", github.exposed_prefix)
    readable = sum(policy.refusal(github, t.tool, t.raw) is None for t in tools)
    assert readable == 2 and len(tools) == 26
    assert page.locator("tr[data-server=github] .script-tools").count() == 0
    page.get_by_role("switch", name="code mode (coffer__run)").click()
    wait_notice(page, "code mode on")
    assert registry_doc(console_home)["settings"]["code_mode"] is True
    page.wait_for_selector("tr[data-server=github] .script-tools")
    assert page.locator("tr[data-server=github] .script-tools").inner_text() == f"{readable} in scripts"
    page.get_by_role("switch", name="code mode (coffer__run)").click()
    wait_notice(page, "code mode off")
    assert registry_doc(console_home)["settings"]["code_mode"] is False


def test_tools_page_toggles_and_searches(page: Any, console_home: Path, shots: Path) -> None:
    page.click("nav >> text=Tools")
    page.wait_for_selector("main[data-page=tools][aria-busy=false] #tools")
    assert page.locator("#tools tbody tr").count() == 222
    listed = page.locator("#enabled-count").inner_text()  # counted as Profiles counts: built-ins included
    enabled = int(re.search(r"(\d+) enabled \+ (\d+) built-ins", listed).group(1))  # type: ignore[union-attr]
    builtins_n = int(re.search(r"\+ (\d+) built-ins", listed).group(1))  # type: ignore[union-attr]
    assert listed.startswith(str(enabled + builtins_n)) and builtins_n >= 3
    page.get_by_label("filter tools").fill("github__create_")
    visible = page.locator("#tools tbody tr:visible")
    assert visible.count() == 6  # create_or_update_file, _repository, _issue, _pull_request, _branch, _review
    page.get_by_role("switch", name="enable github__create_issue").click()
    wait_notice(page, "github__create_issue disabled")
    assert list(registry_doc(console_home)["servers"]["github"]["disabled_tools"]) == ["create_issue"]
    page.wait_for_selector("main[data-page=tools][aria-busy=false] #tools")
    assert not page.get_by_role("switch", name="enable github__create_issue").is_checked()

    page.get_by_label("search tools").fill("open a pull request")
    page.click("form button:has-text('Search')")
    page.wait_for_selector("#hits")
    first = page.locator("#hits tr").first
    assert first.get_attribute("data-hit") == "github__create_pull_request"
    assert first.locator("[data-part=lexical]").inner_text().startswith("BM25 ")
    assert first.locator("[data-part=semantic]").inner_text().startswith("meaning ")
    assert first.locator("svg rect").count() >= 2  # the score bar, in parts
    # the disabled tool is no longer searchable, as for `coffer search`
    assert page.locator("#hits tr[data-hit=github__create_issue]").count() == 0
    page.get_by_label("search tools").fill("create an issue")  # ... but it is counted, with how to show it
    page.click("form button:has-text('Search')")
    hidden = page.locator(".hidden-matches[data-server=github]")
    hidden.wait_for()
    assert hidden.inner_text() == "1 matching tool is disabled (github): coffer enable github__create_issue"
    page.get_by_label("search tools").fill("what time is it now")
    page.click("form button:has-text('Search')")
    page.wait_for_selector(".hidden-matches[data-server=time]")  # its changed tool is held for review
    assert (
        "awaiting approval (time): coffer approve time"
        in page.locator(".hidden-matches[data-server=time]").inner_text()
    )
    assert page.locator("#hits tr[data-hit=time__get_current_time]").count() == 0
    shoot(page, shots, "tools")


def test_log_page_charts_the_calls(page: Any, shots: Path) -> None:
    page.click("nav >> text=Log")
    page.wait_for_selector("main[data-page=log][aria-busy=false] #timeline")
    bars = page.locator("#timeline rect[data-calls]")
    assert sum(int(bars.nth(i).get_attribute("data-calls")) for i in range(bars.count())) == 600
    assert page.locator("#latency rect").count() == 2 * min(page.locator("#servers-stats tbody tr").count(), 12)
    assert page.locator("#tool-latency rect").count() == 2 * 12  # p50 and p95 of the 12 busiest tools
    assert page.locator("#tools-stats tbody tr").count() >= 20
    assert page.locator("#never-called li").count() > 100
    rows = page.locator("#tools-stats tbody tr").all_inner_texts()
    called = {"__".join(cells[:2]) for cells in (r.split("\t") for r in rows)}
    never = set(page.locator("#never-called li").all_inner_texts())
    assert called and all(name.split("__")[0] in page.locator("#servers-stats").inner_text() for name in called)
    assert never and not called & never  # a tool called in the window is not "never called"
    ticks = page.locator("#timeline text.tick")  # 7 days: each label says its day, at even steps
    xs = [float(ticks.nth(i).get_attribute("x")) for i in range(ticks.count())]
    assert 3 <= len(xs) <= 6 and len({round(b - a, 3) for a, b in itertools.pairwise(xs)}) == 1
    days = ticks.all_text_contents()
    assert all(re.search(r"[A-Z][a-z]{2} \d{1,2}\b.*\d{2}:\d{2}", t) for t in days), days
    starts = [float(ticks.nth(i).get_attribute("data-start")) for i in range(ticks.count())]
    assert max(starts) > time.time() - 6 * 3600 - 60, "the rightmost label is the bar that holds now (today)"
    shoot(page, shots, "log")
    # a team gateway's log: one member's calls (coffer log --member), picked in the page
    assert page.locator("#member option").all_inner_texts() == ["every member", "ana", "ben", "cleo"]
    db = open_log()
    try:
        ana = db.execute("SELECT count(*) FROM calls WHERE member = 'ana'").fetchone()[0]
    finally:
        db.conn.close()
    page.select_option("#member", "ana")
    page.wait_for_selector("main[data-page=log][aria-busy=false] #member")
    assert page.locator("#member").input_value() == "ana"
    mine = page.locator("#timeline rect[data-calls]")
    assert 0 < sum(int(mine.nth(i).get_attribute("data-calls")) for i in range(mine.count())) == ana < 600
    page.select_option("#member", "")
    page.wait_for_selector("main[data-page=log][aria-busy=false] #member")
    page.click("button:has-text('1h')")
    page.wait_for_selector("main[data-page=log][aria-busy=false] button[aria-pressed=true]:has-text('1h')")
    shown = page.locator("#timeline rect[data-calls]")
    assert sum(int(shown.nth(i).get_attribute("data-calls")) for i in range(shown.count())) < 600


def test_profiles_page_names_the_clients(page: Any, shots: Path) -> None:
    page.click("nav >> text=Profiles")
    page.wait_for_selector("main[data-page=profiles][aria-busy=false] #profiles")
    coding = page.locator("tr[data-profile=coding]")
    assert "Claude Code" in coding.inner_text()
    assert "Codex" in page.locator("tr[data-profile='(no profile)']").inner_text()
    coding.locator("summary").click()
    names = coding.locator("li").all_inner_texts()
    assert names[0].startswith("coffer__") and any(n.startswith("github__") for n in names)
    assert all(n.split("__")[0] in ("coffer", "github", "git", "filesystem") for n in names)
    shoot(page, shots, "profiles")

    # prune the profile to the tools called lately, then put it back: `coffer profile prune` both ways
    coding.locator("button:has-text('Prune unused')").click()
    wait_notice(page, "profile coding now lists")
    pruned = registry.load().profiles["coding"]
    assert pruned.tools and all(t.split("__")[0] in ("github", "git", "filesystem") for t in pruned.tools)
    page.wait_for_selector("main[data-page=profiles][aria-busy=false] #profiles")
    page.locator("tr[data-profile=coding] button:has-text('Undo')").click()
    wait_notice(page, "profile coding put back")
    assert registry.load().profiles["coding"].tools == []


def test_untrusted_text_stays_text(browser: Any, console_home: Path) -> None:
    """A tool description is written by whoever wrote the server: markup in it is shown, never run."""
    from tests.console.conftest import start_console, stop_console

    servers.add_server(registry.ServerConfig(name="evil", command="true"))
    trap = '<img src=x onerror="document.title=\'owned\'"><script>document.title="owned"</script>'
    catalogue.save_server("evil", tools=[{"name": "trap", "description": trap, "inputSchema": {"type": "object"}}])
    running = start_console(console_home)
    context = browser.new_context()
    try:
        tab = context.new_page()
        tab.goto(running.url)
        tab.wait_for_selector("tr[data-server=evil]")
        tab.click("nav >> text=Tools")
        row = tab.locator("tr[data-tool=evil__trap]")
        row.wait_for()
        assert trap.split("<script>")[0] in row.inner_text()
        assert tab.locator("main img").count() == 0 and tab.title() == "Coffer console"
    finally:
        context.close()
        stop_console(running)


def test_a_visit_without_the_token_gets_a_page_that_says_what_to_do(browser: Any, console: Console) -> None:
    """A bookmark or a copied URL without its token: a page that says to open the URL `coffer ui` printed,
    not raw JSON; the console's own API still answers JSON."""
    context = browser.new_context()
    tab = context.new_page()
    try:
        answer = tab.goto(console.base + "/")
        assert answer is not None and answer.status == 401
        assert tab.locator("h1").inner_text() == "Coffer console"
        body = tab.locator("body").inner_text()
        assert "No token." in body and "coffer ui" in body and "{" not in body
        wrong = tab.goto(console.base + "/?token=wrong")
        assert wrong is not None and wrong.status == 401 and "Wrong token." in tab.locator("body").inner_text()
        api = tab.goto(console.base + "/api/servers")
        assert (
            api is not None
            and api.status == 401
            and api.json() == {"error": "no token: open the URL `coffer ui` printed"}
        )
    finally:
        context.close()


def test_servers_page_finds_and_adds_from_a_registry(
    browser: Any, tmp_path: Path, shots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Find by what a server does, add one with its secret input, and see it in the vault, marked
    installed the next time: against a real registry on 127.0.0.1 serving recorded real entries."""
    from coffer.trust import secrets
    from tests.console.conftest import start_console, stop_console
    from tests.fixtures.registry_server import RecordedRegistry

    home = tmp_path / "vault"
    home.mkdir()
    with RecordedRegistry() as reg:
        (home / "coffer.toml").write_text(f'[registries]\nofficial = "{reg.url}"\n')
        console = start_console(home)
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        tab = context.new_page()
        problems: list[str] = []
        tab.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        try:
            tab.goto(console.url)
            tab.wait_for_selector("main[aria-busy=false] #find-servers")
            tab.get_by_role("searchbox", name="find servers in the registry").fill("read a figma design")
            tab.keyboard.press("Enter")
            tab.wait_for_selector("#found tr[data-entry]")
            assert tab.locator("#found tr[data-entry]").first.get_attribute("data-entry") == (
                "io.github.GLips/Figma-Context-MCP"
            )
            row = tab.locator("#found tr[data-entry='io.github.GLips/Figma-Context-MCP']")
            row.locator("button:has-text('Add…')").click()
            form = tab.locator("tr[data-install] form")
            form.wait_for()
            assert "npx -y figma-developer-mcp@0.13.2 --stdio" in form.inner_text()
            key = form.get_by_label("FIGMA_API_KEY")
            assert key.get_attribute("type") == "password" and key.get_attribute("required") is not None
            key.fill("figd_console_secret")
            form.get_by_label("start it once to list its tools").uncheck()
            shoot(tab, shots, "find-add")
            form.locator("button:has-text('Add figma')").click()
            wait_notice(tab, "added figma")
            tab.wait_for_selector("#servers tr[data-server=figma]")
            monkeypatch.setenv("COFFER_HOME", str(home))
            cfg = registry.load().get("figma")
            assert cfg.source is not None and cfg.source["name"] == "io.github.GLips/Figma-Context-MCP"
            assert cfg.env == {"FIGMA_API_KEY": "${secret:figma.FIGMA_API_KEY}"}
            assert secrets.resolve("figma.FIGMA_API_KEY") == "figd_console_secret"
            assert "figd_console_secret" not in (home / "coffer.toml").read_text()
            tab.get_by_role("searchbox", name="find servers in the registry").fill("figma")
            tab.keyboard.press("Enter")
            installed = "#found tr[data-entry='io.github.GLips/Figma-Context-MCP'] .badge:has-text('as figma')"
            tab.wait_for_selector(installed)
        finally:
            context.close()
            stop_console(console)
    assert problems == [], problems


def test_tools_search_says_what_the_vault_lacks_and_what_the_registry_has(
    browser: Any, console_home: Path, shots: Path
) -> None:
    """What `coffer__search_tools` tells an agent and `coffer search` its user, the console's search
    shows: with the official registry (as recorded) cached, an ask for Slack gets no tools, what ranked
    closest and the registry's servers; "the weather in Paris" keeps its tools and adds the registry's
    weather servers (none for Paris, an argument)."""
    import json

    from coffer.discovery import cache
    from coffer.discovery.entries import parse_item
    from tests.console.conftest import start_console, stop_console
    from tests.fixtures.registry_server import WORLD

    if not WORLD.exists():
        pytest.skip(f"the recorded registry is not here: {WORLD}")
    official = "https://registry.modelcontextprotocol.io"  # the recording's (the cache only: never reached)
    vault = console_home / "coffer.toml"
    vault.write_text(f'[registries]\nofficial = "{official}"\n\n{vault.read_text()}')
    cache.store([parse_item(json.loads(line), official) for line in WORLD.open(encoding="utf-8")], official)
    console = start_console(console_home)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    tab.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    try:
        tab.goto(console.url)
        tab.click("nav >> text=Tools")
        tab.wait_for_selector("main[data-page=tools][aria-busy=false] #tools")
        tab.get_by_label("search tools").fill("send a message on Slack to the #general channel")
        tab.click("form button:has-text('Search')")
        lacking = tab.locator("#lacking")
        lacking.wait_for()
        assert (
            lacking.locator("p").first.inner_text().startswith("Nothing in this vault serves 'slack': closest here is")
        )
        assert tab.locator("#hits").count() == 0  # no tool is the answer
        offers = lacking.locator("tr[data-entry]")
        assert offers.count() >= 1
        for i in range(offers.count()):
            row = offers.nth(i)
            assert "slack" in row.inner_text().lower()
            assert row.locator("code").inner_text() == f"coffer add {row.get_attribute('data-entry')}"
        shoot(tab, shots, "search-lacking")
        tab.get_by_label("search tools").fill("what's the weather in Paris")
        tab.click("form button:has-text('Search')")
        beside = tab.locator("#registry-offers")
        beside.wait_for()
        assert tab.locator("#hits tr").count() >= 1 and tab.locator("#lacking").count() == 0
        assert "No tool here knows 'weather'; registry servers that do:" in beside.inner_text()
        rows = beside.locator("tr[data-entry]")
        assert rows.count() >= 1 and all("weather" in rows.nth(i).inner_text().lower() for i in range(rows.count()))
    finally:
        context.close()
        stop_console(console)
    assert problems == [], problems
