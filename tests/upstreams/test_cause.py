"""A failed server shows the line that says why, not its last line: real failures of npm (a 404), uv (a
package that does not exist), Node (an uncaught error, then its version banner) and Python (a traceback),
each started as a vault starts it (confined), and the lines a runtime prints after the cause."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from coffer.errors import UpstreamError
from coffer.gateway.pool import probe
from coffer.upstreams.cause import cause
from coffer.vault import registry

pytestmark = pytest.mark.anyio


async def _failure(command: str, *args: str) -> str:
    cfg = registry.ServerConfig(name="broken", command=command, args=list(args), timeout=90)
    with pytest.raises(UpstreamError) as failed:
        await probe(cfg)
    return str(failed.value)


@pytest.mark.skipif(shutil.which("npx") is None, reason="no npx here")
async def test_an_npm_404_names_the_404(coffer_home: Path) -> None:
    said = await _failure("npx", "-y", "@coffer-test-does-not-exist/no-such-server-404")
    assert "E404" in said or "404 Not Found" in said, said
    assert "complete log" not in said


@pytest.mark.skipif(shutil.which("uvx") is None, reason="no uvx here")
async def test_a_uv_failure_names_the_resolution(coffer_home: Path) -> None:
    said = await _failure("uvx", "coffer-test-no-such-package-404")
    assert "not found in the package registry" in said or "No solution found" in said, said


@pytest.mark.skipif(shutil.which("node") is None, reason="no node here")
async def test_a_node_crash_names_the_error_not_the_version(coffer_home: Path) -> None:
    said = await _failure("node", "-e", "throw new Error('Authentication failed: the token was revoked')")
    assert "Error: Authentication failed: the token was revoked" in said, said
    assert "Node.js v" not in said


async def test_a_python_traceback_names_the_exception(coffer_home: Path) -> None:
    said = await _failure(sys.executable, "-c", "import json; json.loads('{')")
    assert "JSONDecodeError: Expecting property name" in said, said
    assert 'File "' not in said


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (
            "  × Failed to fetch: `https://pypi.org/simple/x/`\n  ├─▶ Request failed after 3 retries\n"
            "  ╰─▶ invalid peer certificate: UnknownIssuer\n"
            "  hint: Consider enabling `--system-certs` to use the platform's certificate store",
            "╰─▶ invalid peer certificate: UnknownIssuer",
        ),
        (
            "error: Failed to fetch: `https://pypi.org/simple/x/`\n  Caused by: Request failed after 3 retries\n"
            "  Caused by: client error (Connect)\n  Caused by: invalid peer certificate: UnknownIssuer\n"
            "hint: Consider enabling use of system TLS certificates",
            "error: Failed to fetch: `https://pypi.org/simple/x/` | Caused by: invalid peer certificate",
        ),
        ("starting\nlistening on stdio", "listening on stdio"),  # nothing says why: the last line, as before
        ("panic: runtime error: index out of range [3]\n\ngoroutine 1 [running]:\nmain.main()", "panic: runtime"),
    ],
)
def test_the_cause_line_is_read_by_general_rules(tail: str, expected: str) -> None:
    assert cause(tail).startswith(expected), cause(tail)
