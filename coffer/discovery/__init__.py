"""Discovery: finding and installing servers from MCP registries (the Registry API v0.1).

Modules:

    entries   `Entry`: one server.json version read forgivingly, its short name, its publisher's tools
    client    `RegistryClient`: the API's pages (with `updated_since`) and one server's versions
    cache     the latest entries of each registry in one SQLite file, refreshed incrementally
    launch    `Plan`: which package or remote runs, pinned, and the inputs it needs
    mending   what uv says read: a uvx line mended, a package's commands; the line that fetches a package
    rank      `find`: the vault's own ranker over the cache, weighed by publisher, upkeep and runnability
    world     which words name servers: how the gateway tells a service the vault lacks from an argument
    brands    which words name a product or service at all, and a product's maker (shipped lists, built
              from simple-icons by `python -m coffer.discovery.brands build`)
    upkeep    the cache kept fresh in the background while a gateway runs

The use cases (`coffer find`, `add NAME`) are `coffer.manage.discover`'s (`outdated`, `upgrade`: `upgrades`).
Imports the vault (paths, names), ranking (the one ranker) and errors; nothing above them.
"""
