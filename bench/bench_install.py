"""`coffer add NAME` over a sample of the recorded official registry's installable entries: how many
install and answer, with and without mending (coffer.discovery.launch.mend), as a whole `coffer add`
process each, in a fresh COFFER_HOME.

The sample: entries of ../shared/data/registry/registry.jsonl (whole server.json records) with an npm or
PyPI package that runs over stdio, in a fixed order (sha256 of the name), first N. Required inputs get a
placeholder value (`example`), as a user trying a server without an account would give; a server that
refuses to start without a real key counts as failed. What this machine's package mirrors lack (npm
E404, a PyPI package or version that is not there) is counted apart and left out of the rate. Where the
recording is absent the bench says so and exits 0.

  python bench/bench_install.py [--sample 16] [--timeout 120]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REGISTRY_FILE = ROOT.parent / "shared" / "data" / "registry" / "registry.jsonl"
MISSING = re.compile(r"\bE404\b|\bETARGET\b|404 Not Found|not found in the package registry|No solution found", re.I)


def sample(n: int) -> list[dict[str, object]]:
    entries = []
    for line in REGISTRY_FILE.open(encoding="utf-8"):
        server = json.loads(line)["server"]
        for package in server.get("packages") or []:
            transport = (package.get("transport") or {}).get("type", "stdio")
            if package.get("registryType") in ("npm", "pypi") and transport == "stdio":
                entries.append(server)
                break
    entries.sort(key=lambda s: hashlib.sha256(str(s["name"]).encode()).hexdigest())
    return entries[:n]


def install(server: dict[str, object], timeout: float) -> tuple[str, str, float]:
    """(outcome, detail, seconds): outcome is installed | mended | failed | mirror."""
    from tests.fixtures.registry_server import RecordedRegistry

    with tempfile.TemporaryDirectory(prefix="coffer-bench-install-") as home, RecordedRegistry([server]) as reg:
        env = {**os.environ, "COFFER_HOME": home, "COFFER_REGISTRY_REFRESH": "off"}
        inputs = []
        for package in server.get("packages") or []:  # type: ignore[union-attr]
            for var in package.get("environmentVariables") or []:
                if var.get("isRequired") and not var.get("default"):
                    inputs += ["--env", f"{var['name']}=example"]
        argv = [sys.executable, "-m", "coffer", "add", str(server["name"]), "--registry", reg.url]
        argv += ["--timeout", str(timeout), "--json", *inputs]
        t0 = time.perf_counter()
        for _ in range(6):  # a required argument `add` names: given a placeholder too, as a user would
            try:
                done = subprocess.run(
                    argv, env=env, capture_output=True, text=True, timeout=timeout + 60, stdin=subprocess.DEVNULL
                )
            except subprocess.TimeoutExpired:
                return "failed", "timed out", time.perf_counter() - t0
            needed = re.search(r"give --env (\S+)=VALUE", done.stderr)
            if done.returncode == 0 or needed is None:
                break
            argv += ["--env", f"{needed.group(1)}=example"]
        took = time.perf_counter() - t0
        if done.returncode == 0:
            added = json.loads(done.stdout)["server"]
            return ("mended" if added.get("source", {}).get("mended") else "installed"), added.get("command", ""), took
        error = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        return ("mirror" if MISSING.search(done.stderr) else "failed"), error[:160], took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    if not REGISTRY_FILE.exists():
        print(f"bench_install: the recorded registry is not here ({REGISTRY_FILE}); nothing to measure")
        return 0
    sys.path.insert(0, str(ROOT))
    counts: dict[str, int] = {}
    for server in sample(args.sample):
        outcome, detail, took = install(server, args.timeout)
        counts[outcome] = counts.get(outcome, 0) + 1
        print(f"{outcome:9s} {took:6.1f} s  {server['name']}: {detail}")
    tried = sum(counts.values()) - counts.get("mirror", 0)
    ok = counts.get("installed", 0) + counts.get("mended", 0)
    print(
        f"install success: {ok} of {tried} ({100.0 * ok / max(tried, 1):.0f}%), {counts.get('mended', 0)} of them "
        f"mended; without mending {counts.get('installed', 0)} of {tried}; "
        f"{counts.get('mirror', 0)} left out (not on this machine's mirrors)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
