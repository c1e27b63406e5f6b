"""A coffer.toml rewritten in place is read only once it is written: never an emptied file as the vault.

An editor that saves by truncating and rewriting, held up between the two (a busy machine), leaves an
empty file whose age says it is settled. Read then, it would become the last good registry (an empty
vault) and a broken save right after would keep it (seen once in CI: "server 'alpha' is not in the
vault" while `coffer status` said the last good registry was served).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from coffer.gateway import view as view_module
from coffer.gateway.view import View
from tests.fixtures.gateway_harness import add_fixture


def aged(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_an_emptied_registry_is_not_served_until_it_stays_empty(
    coffer_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_fixture(coffer_home, "alpha")
    path = coffer_home / "coffer.toml"
    synced: list[list[str]] = []
    view = View([], on_sync=lambda servers: synced.append([c.name for c in servers]))
    assert list(view.current_registry().servers) == ["alpha"]
    inode = path.stat().st_ino

    with open(path, "r+") as handle:  # truncated in place, the rewrite not there yet, the file "old"
        handle.truncate(0)
    aged(path, 5)
    assert path.stat().st_ino == inode and path.stat().st_size == 0
    for _ in range(3):
        assert list(view.current_registry().servers) == ["alpha"]  # still the last good one
    monkeypatch.setattr(view_module, "EMPTY_SETTLE_S", 0.0)
    assert list(view.current_registry().servers) == []  # empty for long enough: the user emptied it
    assert synced[-1] == []


def test_a_settled_rewrite_in_place_is_read_at_once(coffer_home: Path) -> None:
    add_fixture(coffer_home, "alpha")
    path = coffer_home / "coffer.toml"
    view = View([], on_sync=lambda servers: None)
    assert list(view.current_registry().servers) == ["alpha"]
    text = path.read_text()
    add_fixture(coffer_home, "beta")
    both = path.read_text()
    with open(path, "r+") as handle:  # in place again, whole, and old enough
        handle.truncate(0)
        handle.write(both)
    aged(path, 1)
    assert sorted(view.current_registry().servers) == ["alpha", "beta"]
    with open(path, "r+") as handle:  # a fresh in-place write waits for SETTLE_S
        handle.truncate(0)
        handle.write(text)
    assert sorted(view.current_registry().servers) == ["alpha", "beta"]
    aged(path, 1)
    assert list(view.current_registry().servers) == ["alpha"]
