"""Launch-time expansion of `${VAR}` and `${secret:NAME}` in a server's env and headers.

Values are expanded only when a server is started, never written back; an unset reference is an
error, never passed on literally, and every resolved value is registered with `coffer.trust.redact`
so it is masked wherever Coffer writes text.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from coffer.errors import SecretError
from coffer.trust import secrets
from coffer.trust.redact import registered
from coffer.vault.masking import REF_RE
from coffer.vault.servers import ENV_KEY_RE, ServerConfig


def expand(value: str, environ: Mapping[str, str] | None = None, what: str = "value") -> str:
    """Expand `${VAR}` references; an unset one is an error, never passed on literally.

    `${secret:NAME}` references are resolved by `coffer.trust.secrets`.
    """
    environ = os.environ if environ is None else environ

    def sub(match: re.Match[str]) -> str:
        ref = match.group(1)
        if ref.startswith("secret:"):
            return str(secrets.resolve(ref.removeprefix("secret:")))
        if not ENV_KEY_RE.match(ref):
            raise SecretError(f"{what}: invalid reference '${{{ref}}}'")
        if ref not in environ:
            raise SecretError(f"{what}: ${{{ref}}} is not set in the environment")
        return environ[ref]

    return REF_RE.sub(sub, value)


def resolved_env(cfg: ServerConfig, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    return registered({k: expand(v, environ, f"{cfg.name}: env {k}") for k, v in cfg.env.items()})


def resolved_headers(cfg: ServerConfig, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    return registered({k: expand(v, environ, f"{cfg.name}: header {k}") for k, v in cfg.headers.items()})
