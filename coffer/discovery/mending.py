"""What a package runner says, read: a uvx launch line mended where its own output says how it runs,
and the launch line that fetches a package (npx, uvx) into its runner's cache without running it.

uv names the package's command when it is not the package's name ("Use `uvx --from PKG BIN` instead"), or
lists them all ("The following executables are available: ...") where there are several; a server written
for the MCP SDK 1.x says so when it dies importing what 2.x no longer has.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from coffer.discovery.entries import short_name

# uv's own advice when a package's command has another name than the package
_UV_FROM = re.compile(r"Use `uvx --from (\S+) ([^`\s]+)` instead")
# uv's list when the package has several commands and none is named as it is
_UV_LIST = re.compile(r"The following executables are available:[ \t]*\n((?:[ \t]*- [^\n]+\n?)+)")
_UV_PICK = re.compile(r"Use `uvx --from \S+ <EXECUTABLE-NAME>` instead")
# a server written for the MCP SDK 1.x, run with 2.x (which uvx resolves when the package does not pin it)
_MCP_1X = re.compile(
    r"No module named 'mcp\.|cannot import name '\w+' from 'mcp[.']|'(?:Server|FastMCP)' object has no attribute"
)
# uvx's options that take a value (the next word, where it is not given as --opt=VALUE)
# fmt: off
_UVX_VALUED = frozenset({
    "--from", "--with", "-w", "--with-editable", "--with-requirements", "--python", "-p", "--index",
    "--default-index", "--index-url", "-i", "--extra-index-url", "--find-links", "-f", "--constraints",
    "--overrides", "--build-constraints", "-b", "--env-file", "--cache-dir", "--directory", "--project",
    "--config-file", "--index-strategy", "--keyring-provider", "--resolution", "--prerelease",
    "--exclude-newer", "--link-mode", "--refresh-package", "--reinstall-package", "--upgrade-package", "-P",
    "--color", "--python-preference", "--allow-insecure-host", "--no-binary-package", "--no-build-package",
    "--config-setting", "-C",
})
# fmt: on


@dataclass(frozen=True)
class Mend:
    """A launch line changed so that it runs, and why (kept in the entry's `source.mended`)."""

    command: list[str]
    why: str


def uvx_target(command: list[str]) -> int | None:
    """Where the package (or, after `--from`, the command) is in a uvx launch line: its first word that is
    neither an option nor an option's value; None for a line that is not uvx's or names none."""
    if not command or os.path.basename(command[0]) != "uvx":
        return None
    n = 1
    while n < len(command):
        word = command[n]
        if not word.startswith("-"):
            return n
        n += 2 if word in _UVX_VALUED else 1
    return None


def uv_commands(failure: str) -> list[str]:
    """The commands uv says a package provides, where it ran none of them ("The following executables
    are available: ..."); [] where it said nothing of the kind."""
    listed = _UV_LIST.search(failure)
    if listed is None and not _UV_PICK.search(failure):
        return []
    lines = (listed.group(1) if listed else failure).splitlines()
    return [m.group(1) for m in (re.match(r"\s*- (\S+)\s*$", line) for line in lines) if m]


def mend(command: list[str], failure: str, names: tuple[str, ...] = ()) -> Mend | None:
    """A uvx launch line that runs where the server's own output (`failure`, its stderr) says how: the
    package's command by uv's advice (`uvx --from PKG==VER BIN`), or, where uv lists several, the one
    named for the package or the server (`names`: its vault and short names); or the SDK major it was
    written for (`--with 'mcp<2'`). None when nothing here is recognised, or it was mended so already."""
    at = uvx_target(command)
    if at is None:
        return None
    advice = _UV_FROM.search(failure)
    binary = advice.group(2) if advice else None
    if binary is None or not re.fullmatch(r"[A-Za-z0-9._-]+", binary):
        fitting = named_for(uv_commands(failure), (command[at], *names))
        binary = fitting[0] if len(fitting) == 1 else None
    if binary is not None and "--from" not in command:
        return Mend(
            [*command[:at], "--from", command[at], binary, *command[at + 1 :]],
            f"the package's command is `{binary}`, not its name (uv: use `uvx --from`)",
        )
    if _MCP_1X.search(failure) and "mcp<2" not in command:
        return Mend(
            [command[0], "--with", "mcp<2", *command[1:]],
            "written for the MCP SDK 1.x, which it does not pin: run with mcp<2",
        )
    return None


def named_for(commands: list[str], names: tuple[str, ...]) -> list[str]:
    """The commands named for one of `names` (a package `mcp-weather==1.0`, a server `weather`), read as
    short names are (`weather-mcp-server` is named for `weather`; `weather-cli` is not)."""
    wanted = {short_name("x/" + re.split(r"[=<>~!@\[]", n, maxsplit=1)[0]) for n in names if n}
    return [c for c in commands if short_name("x/" + c) in wanted]


_NPX_FLAGS = frozenset({"-y", "--yes", "-q", "--quiet"})


def fetch_command(command: list[str]) -> list[str] | None:
    """A launch line that fetches the package `command` runs (npx, uvx) into its runner's cache, as its
    start would, and runs none of its code: `uvx ... --from PKG python -c ''`, `npx -y -p PKG node -e ''`
    (the same tool environment and the same `_npx` folder the start then finds). None for other lines."""
    runner = os.path.basename(command[0]) if command else ""
    if runner == "uvx":
        at = uvx_target(command)
        if at is None:
            return None
        named = any(w == "--from" or w.startswith("--from=") for w in command[:at])
        return [*command[:at], *([] if named else ["--from", command[at]]), "python", "-c", ""]
    if runner != "npx":
        return None
    n, package = 1, False
    while n < len(command) and command[n].startswith("-"):
        word = command[n]
        if word in ("-p", "--package"):
            n, package = n + 2, True
        elif word.startswith("--package="):
            n, package = n + 1, True
        elif word in _NPX_FLAGS:
            n += 1
        else:
            return None  # an option this does not know: nothing is fetched ahead
    if n >= len(command):
        return None
    return [*command[:n], *([] if package else ["-p", command[n]]), "node", "-e", ""]
