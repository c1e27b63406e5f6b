"""The house rules, read off the source: every import points down the layers, and no modules form a circle.

Layers, bottom to top (coffer/__init__.py draws them): errors; vault; trust, ranking, log; memory;
results, telemetry; upstreams; gateway; clients, engine; manage; console; cli. A module may import its
own part and parts below it. Every import counts, including those inside functions and under
`if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
import re
import runpy
from collections.abc import Callable
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
    "coffer.discovery": 3,
    "coffer.results": 4,
    "coffer.telemetry": 4,
    "coffer.upstreams": 5,
    "coffer.codemode": 5,
    "coffer.gateway": 6,
    "coffer.clients": 7,
    "coffer.engine": 7,
    "coffer.manage": 8,
    "coffer.examples": 8,
    "coffer.console": 9,
    "coffer.cli": 10,
    "coffer.__main__": 11,
}


# The import graph is read by the same code that draws docs/architecture.md.
_DRAWING = runpy.run_path(str(ROOT.parent / "docs" / "architecture.py"))
module_name: Callable[[Path], str] = _DRAWING["module_name"]
part: Callable[[str], str] = _DRAWING["part"]
imports: Callable[[], dict[str, set[str]]] = _DRAWING["imports"]


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


def _listed(doc: str) -> set[str]:
    """The names a module map lists: the first word of each indented line (`    name   what it is`)."""
    return {m.group(1) for m in re.finditer(r"^ {4}([A-Za-z_]\w*)/?(?: |$)", doc, re.M)}


def test_every_module_map_names_every_module_and_nothing_else() -> None:
    """Each part's `__init__` names each of its modules on a line of its own, and lists no module that
    is gone; coffer/__init__.py names each part and top-level module."""
    problems = []
    for pkg in sorted(p for p in ROOT.iterdir() if (p / "__init__.py").exists()):
        doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text())) or ""
        modules = {p.stem for p in pkg.glob("*.py") if p.stem != "__init__"}
        listed = _listed(doc)
        problems += [f"coffer/{pkg.name}/__init__.py does not name {m}" for m in sorted(modules - listed)]
        problems += [f"coffer/{pkg.name}/__init__.py names {m}, which is gone" for m in sorted(listed - modules)]
    top = ast.get_docstring(ast.parse((ROOT / "__init__.py").read_text())) or ""
    parts = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    parts |= {p.stem for p in ROOT.glob("*.py") if p.stem != "__init__"}
    named = set(re.findall(r"(?<![\w.])([a-z_]+)/?(?=\s)", top))
    problems += [f"coffer/__init__.py does not name {p}" for p in sorted(parts - named)]
    assert not problems, "\n".join(problems)


def test_no_part_reaches_into_another_parts_private_names() -> None:
    """`from coffer.x.m import _name`, or `m._name` on a module of another part, couples a part to what
    another keeps to itself: public names only across parts."""
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    offenders = []
    for name, path in sorted(modules.items()):
        tree = ast.parse(path.read_text())
        foreign: set[str] = set()  # local names bound to modules of another part
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("coffer"):
                base = str(node.module)
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    other = part(target if target in modules else base) != part(name)
                    if other and target in modules:
                        foreign.add(alias.asname or alias.name)
                    elif other and alias.name.startswith("_") and not alias.name.startswith("__"):
                        offenders.append(f"{name} imports {base}.{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("coffer") and part(alias.name) != part(name) and alias.asname:
                        foreign.add(alias.asname)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in foreign
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                offenders.append(f"{name} uses {node.value.id}.{node.attr}")
    assert not offenders, "private names used across parts:\n" + "\n".join(sorted(set(offenders)))


def test_the_architecture_picture_is_drawn_from_the_code_as_it_is() -> None:
    """docs/architecture.md is what docs/architecture.py draws now (run it after moving modules)."""
    drawn = _DRAWING["draw"]()
    assert (ROOT.parent / "docs" / "architecture.md").read_text() == drawn, "run: python docs/architecture.py"


def test_the_gateway_holds_the_host_side_only() -> None:
    """The gateway stays one room of at most 20 modules; the client side of the wire is coffer.upstreams."""
    assert len(list((ROOT / "gateway").glob("*.py"))) <= 20
    assert not [
        m for m, ts in imports().items() if m.startswith("coffer.upstreams") for t in ts if part(t) == "coffer.gateway"
    ]
