"""Confinement as a user meets it: `coffer add`'s flags, what `show` and `doctor` say, a denied write named
in the server's error with how to grant it, and a machine with nothing to confine with."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coffer.upstreams import sandbox
from tests.conftest import run_cli

needs_bwrap = pytest.mark.skipif(not sandbox.support().available, reason="no bubblewrap here")


def test_add_flags_are_written_and_shown(cli: CliRunner, coffer_home: Path, tmp_path: Path) -> None:
    run_cli(cli, "add", "gh", "--no-probe", "--allow-host", "api.github.com", "--", "npx", "-y", "gh-mcp")
    run_cli(cli, "add", "off", "--no-probe", "--sandbox", "off", "--", "old-mcp")
    run_cli(cli, "add", "quiet", "--no-probe", "--sandbox", "none", "--allow-write", str(tmp_path), "--", "q")
    text = (coffer_home / "coffer.toml").read_text()
    assert 'sandbox = {network = ["api.github.com"]}' in text and 'sandbox = "off"' in text
    assert f'sandbox = {{network = "none", write = ["{tmp_path}"]}}' in text
    shown = json.loads(run_cli(cli, "show", "gh", "--json").stdout)["server"]  # type: ignore[attr-defined]
    assert shown["sandbox"] == {"network": ["api.github.com"]}
    assert shown["confinement"]["network"] == "only api.github.com, registry.npmjs.org"  # npx's own registry
    assert "UNCONFINED" not in run_cli(cli, "show", "quiet").stdout  # type: ignore[attr-defined]
    off = run_cli(cli, "show", "off").stdout  # type: ignore[attr-defined]
    assert "runs with the user's full authority" in off


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sandbox", "sometimes"], "invalid --sandbox 'sometimes'"),
        (["--sandbox", "off", "--allow-read", "/etc"], "--sandbox off runs the server unconfined"),
        (["--sandbox", "none", "--allow-host", "a.com"], "cannot be combined with --allow-host"),
        (["--allow-host", "not a host"], "invalid --allow-host 'not a host'"),
    ],
)
def test_bad_sandbox_flags_are_one_line_and_write_nothing(
    cli: CliRunner, coffer_home: Path, flags: list[str], message: str
) -> None:
    result = run_cli(cli, "add", "x", "--no-probe", *flags, "--", "x", code=2)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1  # type: ignore[attr-defined]
    assert not (coffer_home / "coffer.toml").exists()


def test_a_url_server_takes_no_sandbox(cli: CliRunner, coffer_home: Path) -> None:
    result = run_cli(cli, "add", "u", "--url", "https://x.example/mcp", "--sandbox", "none", code=2)
    assert "apply to servers Coffer launches" in result.stderr  # type: ignore[attr-defined]


@needs_bwrap
@pytest.mark.parametrize("hide_bwrap", [False, True], ids=["bubblewrap", "landlock"])
def test_a_denied_write_is_named_with_how_to_grant_it(
    cli: CliRunner, coffer_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hide_bwrap: bool
) -> None:
    """A write outside the server's allow-list fails, and its error names the path and the one command that
    grants it; the grant then works (`coffer edit` approves it as `add` does)."""
    if hide_bwrap:
        monkeypatch.setenv(sandbox.BWRAP_ENV, "none")
        sandbox.support.cache_clear()
        monkeypatch.setattr(sandbox, "support", sandbox.support)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("mine\n")
    target = str(outside / "notes.txt")
    code = f"open({target!r}, 'a').write('x')"  # the path is in its code, not named on its own
    run_cli(cli, "add", "writer", "--no-probe", "--", sys.executable, "-c", code)
    report = json.loads(run_cli(cli, "doctor", "--json", code=1).stdout)  # type: ignore[attr-defined]
    (writer,) = report["servers"]
    sandbox.support.cache_clear()
    assert target in writer["error"] and "coffer edit writer --allow-" in writer["error"], writer["error"]
    assert writer["sandbox"] == "confined" and report["confinement"]["available"] is True
    assert (outside / "notes.txt").read_text() == "mine\n"


def test_without_bubblewrap_landlock_confines_and_doctor_says_so(coffer_home: Path, tmp_path: Path) -> None:
    """A plain `pip install` on a machine with no bwrap: Landlock confines, and `coffer doctor` says so."""
    import os

    env = dict(os.environ, COFFER_HOME=str(coffer_home), COFFER_BWRAP=str(tmp_path / "no-bwrap"))
    if not sandbox.support().landlock_abi:
        pytest.skip("no Landlock here")
    coffer = [sys.executable, "-m", "coffer"]
    demo = str(Path(__file__).resolve().parents[2] / "coffer" / "examples" / "demo_server.py")
    subprocess.run([*coffer, "add", "demo", "--", sys.executable, demo], env=env, check=True, capture_output=True)
    done = subprocess.run([*coffer, "doctor"], env=env, capture_output=True, text=True, timeout=120)
    said = " ".join((done.stdout + done.stderr).split())  # the table on stdout, the summary lines on stderr
    assert "confinement: confined by Landlock (ABI" in said and "cannot tell hosts apart" in said
    shown = subprocess.run([*coffer, "show", "demo"], env=env, capture_output=True, text=True, timeout=60).stdout
    assert "confined by Landlock" in shown and "may read" in shown and "UNCONFINED" not in shown
    call = subprocess.run([*coffer, "call", "demo__echo", '{"text": "hi"}'], env=env, capture_output=True, text=True)
    assert "hi" in call.stdout and "unconfined" not in call.stderr


def test_with_nothing_to_confine_with_a_server_runs_and_says_so_or_is_refused(
    coffer_home: Path, tmp_path: Path
) -> None:
    """Neither bubblewrap (COFFER_BWRAP names one that is not there) nor Landlock (COFFER_LANDLOCK=none): the
    server runs unconfined and `doctor` and the log say so; with `[settings] sandbox_required = true` it is
    not started."""
    import os

    env = dict(os.environ, COFFER_HOME=str(coffer_home), COFFER_BWRAP=str(tmp_path / "no-bwrap"))
    env["COFFER_LANDLOCK"] = "none"
    coffer = [sys.executable, "-m", "coffer"]
    demo = str(Path(__file__).resolve().parents[2] / "coffer" / "examples" / "demo_server.py")
    subprocess.run([*coffer, "add", "demo", "--", sys.executable, demo], env=env, check=True, capture_output=True)
    done = subprocess.run([*coffer, "doctor", "--json"], env=env, capture_output=True, text=True, timeout=120)
    report = json.loads(done.stdout)
    (demo_row,) = report["servers"]
    assert demo_row["status"] == "ok" and demo_row["sandbox"] == "UNCONFINED"
    assert "bubblewrap (bwrap) is not installed" in report["confinement"]["problem"]
    assert "no Landlock" in report["confinement"]["describe"]
    call = subprocess.run([*coffer, "call", "demo__echo", '{"text": "hi"}'], env=env, capture_output=True, text=True)
    assert "hi" in call.stdout and "runs unconfined" in call.stderr
    with open(coffer_home / "coffer.toml", "a") as fh:
        fh.write("\n[settings]\nsandbox_required = true\n")
    call = subprocess.run([*coffer, "call", "demo__echo", '{"text": "hi"}'], env=env, capture_output=True, text=True)
    assert call.returncode != 0 and "sandbox_required is set" in call.stderr


def test_no_grant_names_the_vault_and_a_secret_place_only_by_name(
    cli: CliRunner, coffer_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Coffer's own files cannot be granted at all (directly, by a symlink, through `..`); a secret place only
    with --allow-secret; each refusal is one line and leaves the vault as it was."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("key\n")
    (home / ".kube").mkdir()
    monkeypatch.setenv("HOME", str(home))
    run_cli(cli, "add", "fs", "--no-probe", "--", "fs-mcp")
    before = (coffer_home / "coffer.toml").read_text()
    (tmp_path / "link").symlink_to(coffer_home)
    refused = {
        "--allow-read": [str(coffer_home / "coffer.toml"), str(tmp_path / "link"), f"{home}/../vault/sandbox"],
        "--allow-write": [str(coffer_home), str(home / ".ssh")],
    }
    for flag, values in refused.items():
        for value in values:
            result = run_cli(cli, "edit", "fs", "--no-probe", flag, value, code=2)
            err = result.stderr  # type: ignore[attr-defined]
            assert len(err.strip().splitlines()) == 1 and ("Coffer's vault" in err or "a secret place" in err), err
            assert (coffer_home / "coffer.toml").read_text() == before
    result = run_cli(cli, "edit", "fs", "--no-probe", "--allow-read", str(home / ".ssh" / "id_rsa"), code=2)
    assert "--allow-secret ~/.ssh/id_rsa" in result.stderr  # type: ignore[attr-defined]
    result = run_cli(cli, "edit", "fs", "--no-probe", "--allow-secret", str(tmp_path), code=2)
    assert "not a secret place" in result.stderr  # type: ignore[attr-defined]
    run_cli(cli, "edit", "fs", "--no-probe", "--allow-secret", str(home / ".kube"))
    shown = run_cli(cli, "show", "fs").stdout  # type: ignore[attr-defined]
    assert "~/.kube (a secret place, granted by name)" in " ".join(shown.split())


def test_a_grant_that_holds_the_vault_says_once_what_stays_hidden(
    cli: CliRunner, coffer_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`coffer add homefs -- npx ... server-filesystem ~` (or a grant of the vault's parent) is added, and says
    once what stays hidden inside it; `show` says it too. An unknown name is said first, and alone."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".claude.json").write_text("{}")
    monkeypatch.setenv("HOME", str(home))
    added = run_cli(
        cli, "add", "homefs", "--no-probe", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", str(home)
    )
    err = added.stderr  # type: ignore[attr-defined]
    assert err.count("warning") == 1 and "the secret places ~/.ssh, ~/.claude.json stay hidden" in err, err
    edited = run_cli(cli, "edit", "homefs", "--no-probe", "--allow-read", str(tmp_path))
    said = " ".join(edited.stderr.split())  # type: ignore[attr-defined]
    assert said.count("warning") == 1 and f"Coffer's own files ({coffer_home}" in said, said
    assert "warning: warning" not in said
    shown = " ".join(run_cli(cli, "show", "homefs").stdout.split())  # type: ignore[attr-defined]
    assert f"hidden Coffer's own files ({coffer_home}" in shown and "~/.ssh" in shown, shown
    unknown = run_cli(cli, "edit", "nosuch", "--allow-read", str(home / ".ssh"), code=3)
    assert unknown.stderr.strip() == "coffer: error: unknown server 'nosuch' (see `coffer list`)"  # type: ignore[attr-defined]
