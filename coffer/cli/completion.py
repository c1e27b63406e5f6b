"""Shell completion scripts, generated from the Typer app so they never drift from the commands."""

from __future__ import annotations

from coffer.errors import UsageError

SHELLS = ("bash", "zsh", "fish")


def script(shell: str) -> str:
    if shell not in SHELLS:
        raise UsageError(f"unsupported shell '{shell}': choose one of {', '.join(SHELLS)}")
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name="coffer", complete_var="_COFFER_COMPLETE", shell=shell).rstrip()
