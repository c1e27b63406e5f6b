"""What `serve --http --team` adds to a request: checking a member's access token, against the static
token check of `serve --http`, in this process. The token comes from the real OpenID provider the tests
use (tests/fixtures/oidc_idp.mjs, oidc-provider from npm in .ci/node); without node or it, the bench says
so and exits 0.

  first check   fetch the provider's metadata and keys, verify the signature and claims
  a new token   verify a token signed with a known key (a member's next token)
  cached        the per-request path for a token already checked (peek)
  static token  `serve --http`'s constant-time comparison, the baseline

  python bench/bench_team.py [--checks 20000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def per_call_us(fn: object, n: int) -> float:
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=20000)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_gateway import _free_port as free_port

    from coffer.trust.http_token import authorised
    from coffer.trust.team import Team, Verifier
    from tests.fixtures.idp import available, start_idp

    if not available():
        print("bench_team: needs node and oidc-provider in .ci/node (.ci/run installs them); nothing measured")
        return 0
    resource = f"http://127.0.0.1:{free_port()}/mcp"
    idp = start_idp(free_port(), resource, "bench")  # a bounded start: a provider that never listens fails
    try:
        verifier = Verifier(Team(idp.url, resource, ("mcp:tools",), (("group", "eng"),)))
        first, second = idp.token("agent-alice", resource), idp.token("agent-alice", resource)
        t0 = time.perf_counter()
        verifier.check(first)
        first_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        verifier.check(second)
        new_ms = (time.perf_counter() - t0) * 1000
        cached = per_call_us(lambda: verifier.peek(first), args.checks)
        header, static = b"Bearer " + b"x" * 43, "x" * 43
        baseline = per_call_us(lambda: authorised(header, static), args.checks)
        print(f"first check (metadata, keys, verify)   {first_ms:8.2f} ms")
        print(f"a new token (verify, keys known)       {new_ms:8.2f} ms")
        print(f"cached, per request                    {cached:8.2f} us   ({cached / baseline:.1f}x the static token)")
        print(f"static token (serve --http), baseline  {baseline:8.2f} us")
    finally:
        idp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
