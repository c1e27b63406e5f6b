"""What Coffer shows of a launch config: values that look secret masked, `${VAR}` references kept.

Env and header values are masked whole; in command arguments and URLs only what looks secret is:
the value of a flag named like a secret, a header given as an argument, known token shapes, URL
userinfo and secret-looking query values. The registry stores everything as written; only display
goes through here.
"""

from __future__ import annotations

import re

REF_RE = re.compile(r"\$\{([^}]*)\}")  # `${VAR}` and `${secret:NAME}` references: names, not secrets


SECRET_FLAG = re.compile(r"(token|key|secret|passw|pwd|auth|credential|bearer)", re.I)
SECRET_SHAPE = re.compile(
    r"^(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|glpat-[\w-]{20,}|sk-[\w-]{20,}|xox[abpr]-[\w-]{10,}"
    r"|AKIA[0-9A-Z]{16}|eyJ[\w-]{10,}\.[\w-]{10,}\.[\w-]{10,}|[A-Za-z0-9_\-]{32,})$"
)


def mask_args(args: list[str]) -> list[str]:
    """Arguments with secret-looking values masked: the value of a flag named like a secret
    (`--api-key X`, `--access-token=X`, `-H "Authorization: Bearer X"`), and known token shapes.
    `${VAR}` references are names, not secrets, and stay."""
    out: list[str] = []
    secret_next = False
    for arg in args:
        if secret_next and not arg.startswith("-"):
            out.append(mask_value(arg))
            secret_next = False
            continue
        secret_next = False
        flag, eq, value = arg.partition("=")
        if arg.startswith("-") and SECRET_FLAG.search(flag):
            if eq:
                out.append(f"{flag}={mask_value(value)}")
            else:
                out.append(arg)
                secret_next = True
            continue
        head, colon, rest = arg.partition(":")
        if colon and SECRET_FLAG.search(head) and rest.strip():  # a header given as an argument
            out.append(f"{head}: {mask_value(rest.strip())}")
            continue
        out.append(mask_value(arg) if SECRET_SHAPE.match(arg) and not REF_RE.search(arg) else arg)
    return out


def mask_url(url: str) -> str:
    """A URL with secret-looking query values and userinfo masked."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "****@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, mask_value(v) if SECRET_FLAG.search(k) else v) for k, v in pairs], safe="*${}")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def mask_value(value: str) -> str:
    """Show `${VAR}` references as written (they are names, not secrets); hide literal values."""
    if REF_RE.fullmatch(value.strip()):
        return value
    return "****" if value else ""
