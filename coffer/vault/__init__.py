"""The vault: the files Coffer keeps and nothing that acts on them.

Modules:

    paths       every location (COFFER_HOME)
    fsutil      atomic, locked, 0600 writes
    registry    coffer.toml, edited with tomlkit
    servers     one `[servers.NAME]` entry: its fields, read and written
    profiles    `[profiles.NAME]`: what one client is shown
    names       the naming rules, and how an exposed name splits
    catalogue   the snapshot of what each server serves, and the names Coffer exposes
    schema      input-schema trimming for hosts
    masking     display masking of launch configs
    database    coffer.db: SQLite opened with WAL and a busy timeout, migrations
    upgrade     which vaults this Coffer opens: file formats, the schema, refusing a newer vault's
    shellenv    the user's shell's certificates, proxies, locale and PATH, recorded for the engine

The bottom layer: imports only `coffer.errors` (and `coffer.__version__`, for a refusal's message).
"""
