"""The package as users get it: every file Coffer reads at run time ships in the wheel, and nothing of the
tests or benches does.

Builds nothing: the first two tests read pyproject.toml's package data and the code; the third opens the
wheel `.ci/wheel.sh` builds and names in COFFER_WHEEL.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import re
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "coffer"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def declared(relative: str) -> bool:
    """Does the wheel carry `relative` (a path under coffer/)? Modules of packages always; any other file
    only as `[tool.setuptools.package-data]` declares it."""
    if relative.endswith(".py"):
        return (PACKAGE / relative).parent.joinpath("__init__.py").exists()
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["coffer"]
    return any(fnmatch.fnmatch(relative, pattern) for pattern in patterns)


def data_files() -> list[str]:
    """Every file under coffer/ but compiled bytecode, relative to it."""
    found = []
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found += [str(Path(folder, f).relative_to(PACKAGE)) for f in files if not f.endswith(".pyc")]
    return sorted(found)


def test_every_file_in_the_package_ships() -> None:
    missing = [f for f in data_files() if not declared(f)]
    assert not missing, f"not in [tool.setuptools.package-data] (the wheel would lack them): {missing}"


_PARENTS = re.compile(r"parents\[(\d+)\]")


def read_at_run_time() -> dict[str, str]:
    """The files and folders the code opens beside itself: `Path(__file__)...` / "name" and
    `os.path.dirname(__file__)` joined with names, and `importlib.resources.files("pkg")` with names; each
    as the path under coffer/ it resolves to -> the module that reads it."""
    found: dict[str, str] = {}
    for module in PACKAGE.rglob("*.py"):
        source = module.read_text()
        if "__file__" not in source and "resources.files(" not in source:
            continue
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source, str(module))):
            if not isinstance(node, ast.Assign | ast.Return | ast.Expr | ast.AnnAssign):
                continue
            text = "\n".join(lines[node.lineno - 1 : node.end_lineno])
            skip: set[str] = set()
            if "__file__" in text:
                parents = _PARENTS.search(text)
                up = int(parents[1]) if parents else len(re.findall(r"\.parent\b", text)) - 1
                base = module.parents[up] if up >= 0 else module.parent
            elif (package := re.search(r"resources\.files\(\"(coffer[\w.]*)\"\)", text)) is not None:
                base, skip = ROOT.joinpath(*package[1].split(".")), {package[1]}
            else:
                continue
            keywords = {id(k.value) for k in ast.walk(node) if isinstance(k, ast.keyword)}  # encoding="utf-8"
            constants = sorted(
                (n for n in ast.walk(node) if isinstance(n, ast.Constant) and id(n) not in keywords),
                key=lambda n: (n.lineno, n.col_offset),
            )
            names = [n.value for n in constants if isinstance(n.value, str) and re.fullmatch(r"[\w.-]+", n.value)]
            names = [n for n in names if n not in skip]
            target = base.joinpath(*names)
            if names and target.is_relative_to(PACKAGE):  # (coffer/__init__.py reads a checkout's pyproject.toml)
                found[str(target.relative_to(PACKAGE))] = str(module.relative_to(ROOT))
    return found


def test_every_file_the_code_reads_beside_itself_ships() -> None:
    reads = read_at_run_time()
    # the ones known today, so that a change in how they are read keeps this test finding them
    assert {"ranking/glossary.txt", "examples/demo_server.py", "console/static", "gateway/static"} <= set(reads)
    assert {"upstreams/reaper.py", "upstreams/lockdown.py", "upstreams/netgate.py"} <= set(reads)
    for relative, reader in reads.items():
        path = PACKAGE / relative
        assert path.exists(), f"{reader} reads {relative}, which is not in coffer/"
        files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
        assert files, f"{reader} reads {relative}, an empty folder"
        for file in files:
            assert declared(str(file.relative_to(PACKAGE))), f"{reader} reads {file}, which the wheel lacks"


def test_the_built_wheel_carries_the_package_and_nothing_of_the_tests() -> None:
    if not os.environ.get("COFFER_WHEEL"):  # not dist/'s: one built before a file was added would fail
        pytest.skip("no wheel named: .ci/wheel.sh builds one and runs this test on it (COFFER_WHEEL)")
    wheel = Path(os.environ["COFFER_WHEEL"])
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {n.removeprefix("coffer/") for n in names if n.startswith("coffer/")}
    assert set(data_files()) - shipped == set(), "files of coffer/ the wheel lacks"
    tops = {n.split("/")[0] for n in names}
    assert not {t for t in tops if t in ("tests", "bench", "evals", "deploy", "docs") or t.startswith("test")}
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    version = re.search(r"^Version: (.+)$", zipfile.ZipFile(wheel).read(meta).decode(), re.M)
    assert version and version[1] == PYPROJECT["project"]["version"]


def test_the_version_is_written_once() -> None:
    """pyproject.toml's version is the one `coffer --version` and the gateway's serverInfo say."""
    import coffer

    assert coffer.__version__ == PYPROJECT["project"]["version"]
    assert not re.search(r"^__version__\s*=", (PACKAGE / "__init__.py").read_text(), re.M)
