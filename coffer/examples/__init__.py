"""Example upstream servers shipped with Coffer, run as separate processes (e.g. by `coffer demo`).

Modules:

    demo_server a small MCP server: notes, echo, arithmetic and the time

Imports nothing of Coffer: each is a plain MCP server on the SDK.
"""
