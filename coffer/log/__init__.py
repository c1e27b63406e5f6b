"""The invocation log: one row per gateway call in coffer.db (who, when, what, how long, outcome), never
arguments or results.

Modules:

    calls       writes it, off the call path
    query       reads it: filters, the latest rows, `--tail`, per-tool figures
    series      groups it over time and per server, for the console's charts

Imports the vault only.
"""
