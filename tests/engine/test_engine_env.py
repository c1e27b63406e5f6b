"""The engine's environment does not depend on which agent started it: a session that trims its
environment (as the MCP SDK's default does: no certificates, no proxies, no locale) starts the engine,
and a later session with the full environment gets a working server, with real uvx fetching a real
package. The rule: the user's shell's values, as `coffer` commands record them, else a runtime's variable
the engine lacks is taken from the first session that has it; PATH gains what it lacks, and what was down
starts again."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import anyio
import pytest

from coffer.manage import servers
from coffer.vault import registry, shellenv
from tests.fixtures.gateway_harness import ROOT, serve, text

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("uvx") is None, reason="no uvx here: pip install uv"),
]
TRIMMED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")  # the SDK's get_default_environment()


async def test_a_trimmed_first_session_does_not_decide_for_a_later_full_one(coffer_home: Path) -> None:
    time = registry.ServerConfig(name="time", command="uvx", args=["mcp-server-time==2026.10.19"], timeout=60)
    servers.add_server(time, path=coffer_home / "coffer.toml")
    full = {**os.environ, "COFFER_HOME": str(coffer_home), "PYTHONPATH": str(ROOT)}
    full.setdefault("LANG", "C.UTF-8")
    trimmed = {k: full[k] for k in TRIMMED if k in full} | {"COFFER_HOME": str(coffer_home), "PYTHONPATH": str(ROOT)}
    args = {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}
    async with serve(coffer_home, env=trimmed, timeout=120) as first:
        await first.call("coffer__call_tool", args)  # may fail: it has no certificates to fetch with
        async with serve(coffer_home, env=full, timeout=120) as later:
            with anyio.fail_after(120):
                while True:
                    result = await later.call("coffer__call_tool", args)
                    if not result.is_error:
                        break
                    await anyio.sleep(1)
            assert '"timezone": "UTC"' in text(result)
            other = {**full, "SSL_CERT_FILE": full.get("SSL_CERT_FILE", "/etc/ssl/certs") + ".elsewhere"}
            argv = [sys.executable, "-m", "coffer", "call", "time__get_current_time", '{"timezone": "UTC"}']
            done = await anyio.run_process(argv, env=other, check=False)
            said = done.stderr.decode()
            # A command from the user's shell records its values, and the engine takes them (coffer.vault.
            # shellenv): the shell is the user's word, so there is no difference left to report.
            assert done.returncode == 0 and "has other values" not in said, said
            assert shellenv.recorded()["SSL_CERT_FILE"] == other["SSL_CERT_FILE"]
