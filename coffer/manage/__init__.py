"""Use cases that span parts, for the CLI and the console.

Modules:

    servers     adding, importing and removing servers: registry, approval, probe, snapshot, memory
    states      one state per server, with its reason, for list, show, status and the console
    probe       starting upstreams once: what they serve, how long, why not
    refresh     `coffer refresh`, and the first start after `add` and `import`
    doctor      `coffer doctor`: start every enabled server once and report
    review      reviewing and approving what changed since approval
    tools       turning servers and tools on and off; the tool table
    profiles    what each `[profiles.NAME]` advertises now (`coffer profile`)
    usage       which listed tools are called, how often, how well; pruning the rest
    search      `coffer search` over the saved catalogue
    discover    `coffer find` and `add NAME` from a registry
    prefetch    a registry server's package fetched into its own cache before its first start is timed
    upgrades    `coffer outdated` and `coffer upgrade`: moving a registry server's pin
    auth        `coffer auth`: signing in to an OAuth server
    call        `coffer call`: one tool the way an agent's call goes (engine or in-process), logged
    demo        `coffer demo`: the whole loop in a throwaway vault

Imports every part below the CLI, clients included.
"""
