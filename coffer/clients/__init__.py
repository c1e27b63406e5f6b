"""Client configs: read other agents' MCP server lists (`coffer import`) and add Coffer to them (`coffer install`).

Modules:

    known       the clients Coffer knows, their format and where each keeps its config here
    common      what every format shares: reading, safe rewriting, an entry as a server
    mcpjson     the `mcpServers` JSON of Claude Desktop, Claude Code and Cursor
    variants    the JSON formats that are `mcpServers` with a twist, and two that are not
    vscode      VS Code's `mcp.json`: `servers` with `type`, plus `inputs`
    codex       Codex's `config.toml` `[mcp_servers.NAME]`, edited with tomlkit
    yamlfmt     the YAML formats: goose and Continue
    jsonc       JSON with comments: a parser that remembers positions, and text edits
    importer    `coffer import`: plan reading a client's servers into the vault
    installer   `coffer install`: add an entry that launches `coffer serve`
    mover       `coffer import --move`: take imported entries out of the client's files

Imports only vault, trust and errors: writing the vault and starting servers are `coffer.manage`'s
(`servers.import_client`). Nothing here is imported by `coffer serve`.
"""
