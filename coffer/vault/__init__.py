"""The vault: the files Coffer keeps and nothing that acts on them.

`paths` (every location, COFFER_HOME), `fsutil` (atomic, locked, 0600 writes), `registry` (coffer.toml),
`servers` (one `[servers.NAME]` entry: its fields, read and written), `names` (the naming rules),
`profiles` (`[profiles.NAME]`), `catalogue` (the snapshot of what each server serves, and the names
Coffer exposes), `schema` (input-schema trimming for hosts), `masking` (display masking), `store`
(SQLite helpers). The bottom layer: imports only `coffer.errors`.
"""
