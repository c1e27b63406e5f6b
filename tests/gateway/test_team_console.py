"""The members' console of a team gateway, in Chromium (Playwright): a person signs in at the real OpenID
provider's own login and consent pages (authorization code with PKCE), sees who they are and what they
reach, and sets a secret their per-member server then runs with; a non-member is refused; the console's
API is closed to a request without the session, or from another origin."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from coffer.manage import servers
from coffer.trust import member_secrets, oauth_store
from coffer.vault import registry
from tests.console.test_console_browser import CHROMIUM_ARGS, require_chromium
from tests.fixtures.gateway_harness import text
from tests.gateway.test_team_gateway import Gateway, pytestmark, served
from tests.gateway.test_team_member_servers import setup
from tests.gateway.test_team_members import member
from tests.upstreams.test_oauth import control
from tests.upstreams.test_oauth import start as start_oauth_server

__all__ = ["pytestmark"]


@pytest.fixture
def team(coffer_home: Path) -> Iterator[Gateway]:
    with served(coffer_home, members='members = ["group:eng"]', setup=setup, console=True) as gateway:
        yield gateway


@asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    """The system's Chromium through Playwright's async API (these tests run in an event loop)."""
    path = require_chromium()
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


async def sign_in(browser: Any, g: Gateway, login: str) -> Any:
    """Open the console, and sign in at the provider's pages as `login` (its dev login takes any password)."""
    page = await (await browser.new_context()).new_page()
    await page.goto(g.url.removesuffix("/mcp") + "/console")
    assert page.url.startswith(g.idp.url), page.url  # sent to the provider: not signed in here
    await page.fill("input[name=login]", login)
    await page.fill("input[name=password]", "any")
    await page.click("button[type=submit]")
    await page.wait_for_load_state()
    if page.url.startswith(g.idp.url):  # the consent page: this gateway asks for mcp:tools
        await page.click("button[type=submit]")
        await page.wait_for_load_state()
    return page


async def test_a_member_signs_in_at_the_provider_and_sets_its_own_secret(team: Gateway) -> None:
    g = team
    async with chromium() as browser:
        page = await sign_in(browser, g, "agent-alice")
        await page.wait_for_selector("#sub:has-text('agent-alice')")
        assert page.url.endswith("/console/")
        assert await page.text_content("#via") == "group:eng"
        assert await page.text_content("#profile") == "the whole vault"
        await page.wait_for_selector("#tools li:has-text('alpha__echo')")
        cookie = next(c for c in await page.context.cookies() if c["name"] == "coffer-team-session")
        assert cookie["httpOnly"] and cookie["path"] == "/console"

        await page.fill("#name", "TOKEN")
        await page.fill("#value", "alice-from-console-5e1")
        await page.click("#set button[type=submit]")
        await page.wait_for_selector("#secrets code:has-text('TOKEN')")
        assert "alice-from-console-5e1" not in await page.content()
        assert member_secrets.names("agent-alice") == ["TOKEN"]
        async with member(g, "agent-alice") as session:  # the agent's own token, the console's secret
            assert text(await session.call_tool("gh__env", {"name": "TOKEN"})) == "alice-from-console-5e1"

        # the API is the page's: no session, or another origin, gets nothing
        api = g.url.removesuffix("/mcp") + "/console/api"
        assert httpx2.get(api + "/me", timeout=10).status_code == 401
        held = {"coffer-team-session": cookie["value"]}
        evil = {"Origin": "http://evil.test"}
        put = httpx2.put(api + "/secrets/TOKEN", json={"value": "evil"}, cookies=held, headers=evil, timeout=10)
        assert put.status_code == 403
        assert member_secrets.resolve("agent-alice", "TOKEN", "t") == "alice-from-console-5e1"

        await page.click("#secrets button")  # remove it
        await page.wait_for_selector("#secrets li:has-text('none yet')")
        assert member_secrets.names("agent-alice") == []
        await page.click("#signout")
        await page.wait_for_load_state()
        assert httpx2.get(api + "/me", cookies=held, timeout=10).status_code == 401


async def test_a_person_who_is_no_member_is_refused(team: Gateway) -> None:
    async with chromium() as browser:
        page = await sign_in(browser, team, "stranger")
        assert "is not a member" in await page.content()
        assert not [c for c in await page.context.cookies() if c["name"] == "coffer-team-session"]


@pytest.fixture
def notes(coffer_home: Path) -> Iterator[tuple[Gateway, str]]:
    """A team gateway with `notes`: a per-member server behind its own OAuth authorization server (the
    fixture server with the SDK's auth routes), which each member connects in the console."""
    for base in start_oauth_server():
        cfg = registry.ServerConfig(name="notes", url=f"{base}/mcp", oauth=True, share="member", timeout=10)

        def setup(home: Path, cfg: registry.ServerConfig = cfg) -> None:
            servers.add_server(cfg, path=home / "coffer.toml")

        members = 'members = ["group:eng", "group:ops"]'
        with served(coffer_home, members=members, setup=setup, console=True) as gateway:
            yield gateway, base


async def test_a_member_connects_its_own_oauth_server_and_its_agent_uses_that_grant(
    notes: tuple[Gateway, str],
) -> None:
    g, base = notes
    async with chromium() as browser:
        page = await sign_in(browser, g, "agent-alice")
        row = page.locator("#grants li", has_text="notes")
        await row.locator("text=not connected").wait_for()
        await row.locator("button", has_text="Connect").click()  # its authorization server, then back
        await page.wait_for_url(g.url.removesuffix("/mcp") + "/console/")
        await row.locator(".state", has_text=re.compile("^connected$")).wait_for()
    assert oauth_store.state("notes", "agent-alice") == "authorised"
    assert oauth_store.state("notes", "agent-bob") == "none"
    assert oauth_store.state("notes") == "none"  # nothing in the owner's store
    async with member(g, "agent-alice") as alice:  # the agent, with its own token: the console's grant
        assert "notes__client" in [t.name for t in (await alice.list_tools()).tools]
        client = text(await alice.call_tool("notes__client", {}))
        assert client not in ("", "none")
    async with member(g, "agent-bob") as bob:  # bob granted nothing: he is told where to, not let in
        refused = await bob.call_tool("notes__whoami", {})
        assert refused.is_error and "'agent-bob' connects it in the members' console" in text(refused)
    # registered at its authorization server: alice's Connect only; no start without a grant registers a
    # client (the owner's own, alice's before she connected, bob's)
    assert control(base, "stats") == {"codes": 1, "refreshes": 0, "registrations": 1}
    # the grant lives in alice's own 0600 file only
    held = member_secrets.path_of("agent-alice")
    assert held.stat().st_mode & 0o777 == 0o600 and "notes.tokens" in held.read_text()
    assert "notes.tokens" not in "".join(p.read_text(errors="ignore") for p in g.home.rglob("*.json") if p != held)


async def test_a_grant_is_finished_only_by_the_session_that_started_it(notes: tuple[Gateway, str]) -> None:
    """A link to the callback carried to another member's browser does not connect that member."""
    g, _ = notes
    async with chromium() as browser:
        alice = await sign_in(browser, g, "agent-alice")
        started = await alice.evaluate(
            "fetch('/console/api/connect/notes', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            " body: '{}'}).then((r) => r.json())"
        )
        authorize = started["authorize"]
        bob = await sign_in(browser, g, "agent-bob")
        await bob.goto(authorize)  # the authorization server redirects bob's browser to alice's callback
        assert "started by another session" in await bob.content()
    assert oauth_store.state("notes", "agent-bob") == "none" and oauth_store.state("notes", "agent-alice") == "none"
