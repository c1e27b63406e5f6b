"""Kept results: a tool result over the cap is kept whole on disk, and the agent gets a preview.

`tokens` counts with a real tokenizer, `preview` builds what fits, `store` keeps the original (0600,
content-addressed, expiring, within a size budget), `text` reads a part or greps it, `kept` is the use
cases (keep, list, show, remove). The gateway decides when (coffer.gateway.bigresults); nothing here
goes to the invocation log but sizes and ids. Imports the vault and memory (for coffer__ask's index).
"""
