"""Coffer: a local-first vault of MCP servers and the gateway that serves them as one."""

__version__ = "0.1.0"
