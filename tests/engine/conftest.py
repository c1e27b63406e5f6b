"""What the engine tests share: each test's engine stopped at its end (the socket name is derived from the
test's vault, so every test has its own), with a short idle time meanwhile."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from coffer.engine import control, place


@pytest.fixture
def engine_stopped(coffer_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(place.IDLE_ENV, "30")
    yield
    state = control.status()
    if state is not None:
        os.kill(int(state["engine"]["pid"]), signal.SIGTERM)
