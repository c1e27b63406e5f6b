"""Peak memory of `coffer serve` around one very large tools/call, beside the upstream's own peak.

    python bench/bench_big_call.py [--sizes 10,50]

Raw JSON-RPC over stdio to a real `coffer serve` with the fixture upstream (the MCP SDK's low-level
server) behind it. Per size: a call whose argument is SIZE MB and whose answer is short (`fail`), one
whose answer echoes it back (`echo`, kept for being over the token cap), and a small call whose result
is SIZE MB of log lines (`big`), kept (the default) and passed whole (`result_max_tokens = 0`).
Printed: how much each process's peak resident size (VmHWM) grew, and that growth as a multiple of the
payload. The upstream is the baseline: it holds the same payload, parsed by the same SDK, in the same
run. Linux only (/proc). Figures, not asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _hwm_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Gateway:
    def __init__(self, home: Path) -> None:
        env = dict(os.environ, COFFER_HOME=str(home))
        cmd = [sys.executable, "-m", "coffer", "serve", "--standalone"]  # the gateway process itself is measured
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.ids = 0

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.ids += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.ids, "method": method}
        if params is not None:
            message["params"] = params
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            answer = json.loads(self.proc.stdout.readline())
            if answer.get("id") == self.ids:
                return answer

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def run(size_mb: int, tool: str, keep: bool = True) -> tuple[float, float]:
    """(gateway growth, upstream growth) in MiB for one call of `tool` with a SIZE MB argument, or (`big`)
    a small call whose result is SIZE MB; `keep` False turns keeping big results off (passed whole)."""
    from coffer.vault import registry
    from tests.fixtures.gateway_harness import add_fixture, host_pid

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        os.environ["COFFER_HOME"] = str(home)
        add_fixture(home, "up", "big", timeout=120)
        if not keep:
            with registry.edit() as doc:
                doc["settings"] = {"result_max_tokens": 0}
        gw = Gateway(home)
        try:
            init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}
            gw.call("initialize", init)
            ident = gw.call("tools/call", {"name": "up__pid"})["result"]["content"][0]["text"]
            upstream_pid = host_pid(ident)  # PID@START@PIDNS: confined, its pid is its sandbox's
            gw.call("tools/call", {"name": "up__echo", "arguments": {"text": "warm"}})
            # one kept result first: the tokenizer and the results store load once per process, not per MB
            gw.call("tools/call", {"name": "up__big", "arguments": {"kb": 300}})
            before = (_hwm_mib(gw.proc.pid), _hwm_mib(upstream_pid))
            if tool == "big":
                answer = gw.call("tools/call", {"name": "up__big", "arguments": {"kb": size_mb * 1024}})
            else:
                payload = "y" * (size_mb * 1024 * 1024)
                answer = gw.call("tools/call", {"name": f"up__{tool}", "arguments": {"text": payload}})
            assert "result" in answer, answer
            after = (_hwm_mib(gw.proc.pid), _hwm_mib(upstream_pid))
        finally:
            gw.close()
    return after[0] - before[0], after[1] - before[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,50", help="argument sizes in MB (default 10,50)")
    args = parser.parse_args(argv)
    from coffer.cli import render

    rows = []
    cases = (
        ("fail", True, "request only"),
        ("echo", True, "request + echoed answer (kept)"),
        ("big", True, "result only, kept (the default)"),
        ("big", False, "result only, passed whole (result_max_tokens = 0)"),
    )
    for size in (int(s) for s in args.sizes.split(",")):
        for tool, keep, what in cases:
            gateway, upstream = run(size, tool, keep)
            ratios = (f"{gateway:.0f}", f"{gateway / size:.2f}x", f"{upstream:.0f}", f"{upstream / size:.2f}x")
            rows.append((f"{size} MB", what, *ratios))
    render.table(
        ["payload", "call", "coffer serve peak +MiB", "x payload", "upstream (SDK server) peak +MiB", "x payload"],
        rows,
        title="peak resident memory growth around one large tools/call",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
