"""Trust: what the vault lets an agent see and call, and the secrets it must never show.

Modules:

    curation    the one rule for what is visible and callable
    pinning     launch-config approval, tool pins and held tools
    pinhash     canonical forms that are hashed (pure)
    pinschema   the trust tables in coffer.db and their migrations
    injection   prompt injection in tool definitions
    secrets     named secrets: the OS keyring, else a 0600 file
    oauth_store where a server's OAuth tokens and client registration are kept
    http_token  the bearer token `coffer serve --http` requires
    team        `serve --http --team`: access tokens from the team's identity provider, who is a member
                (one identity each) and bounded by which profile; the member a request speaks for
    provider    the team's identity provider as read: metadata, keys that follow its JWKS, introspection,
                and a token's claims (every bad token a 401)
    member_secrets  a team member's own secrets, for `${member:NAME}` in its per-member servers
    exchange    token exchange (RFC 8693): a member's token traded at the provider for an upstream's
    expand      `${VAR}`, `${secret:NAME}` and `${member:NAME}` at launch
    redact      resolved values masked everywhere text is written

Imports the vault only.
"""
