"""What a script may not even try, found before it runs: a clear refusal beats a sandbox error.

The sandbox (pydantic-monty) already has no files, network or environment and hides dunder attributes;
these checks make the refusals say why, and keep imports to a small set of pure modules: a module
that does nothing without the host (`os`, `pathlib`, `sys`) is refused by name.
"""

from __future__ import annotations

import ast

# pure modules the sandbox implements, that need nothing from the host
ALLOWED_IMPORTS = frozenset(
    {
        *("asyncio", "base64", "bisect", "collections", "copy", "csv", "dataclasses", "datetime", "decimal"),
        *("functools", "hashlib", "itertools", "json", "math", "random", "re", "time", "typing"),
    }
)
MAX_SOURCE = 100_000  # characters: a script, not a data file


class ScriptRefused(Exception):
    """A script refused before it ran (the message is shown to the agent as it is)."""


def check(code: str) -> None:
    """Raise ScriptRefused for a script that must not run: too long, not Python, a refused import or name."""
    if len(code) > MAX_SOURCE:
        raise ScriptRefused(f"the script is {len(code):,} characters; at most {MAX_SOURCE:,}")
    try:
        tree = compile(code, "<script>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError as exc:
        where = f"line {exc.lineno}: " if exc.lineno else ""
        raise ScriptRefused(f"SyntaxError: {where}{exc.msg}") from None
    allowed = ", ".join(sorted(ALLOWED_IMPORTS))
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [("." * node.level) + (node.module or "")]
        for module in modules:
            if module.split(".")[0] not in ALLOWED_IMPORTS:
                raise ScriptRefused(
                    f"line {line}: import of '{module}' refused: scripts have no files, network or processes; "
                    f"they may import {allowed}, and reach everything else through call_tool"
                )
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if name is not None and name.startswith("__") and name != "__name__":
            raise ScriptRefused(f"line {line}: '{name}' refused: scripts may not reach dunder names")
