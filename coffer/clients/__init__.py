"""Client configs: read other agents' MCP server lists (`coffer import`) and add Coffer to them (`coffer install`).

`known` lists the clients and their default files; `mcpjson`, `vscode` and `codex` are the formats;
`importer` plans an import, `installer` and `mover` write client files. Imports only vault, trust and
errors: writing the vault and starting servers are `coffer.manage`'s (`servers.import_client`).
Nothing here is imported by `coffer serve`.
"""
