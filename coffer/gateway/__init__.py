"""The gateway behind `coffer serve`, top to bottom as a tools/call travels:

`serve` (the process: stdio or HTTP, signals) -> `server` (the MCP server: handlers, the invocation
log) -> `builtins` (coffer__search_tools, coffer__ask) and `routes` (curation, resolution, routing to
the owning upstream) -> `view` (the registry as served, the merged catalogue, `merge`) and `relay`
(what upstreams ask of the host) -> `pool` (bounded starts, `gate`) -> `upstream` (one session per
server; `faults`: backoff and what can be advertised; `knowledge`: its text resources for coffer__ask)
-> `outbound` (requests Coffer can cancel) and `transport` (stdio and HTTP pipes).
Imports the vault, trust, ranking, log and memory; nothing in it imports upward.
"""
