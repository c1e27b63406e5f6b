"""Fixtures for the client tests: a fake HOME, so every client's default path lands in a temporary directory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, coffer_home: Path) -> Path:
    """A fake HOME so each client's default path lands in the temporary directory."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("XDG_CONFIG_HOME", "CODEX_HOME", "APPDATA"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    return home


def put(home: Path, rel: str, text: str, mode: int = 0o644) -> Path:
    path = home / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    path.chmod(mode)
    return path
