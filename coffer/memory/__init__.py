"""Memory: the notes a user keeps and the text resources servers expose, indexed for `coffer__ask`.

Modules:

    knowledge   notes, the resource index, search and grounded answers
    passages    splitting text into passages by heading

Imports the vault, trust and ranking.
"""
