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


if __name__ == "__main__":
    main()
