"""The house rules, read off the source: every import points down the layers, and no modules form a circle.

Layers, bottom to top (coffer/__init__.py draws them): errors; vault; trust, ranking, log; memory;
results, telemetry; upstreams; gateway; clients, engine; manage; console; cli. A module may import its
own part and parts below it. Every import counts, including those inside functions and under
`if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "coffer"
LAYER = {
    "coffer": 0,  # __version__
    "coffer.errors": 0,
    "coffer.vault": 1,
    "coffer.loopback": 1,
    "coffer.trust": 2,
    "coffer.ranking": 2,
    "coffer.log": 2,
    "coffer.memory": 3,
    "coffer.results": 4,
    "coffer.telemetry": 4,
    "coffer.upstreams": 5,
    "coffer.gateway": 6,
    "coffer.clients": 7,
    "coffer.engine": 7,
    "coffer.manage": 8,
    "coffer.examples": 8,
    "coffer.console": 9,
    "coffer.cli": 10,
    "coffer.__main__": 11,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part(module: str) -> str:
    pieces = module.split(".")
    return ".".join(pieces[:2]) if len(pieces) > 1 else module


def imports() -> dict[str, set[str]]:
    """module -> the coffer modules it imports (a `from pkg import mod` counts as pkg.mod when mod is one)."""
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
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


def test_every_import_points_down() -> None:
    upward = []
    for module, targets in imports().items():
        for target in targets:
            if part(target) != part(module) and LAYER[part(target)] >= LAYER[part(module)]:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports that point up or sideways:\n" + "\n".join(sorted(upward))


def test_no_module_imports_in_a_circle() -> None:
    graph = imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not circles, "modules that import each other in a circle: " + "; ".join(" <-> ".join(c) for c in circles)


def test_every_part_is_known_and_says_what_it_is() -> None:
    parts = {part(m) for m in imports()}
    assert parts <= set(LAYER), f"a part with no layer: {sorted(parts - set(LAYER))}"
    for pkg in (p for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text()))
        where = f"coffer/{pkg.name}/__init__.py"
        assert doc and "import" in doc.lower(), f"{where} must say what the part is and what it may import"
