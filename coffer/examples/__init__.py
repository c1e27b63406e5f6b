"""Example upstream servers shipped with Coffer, run as separate processes (e.g. by `coffer demo`).

Imports nothing of Coffer: each is a plain MCP server on the SDK.
"""
