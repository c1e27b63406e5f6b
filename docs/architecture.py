"""Draw docs/architecture.md from the code: the parts, what each imports, and each part's module map.

`python docs/architecture.py` rewrites the file; `--check` exits 1 when the file is not what the code
draws (tests/test_architecture.py runs the check, so the picture cannot go stale). Nothing is typed by
hand: the parts and their edges come from the import graph (every import counts, as the layering test
counts them), the module lines from each part's `__init__` docstring.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "coffer"
OUT = ROOT / "docs" / "architecture.md"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part(module: str) -> str:
    pieces = module.split(".")
    return ".".join(pieces[:2]) if len(pieces) > 1 else module


def imports() -> dict[str, set[str]]:
    """module -> the coffer modules it imports (a `from pkg import mod` counts as pkg.mod when mod is one)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.startswith("coffer")}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("coffer"):
                base = str(node.module)
                for alias in node.names:
                    targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        graph[name] = {t for t in targets if t != name}
    return graph


def _short(name: str) -> str:
    return name.removeprefix("coffer.") if name != "coffer" else "coffer"


def draw() -> str:
    graph = imports()
    packages = sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    counts = {p.name: len(list(p.glob("*.py"))) for p in packages}
    edges = sorted(
        {
            (_short(part(m)), _short(part(t)))
            for m, ts in graph.items()
            for t in ts
            if part(m) != part(t) and part(t) not in ("coffer", "coffer.errors")
        }
    )
    lines = [
        "# Architecture",
        "",
        "Drawn from the code by `python docs/architecture.py` (do not edit by hand; a test fails when it is",
        "stale). Each box is a part (a package of `coffer/`) and how many modules it has; an arrow is an",
        "import, and every arrow points down the layers (`tests/test_architecture.py`). `errors` and the",
        "package root, which every part may import, are left out.",
        "",
        "```mermaid",
        "flowchart TD",
    ]
    lines += [f'    {p.name}["{p.name}/<br/>{counts[p.name]} modules"]' for p in packages]
    lines += [f"    {a} --> {b}" for a, b in edges if "." not in a + b]
    lines += ["```", "", "A tools/call, host to upstream: `gateway.stdio` (or `gateway.http`) -> `gateway.server` ->"]
    lines += [
        "`gateway.routes` -> `gateway.view` (curation, pins) -> `gateway.pool` -> `upstreams.upstream` ->",
        "`upstreams.outbound` -> `upstreams.direct` / `upstreams.transport` -> the server's process; the",
        "answer comes back through `gateway.bigresults` and the invocation log (`log.calls`).",
        "`python bench/bench_call_walk.py` lists the modules one call really runs.",
        "",
        "## The parts and their modules",
        "",
        "Each part's own map, from its `__init__` docstring:",
    ]
    for pkg in packages:
        doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text())) or ""
        summary = doc.split("\n\n", 1)[0].replace("\n", " ")
        mapped = [m.group(0).strip() for m in re.finditer(r"^ {4}[A-Za-z_]\w*/?(?: .*)?$", doc, re.M)]
        lines += ["", f"### `{pkg.name}/`", "", summary, ""]
        lines += [f"- `{entry.split()[0]}`: {' '.join(entry.split()[1:])}" for entry in mapped]
    return "\n".join(lines) + "\n"


def main() -> int:
    text = draw()
    if "--check" in sys.argv[1:]:
        if not OUT.exists() or OUT.read_text() != text:
            print("docs/architecture.md is stale: run python docs/architecture.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
