"""Kept results: a tool result over the cap is kept whole on disk, and the agent gets a preview.

Modules:

    kept        the use cases: keep one (archive, sweep, index for coffer__ask), list, show, remove
    archive     the files: content-addressed, 0600, expiring, within a size budget, and their index
    spill       the long strings of a big result decoded from the upstream's line straight into a file
    preview     what fits under the cap, and a link to the whole
    tokens      counting tokens with a real tokenizer, without tokenizing 50 MB
    text        reading a kept result a part at a time, or grepping it

The gateway decides when (coffer.gateway.bigresults); nothing here goes to the invocation log but
sizes and ids. Imports the vault and memory (for coffer__ask's index).
"""
