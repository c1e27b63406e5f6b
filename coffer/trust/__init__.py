"""Trust: what the vault lets an agent see and call, and the secrets it must never show.

`pinning` (launch-config approval, tool pins and held tools), `pinhash` (canonical hashes), `pinschema`
(their tables and migrations), `curation` (the one rule for what is visible and callable), `secrets`
(keyring or 0600 file), `expand` (`${VAR}` and `${secret:NAME}` at launch), `redact` (masking resolved
values everywhere text is written).
Imports the vault only.
"""
