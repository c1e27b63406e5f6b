"""No grant is wider than the vault's walls (coffer.upstreams.walls), tried as an attacker would: a hostile
server granted `~` on its launch line (as `server-filesystem ~` is), `/`, the vault's parent, a symlink to
the vault and a path with `..` into it, under bubblewrap and under Landlock alone, tries to read, list,
stat and write each of Coffer's files and folders (registry, database, secrets file, HTTP token, catalogue
snapshot, the data folder, a sibling's and a member's private home, the engines' runtime folder, a
sibling's private temp) and each secret place. Every attempt fails (listing: under bubblewrap; Landlock
cannot deny a listing inside a folder it lets the server list), and an ordinary file under the same
grant is still read and written (the grant keeps working), so the matrix cannot pass by breaking grants.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from coffer.manage import servers
from coffer.trust import http_token, secrets
from coffer.upstreams import sandbox
from coffer.vault import database, paths, registry
from tests.fixtures.gateway_harness import serve, text

REQUIRED = os.environ.get("COFFER_REQUIRE_SANDBOX") == "1"
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not sandbox.support().available and not REQUIRED, reason=f"no confinement here: {sandbox.support().problem}"
    ),
]
HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "hostile_server.py"
MARKER = "SECRET-" + "c0ffee"
# (name, how it is granted, which path): a grant on the launch line (a path-valued env entry, as
# `server-filesystem ~` names its root) or in the entry's sandbox table, as a hand-written coffer.toml says.
GRANTS = [
    ("home", "named", "{home}"),
    ("root", "table", "/"),
    ("parent", "table", "{parent}"),
    ("link", "named", "{parent}/vault-link"),
    ("dotdot", "table", "{home}/../vault/.."),
]
KEEPS_WORKING = {"home", "root", "parent", "dotdot"}  # grants that hold an ordinary file: it stays usable


@pytest.fixture
def targets(tmp_path: Path, coffer_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    """The user's home (beside the vault, as a test's COFFER_HOME is) with its secret places, the vault's
    files, a sibling's and a member's home, a file in the engines' runtime folder and a sibling's temp."""
    monkeypatch.setenv("COFFER_SECRETS_BACKEND", "file")
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    files = {
        "ssh key": home / ".ssh" / "id_ed25519",
        "aws credentials": home / ".aws" / "credentials",
        "agent config": home / ".claude.json",
        "sibling home": coffer_home / "sandbox" / "sibling" / "home" / ".npm" / "_npx" / "index.js",
        "member home": coffer_home / "sandbox" / "sibling" / "members" / "ab12" / "home" / "code.js",
        "catalogue": coffer_home / "catalogue.json",
    }
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{MARKER}\n")
    (home / "notes.txt").write_text("the user's own notes\n")
    secrets.set_secret("github", MARKER)
    http_token.serve_token()
    database.open_db().conn.close()
    tag = uuid.uuid4().hex[:8]
    runtime = paths.owned_private_dir(paths.runtime_root()) / f"walls-{tag}.sock"
    runtime.write_text(MARKER)
    sibling_tmp = Path(sandbox.temp_root()) / f"sibling-{tag}" / "egress.sock"
    sibling_tmp.parent.mkdir()
    sibling_tmp.write_text(MARKER)
    (tmp_path / "vault-link").symlink_to(coffer_home)
    files |= {
        "registry": coffer_home / "coffer.toml",
        "database": coffer_home / "coffer.db",
        "secrets file": coffer_home / "secrets.json",
        "http token": coffer_home / "http-token",
        "runtime socket": runtime,
        "sibling temp": sibling_tmp,
    }
    yield files
    runtime.unlink(missing_ok=True)
    shutil.rmtree(sibling_tmp.parent, ignore_errors=True)


def _folders(files: dict[str, Path], coffer_home: Path) -> dict[str, Path]:
    return {
        "vault": coffer_home,
        "homes": coffer_home / "sandbox",
        "runtime": files["runtime socket"].parent,
        "temps": files["sibling temp"].parent.parent,
        "ssh": files["ssh key"].parent,
    }


def _vault(coffer_home: Path, tmp_path: Path, files: dict[str, Path]) -> None:
    home, notes = tmp_path / "home", tmp_path / "home" / "notes.txt"
    folders = _folders(files, coffer_home)
    plan = {
        "read": [str(p) for p in (*files.values(), notes)],
        "write": [str(p) for p in (*files.values(), notes)] + [str(coffer_home / "evil.toml")],
        "list": [str(p) for p in folders.values()],
        "stat": [str(p) for p in files.values()],
    }
    for name, how, raw in GRANTS:
        grant = raw.format(home=home, parent=tmp_path)
        env = {"HOSTILE_PLAN": json.dumps(plan)}
        cfg = registry.ServerConfig(name=f"h-{name}", command=sys.executable, args=[str(HOSTILE)], env=env)
        if how == "named":
            cfg.env["ROOT"] = grant  # a path-valued env entry: named on the launch line, so read-write
        else:
            cfg.sandbox = {"write": [grant]}
        servers.add_server(cfg, path=coffer_home / "coffer.toml")


async def test_no_grant_reaches_the_vault_or_a_secret_place(
    coffer_home: Path, tmp_path: Path, targets: dict[str, Path], mechanism: str
) -> None:
    _vault(coffer_home, tmp_path, targets)
    sizes = {label: path.stat().st_size for label, path in targets.items()}
    before = {label: path.read_bytes() for label, path in targets.items() if label not in ("database", "catalogue")}
    notes = str(tmp_path / "home" / "notes.txt")
    folders = _folders(targets, coffer_home)
    leaked: list[str] = []
    async with serve(coffer_home) as served:
        for name, _how, _raw in GRANTS:
            result = await served.call(f"h-{name}__attempt")
            assert not result.is_error, text(result)
            report = json.loads(text(result))
            for label, path in targets.items():
                # Under bubblewrap a write may land in the sandbox's own tmpfs, where the vault is not: judged on
                # disk below. A file hidden by /dev/null stats as empty: only its real size would be a leak.
                kinds = ("read", "stat") if mechanism == "bubblewrap" else ("read", "write")
                for kind in kinds:
                    got = report[kind][str(path)]
                    if got.startswith("GOT") and (kind != "stat" or got == f"GOT {sizes[label]} bytes"):
                        leaked.append(f"{name}: {kind} {label}: {got[:80]}")
            for label, folder in folders.items() if mechanism == "bubblewrap" else ():
                # Landlock lists a folder only with all beneath it: a grant that holds a wall keeps its own
                # listing (a filesystem server on ~ walks each path from its root), so names show, never contents
                listing = report["list"][str(folder)]
                seen = set(listing[4:].split()) if listing.startswith("GOT") else set()
                real = set(os.listdir(folder)) - {"sandbox", "servers"}  # the mount points of its own home and temp
                real = {entry for entry in real if not entry.startswith(f"h-{name}")}  # its own home and temp
                if seen & real:
                    leaked.append(f"{name}: list {label}: {sorted(seen & real)}")
            if name in KEEPS_WORKING:
                assert report["read"][notes].startswith("GOT the user's own notes"), (name, report["read"][notes])
                assert report["write"][notes] == "GOT appended", (name, report["write"][notes])
    assert not leaked, f"under {mechanism}:\n" + "\n".join(leaked)
    for label, content in before.items():
        assert targets[label].read_bytes() == content, f"{label} changed on disk under {mechanism}"
    for label in ("database", "catalogue"):
        assert b"evil" not in targets[label].read_bytes(), f"{label} changed on disk under {mechanism}"
    assert not (coffer_home / "evil.toml").exists()
    assert (tmp_path / "home" / "notes.txt").read_text().count("evil") == len(KEEPS_WORKING)
    assert all(path.exists() for path in targets.values()), "every target existed: no denial was a missing file"
