"""The client side of the wire: one MCP session per registered server, and everything below it.

Modules, from the session down to the process:

    upstream    one long-lived session per server: spawn or connect, handshake, restarts, calls
    discover    listing an upstream: every kind it declares, paged, broken tools repaired or dropped
    resources   its text resources, read for coffer__ask's index
    faults      restart backoff, the real error inside wrappers, what a failure is called
    cause       the line of a failed server's stderr that says why (not the last one)
    outbound    one request under an id Coffer chose, so Coffer can cancel it
    direct      requests to a stdio upstream answered by id off the read stream (no SDK dispatcher)
    transport   the pipe: a process in its own group (stdio) or a streamable HTTP endpoint
    framing     newline-delimited JSON-RPC: lines split and framed without copying big messages
    reaper      the supervisor every stdio upstream runs under: no upstream outlives its gateway
    sandbox     confinement: what a stdio upstream may read, write, reach and see (bubblewrap or Landlock)
    policy      a server's policy: its entry's grants, known servers' profiles, what its launch line names
    walls       what no grant opens: Coffer's own files, every server's home and temp, the secret places
    runtimes    what a launch line needs to run: the system, its runtime wherever installed, its code
    lockdown    Landlock, applied just before a server runs (stdlib only, run by path or by the reaper)
    denials     a denial named with the one command that grants it
    explain     what a confined server may read, write and reach, in words (show, doctor)
    netgate     inside a sandbox: the one way out of its network namespace, to the filtering proxy
    egress      the filtering proxy that lets a confined upstream reach only its allowed hosts
    gate        bounded starts: at most N upstreams start at once, a waited-for one jumps the queue
    oauth       an HTTP upstream's auth: OAuth 2.1 on the SDK's client (the owner's grant or a member's,
                given in the members' console), or a member's exchanged token; tokens kept by coffer.trust
    sdk         the client half of the SDK seam (the host half is coffer.gateway.sdk)

Imports the vault, trust, log, results and telemetry; never the gateway, which runs these sessions
(its pool) and serves them to hosts.
"""
