"""Import and list at scale: `coffer import json --path FILE --no-probe` of N servers, then `coffer list`
and `coffer list --json`, each as a whole process, in a temporary vault. Prints figures only.

  python bench/bench_import.py [--servers 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", type=int, default=1000)
    n = parser.parse_args().servers
    work = Path(tempfile.mkdtemp(prefix="coffer-bench-import-"))
    source = work / "client.json"
    servers = {f"server-{i}": {"command": "npx", "args": ["-y", f"@example/mcp-{i}"]} for i in range(n)}
    source.write_text(json.dumps({"mcpServers": servers}))
    env = dict(os.environ, COFFER_HOME=str(work / "vault"))
    coffer = [sys.executable, "-m", "coffer"]
    print(f"{n} servers")
    imported = timed([*coffer, "import", "json", "--path", str(source), "--no-probe"], env)
    print(f"  import (one write) : {imported:.2f} s")
    print(f"  coffer list        : {timed([*coffer, 'list'], env):.2f} s")
    print(f"  coffer list --json : {timed([*coffer, 'list', '--json'], env):.2f} s")
    print(f"  registry size      : {(work / 'vault' / 'coffer.toml').stat().st_size // 1024} KB")
    init_s, list_s = serve_times(coffer, env)
    print(f"  coffer serve       : initialize answered in {init_s:.2f} s, first tools/list in {list_s:.2f} s")
    print("                       (the imported npx servers cannot start offline: each fails and is remembered)")


def serve_times(coffer: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Seconds from spawning `coffer serve` to its initialize answer, and to its first tools/list answer."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([*coffer, "serve", "--standalone"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None

    def ask(rid: int, method: str, params: dict | None = None) -> float:
        message = {"jsonrpc": "2.0", "id": rid, "method": method, **({"params": params} if params else {})}
        proc.stdin.write(json.dumps(message).encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        while json.loads(proc.stdout.readline()).get("id") != rid:  # type: ignore[union-attr]
            pass
        return time.perf_counter() - t0

    try:
        info = {"name": "bench", "version": "1"}
        init = ask(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info})
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        listed = ask(2, "tools/list")
    finally:
        proc.stdin.close()
        proc.wait(60)
    return init, listed


if __name__ == "__main__":
    main()
