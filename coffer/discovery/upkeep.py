"""The registry cache kept fresh while a gateway runs: `coffer__search_tools` abstains and suggests from
it, so it must exist and not age without the user thinking of it. Read again in the background when a
day old (incrementally: what changed since), never on a call's path; `[settings] registry_refresh =
false` (or `COFFER_REGISTRY_REFRESH=off`) turns it off. A registry that cannot be reached is tried again
at the next look; `coffer doctor` says how old each cache is."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from coffer.discovery import cache

if TYPE_CHECKING:
    from coffer.vault.registry import Registry

FIRST_LOOK_S = 5.0  # after the upstreams' starts, not against them
LOOK_S = 3600.0  # how often it looks whether a registry cache is a day old
log = logging.getLogger("coffer.discovery")


async def keep_fresh(current: Callable[[], Registry], scope: anyio.CancelScope) -> None:
    """Until `scope` is cancelled: refresh the stale caches of the registries `current()` names."""
    with scope:
        await anyio.sleep(FIRST_LOOK_S)
        while True:
            registry = current()
            if cache.refresh_wanted(registry.settings):
                urls = list(dict.fromkeys(registry.registries.values()))
                changed = 0
                for url in cache.stale(urls):
                    try:
                        n, _ = await anyio.to_thread.run_sync(cache.refresh, url)
                        changed += n
                        log.info("registry cache of %s read: %d entries changed", url, n)
                    except Exception as exc:  # down, garbage, offline: the cache stays as it was
                        log.info("registry cache of %s not refreshed: %s", url, exc)
                if changed:  # indexed here too, so that the next `coffer find` reads the index back
                    await _index(urls)
            await anyio.sleep(LOOK_S)


async def _index(urls: list[str]) -> None:
    from coffer.discovery.rank import derive

    try:
        await anyio.to_thread.run_sync(derive, urls)
    except Exception as exc:  # derived data: the next `find` builds it
        log.info("registry index not built: %s", exc)
