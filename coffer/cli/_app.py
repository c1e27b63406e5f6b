"""The Typer app and the error boundary shared by every command module."""

from __future__ import annotations

from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from coffer import __version__
from coffer.errors import CofferError


class CofferGroup(TyperGroup):
    """Turns a `CofferError` raised by any command into `coffer: error: ...` and its exit code (and,
    under `--json`, into a JSON object on stdout as well, so a script that parses stdout gets one);
    names every argument and option value in help as a person would (`NAME`, `--env KEY=VALUE`)."""

    def invoke(self, ctx: Any) -> Any:
        as_json = "--json" in [*getattr(ctx, "_protected_args", []), *ctx.args]  # taken from ctx as it runs
        words = [*getattr(ctx, "_protected_args", []), *ctx.args]
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            setattr(exc, "message", _hinted(exc, words))  # noqa: B010 (click's message, in place)
            raise
        except CofferError as exc:
            _report(exc, as_json)
        except BaseExceptionGroup as group:  # a CofferError raised in a task group (a probe's record)
            found = group.subgroup(lambda e: isinstance(e, CofferError))
            if found is None:
                raise
            first = found.exceptions[0]
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            assert isinstance(first, CofferError)
            _report(first, as_json)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """`coffer -h`: commands in groups, the way `gh` and `uv` list theirs, each with its whole first
        sentence (not cut at a width)."""
        listed = {name: self.get_command(ctx, name) for name in self.list_commands(ctx)}
        placed: set[str] = set()
        for title, names in SECTIONS:
            rows = [(n, _summary(listed[n])) for n in names if listed.get(n) is not None and not listed[n].hidden]
            placed.update(names)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        rest = [(n, _summary(c)) for n, c in listed.items() if n not in placed and c is not None and not c.hidden]
        if rest:
            with formatter.section("Other"):
                formatter.write_dl(rest)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _name_values(command)
        return command


SECTIONS = (
    ("Everyday", ("add", "list", "show", "search", "call", "log", "ui", "demo")),
    ("Vault", ("edit", "remove", "enable", "disable", "approve", "diff", "secret", "memory", "ask", "profile")),
    ("Agents", ("install", "import", "serve")),
    ("Registry", ("find", "outdated", "upgrade")),
    ("Engine", ("status", "code-mode", "results", "auth")),
    ("Diagnostics", ("doctor", "refresh", "paths", "completions")),
)


def _report(exc: CofferError, as_json: bool) -> NoReturn:
    """`coffer: error: ...` on stderr (and under `--json` a JSON object on stdout), then its exit code."""
    from coffer.cli import render

    if as_json:
        render.print_json(
            {
                "version": render.JSON_VERSION,
                "error": {"message": str(exc), "kind": type(exc).__name__, "exit_code": exc.exit_code},
            }
        )
    render.error(str(exc))
    raise typer.Exit(exc.exit_code) from None


def _summary(command: Any) -> str:
    """A command's first sentence, whole."""
    text = " ".join((command.help or "").split())
    depth = 0
    for i, char in enumerate(text):  # the first ". " outside parentheses ends it
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and text[i : i + 2] == ". ":
            text = text[:i]
            break
    return text.split(": `")[0].rstrip(".")


UsageError: type[Exception] = typer.BadParameter.__mro__[1]  # Typer's own click's UsageError


def _hinted(exc: Any, words: list[str]) -> str:
    """A usage error with the hint for the mistake behind it: a server's own option read as Coffer's
    (`coffer add foo npx -y pkg`: it goes after `--`), a choice answered in pydantic's words."""
    message = str(exc.message).replace("Value error, ", "")
    option = getattr(exc, "option_name", None)
    if type(exc).__name__ == "NoSuchOption" and words[:1] in (["add"], ["edit"]) and option in words:
        before = [w for w in words[1 : words.index(option)] if not w.startswith("-")]
        if len(before) >= 2 and "--" not in words:
            rest = " ".join(words[words.index(before[0]) + 1 :])
            message += f". A server's own options go after `--`: coffer {words[0]} {before[0]} -- {rest}"
    return message


def _name_values(command: Any) -> None:
    """`{name}`, `<list[str]>`, `<float>` (Typer's defaults) become `NAME`, `--env ENV`, `--timeout
    FLOAT`: what a value is, in the words of its option, not its Python type. Explicit metavars stay."""
    from pathlib import Path

    from typer.core import TyperArgument, TyperOption

    for sub in getattr(command, "commands", {}).values():
        _name_values(sub)
    for param in command.params:
        if not getattr(param, "name", None):
            continue
        kind = getattr(getattr(param, "type_descriptor", None), "annotation", None)
        if isinstance(param, TyperArgument):
            param.metavar = param.metavar or param.name.upper()
            usage = param.metavar if param.required else f"[{param.metavar}]"
            usage += "..." if param.nargs != 1 else ""
            # NAME, [TEXT], COMMAND... as click writes them; no `<str>` beside it: its help says what it is
            setattr(param, "get_usage_pieces", lambda ctx, usage=usage: [usage])  # noqa: B010
            setattr(param, "display_type_rich", lambda ctx: None)  # noqa: B010
        elif isinstance(param, TyperOption) and kind is not bool and param.metavar is None:
            named: dict[Any, str] = {int: "N", float: "NUMBER", Path: "PATH"}
            param.metavar = named.get(kind, param.name.upper().replace("_", "-"))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"coffer {__version__}")
        raise typer.Exit()


app = typer.Typer(
    cls=CofferGroup,
    name="coffer",
    help="A local vault of MCP servers, served to every agent as one gateway.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """A local vault of MCP servers, served to every agent as one gateway."""
    # A person's shell, not an agent's spawn (nor the demo, whose vault is a throwaway one and which leaves
    # the user's untouched): what the engine gives its servers (certificates, proxies, locale, PATH).
    if ctx.invoked_subcommand not in (None, "serve", "demo"):
        from coffer.vault import shellenv

        shellenv.record()
