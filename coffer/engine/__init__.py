"""The engine: one process per user and vault that owns every upstream for all `coffer serve` sessions.

On stdio, `coffer serve` is a thin front (`front`): it finds the vault's engine on a Unix socket (mode
0600, in the user's runtime directory, peer uid checked), starts it when there is none (`daemon`,
detached, one per vault under a lock), and pipes its host's stdio to it byte for byte. The engine
serves each front as one MCP session of one gateway (`coffer.gateway`), so five agent sessions start
each upstream once. It exits after `COFFER_ENGINE_IDLE` seconds (default 600) without sessions, and
answers `coffer status` (`control`). Imports the gateway and the parts below it; the CLI imports it.
"""
