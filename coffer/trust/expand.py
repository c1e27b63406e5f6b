"""Launch-time expansion of `${VAR}`, `${secret:NAME}` and `${member:NAME}` in a server's env and headers.

`${member:NAME}` is the secret NAME of the team member a per-member server runs for
(coffer.trust.member_secrets); where no member is served (one user, `coffer add`'s first start) it is
the vault's own `${secret:NAME}`.

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


def expand(value: str, environ: Mapping[str, str] | None = None, what: str = "value", member: str | None = None) -> str:
    """Expand `${VAR}` references; an unset one is an error, never passed on literally.

    `${secret:NAME}` references are resolved by `coffer.trust.secrets`; `${member:NAME}` by
    `coffer.trust.member_secrets` for `member`, by `secrets` when there is none.
    """
    environ = os.environ if environ is None else environ

    def sub(match: re.Match[str]) -> str:
        ref = match.group(1)
        if ref.startswith("secret:"):
            return str(secrets.resolve(ref.removeprefix("secret:")))
        if ref.startswith("member:"):
            name = ref.removeprefix("member:")
            if member is None:
                return str(secrets.resolve(name))
            from coffer.trust import member_secrets

            return member_secrets.resolve(member, name, what)
        if not ENV_KEY_RE.match(ref):
            raise SecretError(f"{what}: invalid reference '${{{ref}}}'")
        if ref not in environ:
            raise SecretError(f"{what}: ${{{ref}}} is not set in the environment")
        return environ[ref]

    return REF_RE.sub(sub, value)


def resolved_env(
    cfg: ServerConfig, environ: Mapping[str, str] | None = None, member: str | None = None
) -> dict[str, str]:
    return registered({k: expand(v, environ, f"{cfg.name}: env {k}", member) for k, v in cfg.env.items()})


def resolved_headers(
    cfg: ServerConfig, environ: Mapping[str, str] | None = None, member: str | None = None
) -> dict[str, str]:
    return registered({k: expand(v, environ, f"{cfg.name}: header {k}", member) for k, v in cfg.headers.items()})
