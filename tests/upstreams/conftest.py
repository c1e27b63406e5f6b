"""The confinement tests' one way to choose a mechanism."""

from __future__ import annotations

import os

import pytest

from coffer.upstreams import sandbox

REQUIRED = os.environ.get("COFFER_REQUIRE_SANDBOX") == "1"  # CI: these tests fail, not skip, without bwrap


@pytest.fixture(params=["bubblewrap", "landlock"])
def mechanism(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which mechanism confines: bubblewrap, or Landlock alone with bubblewrap hidden (COFFER_BWRAP=none)."""
    if request.param == "bubblewrap" and sandbox.support().mechanism != "bubblewrap":
        pytest.fail("bubblewrap is required here") if REQUIRED else pytest.skip("no bubblewrap here")
    if request.param == "landlock":
        if not sandbox.support().landlock_abi:
            pytest.skip("no Landlock here")
        monkeypatch.setenv(sandbox.BWRAP_ENV, "none")
    return str(request.param)
