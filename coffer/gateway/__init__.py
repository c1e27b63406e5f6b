"""The host side of the wire: one MCP server over every upstream, as a tools/call travels it.

Modules, from the host's transport in:

    stdio       the host's stdio as (read, write) streams: this process's, or an engine front's socket
    http        streamable HTTP behind uvicorn on loopback: bearer token or team guard (sessions bound to
                their member, /member/secrets), protocol-version guard
    memberconsole  a team gateway's /console: sign-in at the team's provider (code + PKCE), a member's
                reach and own secrets
    httpshape   JSON or SSE per HTTP request, the SDK's transport bent through the seam
    sdk         the host half of the SDK seam (the client half is coffer.upstreams.sdk); the team member
                current per request (a middleware)
    server      the MCP server: handlers, built-ins, the invocation log, upstream listings merged in
    listings    list requests: the merged view, new servers given a bounded chance, profiles, paging
    advertise   which tools a profile advertises, and what a team member's profile walls it in to (pure)
    paging      one page of a merged list
    builtins    coffer__search_tools, coffer__ask, coffer__call_tool, coffer__run: definitions and answers
    bigresults  results over the cap kept and previewed; coffer__read_result
    routes      curation at call time, resolution of exposed names, routing to the owning upstream;
                coffer__run scripts, whose calls take that route (coffer.codemode runs the script)
    tasks       task-augmented calls relayed to upstreams, owned by the session that made them
    view        the registry as served: curation, pins, the merged catalogue (`merge`); the snapshot writer
    merge       every upstream's listing merged under exposed names; MCP Apps' ui:// URIs kept apart
    relay       what upstreams ask of the host (sampling, elicitation, roots, logs, progress)
    rounds      the bridge from server-to-client requests to 2026-07-28 multi-round results
    pool        the running upstreams: bounded starts, per-session and per-member pools, a clean stop
    sessions    what belongs to one host session (`HostSession`), and which servers run per session

Imports the upstreams (coffer.upstreams: the client side), code mode, the vault, trust, ranking, log,
memory, results and telemetry; nothing in it imports upward.
"""
