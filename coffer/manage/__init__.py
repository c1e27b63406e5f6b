"""Use cases that span parts, for the CLI and the console: adding, importing and removing servers
(`servers`: registry, approval, probe, snapshot, memory), starting them once (`probe`), recording their
listings (`refresh`), the doctor's report, the vault search behind `coffer search`, the demo.
Imports every part below the CLI, clients included.
"""
