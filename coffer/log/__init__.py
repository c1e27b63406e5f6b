"""The invocation log: one row per gateway call in coffer.db (who, when, what, how long, outcome), never
arguments or results. `calls` writes it off the call path and queries it. Imports the vault only.
"""
