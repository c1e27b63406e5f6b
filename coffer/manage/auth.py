"""`coffer auth`: authorising an OAuth server (`coffer call` is coffer.manage.call).

It goes through the same upstream machinery as `coffer serve`, so what works here works for agents: this
process runs the authorization flow (`coffer.upstreams.oauth`) and then lists the server into the
catalogue, as `coffer refresh` does.
"""

from __future__ import annotations

import dataclasses

from coffer.errors import UpstreamError, UsageError
from coffer.manage import refresh
from coffer.trust import oauth_store
from coffer.upstreams import oauth
from coffer.vault import registry


def authorise(name: str, headless: bool = False) -> refresh.Refreshed:
    """Run the authorization flow for `name` (marking it as an OAuth server), then list it.

    Raises UsageError for a command server, UpstreamError when the flow or the listing fails.
    """
    cfg = registry.load().get(name)
    if not cfg.url:
        raise UsageError(f"'{name}' is started by a command; only URL servers authorise with OAuth")
    if not cfg.oauth:
        registry.set_oauth(name, True)
        cfg = dataclasses.replace(cfg, oauth=True)
    waited = dataclasses.replace(cfg, timeout=max(cfg.timeout, oauth.PERSON_WAIT_S if not headless else 60.0))
    with oauth.person(headless):
        (result,) = refresh.refresh([waited])
    if result.status != "ok":
        error = str(result.error)
        raise UpstreamError(error if "authorisation failed" in error else f"{name}: authorisation failed: {error}")
    return result


def logout(name: str) -> bool:
    """Forget the server's tokens and its client registration (a pre-registered client must be given again)."""
    registry.load().get(name)
    return oauth_store.forget(name, client_too=True)
