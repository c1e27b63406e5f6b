"""The SDK seam: the installed mcp is what its two halves were written for (coffer/upstreams/sdk.py, the
client side; coffer/gateway/sdk.py, the host side), and only they reach past the SDK's public API (its
privates, its classes subclassed)."""

from __future__ import annotations

import ast
import importlib.metadata
import tomllib
from pathlib import Path

import pytest

from coffer.gateway import sdk

ROOT = Path(__file__).resolve().parents[2]
SEAM = {"gateway", "upstreams"}  # the parts whose sdk.py is a half of the seam
PUBLIC_BASES = {"MCPError"}  # the SDK's public error, subclassed to raise a kind of it (rounds.UnknownRound)
PRIVATE_NAMES = {
    "_stamp",
    "_dispatcher",
    "_initialize",
    "_auth_flow",
    "send_raw_request",
    "_connection",
    "_handle_post_request",
    "_admit_session",
    "_request_streams",
}


def test_the_installed_sdk_is_the_one_sdk_py_was_written_for() -> None:
    problems = sdk.version_problems()
    assert not problems, "\n".join(problems)


def test_pyproject_pins_what_sdk_py_supports() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (low_major, low_minor), (high_major, high_minor) = sdk.SUPPORTED
    for dist in sdk.DISTRIBUTIONS:
        assert f"{dist}>={low_major}.{low_minor},<{high_major}.{high_minor}" in deps, (
            f"{dist} is not pinned as sdk.py says"
        )


def test_a_release_outside_the_pin_is_named_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda d: "2.4.1" if d == "mcp" else real(d))
    problems = sdk.version_problems()
    assert len(problems) == 1
    assert problems[0].startswith("mcp 2.4.1 is installed, but coffer/gateway/sdk.py was written for 2.3.x")


def test_only_sdk_py_reaches_past_the_sdk() -> None:
    offenders = []
    for path in sorted((ROOT / "coffer").rglob("*.py")):
        if path.name == "sdk.py" and path.parent.name in SEAM:
            continue
        tree = ast.parse(path.read_text())
        from_sdk = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mcp"
            for alias in node.names
        }
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Attribute) and node.attr in PRIVATE_NAMES:
                offenders.append(f"{where} uses .{node.attr}")
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    name = (
                        base.value.id if isinstance(base, ast.Subscript) and isinstance(base.value, ast.Name) else None
                    )
                    name = base.id if isinstance(base, ast.Name) else name
                    if name in from_sdk and name not in PUBLIC_BASES:
                        offenders.append(f"{where} subclasses the SDK's {name}")
    assert not offenders, "SDK internals outside the seam (coffer/*/sdk.py):\n" + "\n".join(offenders)


def test_each_half_of_the_seam_names_its_own_privates() -> None:
    """The client half's privates are checked too: the host half's list includes them."""
    from coffer.upstreams import sdk as client_sdk

    assert set(client_sdk.PRIVATES) < set(sdk.PRIVATES)
    assert not any(name.startswith(("ServerSession", "StreamableHTTP")) for name in client_sdk.PRIVATES)
