"""Client configs: read other agents' MCP server lists (`coffer import`) and add Coffer to them (`coffer install`).

`known` lists the clients and their default files; `mcpjson`, `vscode` and `codex` are the formats;
`importer` and `installer` are the two operations. Nothing here is imported by `coffer serve`.
"""
