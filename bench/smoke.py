"""Every bench, run once at its smallest, so none rots unseen (`.ci/run` runs this; its figures mean
nothing at this size: the benches' own runs make the README's and docs/' figures).

  python bench/smoke.py            # all of them, one after another, each bounded
  python bench/smoke.py gateway    # those whose name holds a word

A bench whose real peers are not installed (bench_http_peers without bench/.peers) says so and passes:
it is the bench's own code that must not rot. Exit status 1 when any bench fails, naming it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SMALLEST: dict[str, list[str]] = {
    "bench_big_call": ["--sizes", "1"],
    "bench_call_walk": [],
    "bench_codemode": ["--runs", "1"],
    "bench_engine": ["--sessions", "1", "--servers", "2"],
    "bench_find": ["--entries", "300", "--runs", "1"],
    "bench_front": ["--fronts", "2", "--calls", "20", "--runs", "1"],
    "bench_gateway": ["--calls", "20", "--servers", "2", "--runs", "1"],
    "bench_http_clients": ["--calls", "10"],
    "bench_http_peers": ["--rounds", "1", "--calls", "5", "--runs", "1"],
    "bench_import": ["--servers", "20"],
    "bench_install": ["--sample", "1"],
    "bench_log": [],
    "bench_models": ["--quick"],
    "bench_profiles": [],
    "bench_ranking": ["--queries", "5", "--sizes", "1000"],
    "bench_sandbox": ["--starts", "1", "--calls", "20"],
    "bench_search_cli": ["--runs", "1"],
    "bench_soak": ["--minutes", "0.1", "--workers", "1"],
    "bench_team": ["--checks", "100"],
    "bench_team_load": ["--members", "2", "--sessions", "1", "--calls", "2"],
}
LIMIT_S = 300


def run_bounded(name: str) -> tuple[bool, list[str]]:
    """Whether the bench passed, and the end of what it printed. One still running after LIMIT_S is sent
    SIGABRT, on which Python's faulthandler prints every thread's stack: a hang says where it hung."""
    argv = [sys.executable, "-X", "faulthandler", str(HERE / f"{name}.py"), *SMALLEST[name]]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        try:
            out, _ = proc.communicate(timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            try:
                out, _ = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:  # its stack is lost, but the run goes on
                proc.kill()
                out = ""
            return False, [f"still running after {LIMIT_S} s; its stacks:", *out.strip().splitlines()[-40:]]
    return proc.returncode == 0, out.strip().splitlines()[-3:]


def main(words: list[str]) -> int:
    found = sorted(p.stem for p in HERE.glob("bench_*.py"))
    unknown = [name for name in found if name not in SMALLEST]
    if unknown:  # a new bench must say how it runs at its smallest
        print(f"bench/smoke.py: no smallest run for {', '.join(unknown)}: add it to SMALLEST")
        return 1
    failed = []
    for name in found:
        if words and not any(w in name for w in words):
            continue
        t0 = time.perf_counter()
        ok, tail = run_bounded(name)
        print(f"{'ok  ' if ok else 'FAIL'} {name:20} {time.perf_counter() - t0:6.1f} s")
        if not ok:
            failed.append(name)
            print("     " + "\n     ".join(tail))
    if failed:
        print(f"{len(failed)} bench(es) failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
