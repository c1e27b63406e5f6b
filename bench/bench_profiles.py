"""What profiles save a client per request: advertised tools and tokens (`coffer.results.tokens.tool_tokens`,
the one count) over the 222 real tools of tests/data/real-servers.json, for no profile, a 40-tool cap and
search mode. Prints figures only."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    from bench_search_cli import seed_vault

    counts = seed_vault(tempfile.mkdtemp(prefix="coffer-bench-profiles-"))
    from coffer.manage.profiles import preview
    from coffer.vault import registry

    registry.add_profile(registry.Profile(name="cap40", max_tools=40))
    registry.add_profile(registry.Profile(name="lookup", mode="search"))
    print(f"{sum(counts.values())} tools from {len(counts)} servers")
    base = preview(None)
    for label, name in (("no profile", None), ("max_tools = 40", "cap40"), ('mode = "search"', "lookup")):
        row = preview(name)
        share = 100.0 * row["tokens"] / base["tokens"]
        print(f"  {label:16} {row['advertised']:4} tools  {row['tokens']:7} tokens  ({share:5.1f}% of no profile)")


if __name__ == "__main__":
    main()
