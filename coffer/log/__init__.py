"""The invocation log: one row per gateway call in coffer.db (who, when, what, how long, outcome), never
arguments or results. `calls` writes it off the call path; `query` reads it (`coffer log`, its stats);
`series` groups it over time and per server (the console's charts). Imports the vault only.
"""
