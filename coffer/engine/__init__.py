"""The engine: one process per user and vault that owns every upstream for all `coffer serve` sessions.

Modules:

    hosting     the one hosting decision (engine or in-process) both CLI paths call; in-process serving
    front       `coffer serve` through the engine: finds or starts it; relays a terminal's or a file's bytes
    handed      the front that hands its host's stdin and stdout to the engine and steps out of the way
    handover    the engine's side of a handed-over session: the host's fds served, the front kept told
    daemon      the engine process: one gateway, one MCP session per connected front
    report      what `coffer status` shows of a running engine: its sessions, upstreams, memory
    place       where a vault's engine listens (a Unix socket in the user's runtime directory), and reaching it
    control     asking a running engine what it holds (`coffer status`) or to stop
    dial        an MCP session of this process's own with a running engine (`coffer call`)

On stdio, `coffer serve` is a thin front: it finds the vault's engine on a Unix socket (mode 0600, in the
user's runtime directory, peer uid checked), starts it when there is none (detached, one per vault under
a lock), and hands it its host's stdin and stdout (`SCM_RIGHTS`), staying only to recover if the engine
dies (a terminal or a file is relayed byte for byte instead). The engine serves each front as one MCP session
of one gateway (`coffer.gateway`), so five agent sessions start each upstream once. It exits after
`COFFER_ENGINE_IDLE` seconds (default 600) without sessions. Imports the gateway and the parts below
it; the CLI imports it.
"""
