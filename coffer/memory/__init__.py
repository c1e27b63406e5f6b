"""Memory: the notes a user keeps and the text resources servers expose, indexed for `coffer__ask`.

`store` (notes, the resource index, search and grounded answers), `passages` (splitting text by
heading). Imports the vault, trust and ranking.
"""
