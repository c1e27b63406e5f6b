"""Use cases that span parts, for the CLI and client import: adding and removing servers (registry,
approval, probe, snapshot, memory), probing and refreshing them and the doctor's report, the vault
search behind `coffer search`, the demo. Imports every part below the CLI except clients.
"""
