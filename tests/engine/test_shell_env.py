"""The engine's environment is the user's, not the first agent's: the `coffer` commands a person runs record
their shell's certificates, proxies, locale and PATH (an allow-list, 0600, no credentials), and an engine
started by an agent with a trimmed environment (the MCP SDK's default: HOME, PATH, SHELL, TERM) gives its
servers those; `coffer doctor` says where the engine's differ from the shell's. Without a recording the
first session's environment is the fallback, as before."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from coffer.engine import control
from coffer.vault import shellenv
from tests.fixtures.gateway_harness import ROOT, add_fixture, serve, text

pytestmark = pytest.mark.anyio
TRIMMED = ("HOME", "PATH", "SHELL", "TERM")  # what the MCP SDK's stdio client passes a server by default


async def coffer(env: dict[str, str], *args: str) -> Any:
    return await anyio.run_process([sys.executable, "-m", "coffer", *args], env=env, check=False)


async def test_an_agents_trimmed_engine_gives_its_servers_the_users_shell_env(
    coffer_home: Path, tmp_path: Path
) -> None:
    add_fixture(coffer_home, "alpha")
    ca = str(tmp_path / "corp-ca.pem")
    base = {k: v for k, v in os.environ.items() if k not in shellenv.RECORDED or k == "PATH"}
    shell = base | {"COFFER_HOME": str(coffer_home), "SSL_CERT_FILE": ca, "LANG": "C.UTF-8"}
    shell |= {"HTTPS_PROXY": "http://ann:hunter2@proxy.corp:3128", "NO_PROXY": "localhost"}
    trimmed = {k: os.environ[k] for k in TRIMMED if k in os.environ} | {"COFFER_HOME": str(coffer_home)}
    trimmed["PYTHONPATH"] = shell["PYTHONPATH"] = str(ROOT)  # this checkout's coffer, whatever is installed

    async with serve(coffer_home, env=trimmed) as first:  # nothing recorded yet: the first session's, as before
        assert text(await first.call("alpha__env", {"name": "SSL_CERT_FILE"})) == "<unset>"
        checked = await coffer(shell, "doctor", "--json")  # from the user's shell: it records, and checks
        said = checked.stderr.decode()
        assert "lacked or had other values for" in said and "SSL_CERT_FILE" in said, said
        assert "SSL_CERT_FILE" in json.loads(checked.stdout)["engine_env"]["shell"]
        assert "ann" not in said and "hunter2" not in said and ca not in said  # names, never values

    written = shellenv.path()
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    kept = json.loads(written.read_text())["env"]
    assert kept["SSL_CERT_FILE"] == ca and kept["NO_PROXY"] == "localhost" and set(kept) <= set(shellenv.RECORDED)
    assert "HTTPS_PROXY" not in kept  # a proxy with credentials in it is a secret: left to the sessions

    control.stop(coffer_home / "coffer.toml")
    async with serve(coffer_home, env=trimmed) as agent:  # a new engine, started by an agent without them
        assert text(await agent.call("alpha__env", {"name": "SSL_CERT_FILE"})) == ca
        assert text(await agent.call("alpha__env", {"name": "LANG"})) == "C.UTF-8"
        with pytest.MonkeyPatch.context() as mp:  # `coffer doctor`'s check, from that shell again: nothing differs
            for name, value in shell.items():
                mp.setenv(name, value)
            assert control.check_env() == {"shell": [], "differs": [], "from_shell": []}
