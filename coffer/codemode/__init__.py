"""Code mode: `coffer__run`, a short Python-subset script that calls many tools in one step.

Modules:

    policy      whether code mode is on (settings, profile), its limits, which tools a script may call
    checks      what a script may not even try, found before it runs (imports, dunder names, syntax)
    sandbox     the script run in pydantic-monty: host calls, limits, output, the outcome
    values      MCP results as script values, and the script's outcome as the call's payload

The script runs in a pydantic-monty worker process (a Python subset in a Rust interpreter: no files,
no network, no environment); each `call_tool` it makes is a host call the gateway answers through the
same route as a direct call, so curation, approval holds, confinement and the invocation log apply.
Imports the vault (settings, server entries) only; the gateway passes in how a call is made.
"""
