"""Tool and passage ranking: BM25F-lite, an offline embedding model, and their weighted fusion.

Modules:

    ranker      `Ranker`: indexes built once per doc list, queries in about a millisecond
    docs        `Doc`: what is ranked, tools and passages alike
    index       the indexes a Ranker searches, restored from or saved as a snapshot
    snapshot    a built index saved whole
    derived     derived cache files, written atomically and read forgivingly
    reuse       built rankers kept per catalogue
    bm25        BM25F-lite over a few weighted fields
    tokenize    text to BM25 terms
    vocabulary  how developers ask for tools, in the words tools use
    implied     needs a query implies without naming them
    languages   queries in other languages
    embed       offline embeddings (wordllama) and their vector cache
    pieces      the tokenizer's ids remembered per word
    minilm      the optional heavier model (all-MiniLM-L6-v2)
    fuse        normalisation, weighted fusion, a deterministic top-k
    rerank      the passes that turn fused scores into hits
    rules       the tuned rules, each one switch

One ranker serves `coffer search`, `coffer__search_tools` and `coffer__ask`. Importing this package
is cheap: numpy, tokenizers and the model load only when a Ranker is built.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from coffer.ranking.docs import Doc, ToolLike, docs_from_tools, docs_hash
from coffer.ranking.ranker import MODES, Ranker, RankResult
from coffer.ranking.reuse import cached_ranker

__all__ = [
    "MODES",
    "SEARCH_TOOL_DESCRIPTION",
    "Doc",
    "RankResult",
    "Ranker",
    "cached_ranker",
    "docs_from_tools",
    "docs_hash",
    "search_tools",
]

SEARCH_TOOL_DESCRIPTION = (
    "Search the tools of every MCP server behind this gateway and get the best matches with their "
    "full input schemas; then call a returned tool directly by its name. "
    "Write the query as the action you want to take, in plain words "
    '("create a pull request", "read a file", "take a screenshot of the page"). '
    "Search once per sub-goal: for a task with several steps (find the data, transform it, save a "
    "file), make one short query for each step rather than one query for the whole task, since one "
    "query for a whole task finds far fewer of the tools it needs. "
    "Ranking is local and deterministic (keyword and semantic match over tool names and "
    "descriptions); top_k defaults to 5, at most 20."
)


def search_tools(
    tools: Iterable[ToolLike],
    query: str,
    k: int = 5,
    *,
    mode: str = "hybrid",
    cache_dir: Path | None = None,
    key: str | None = None,
    remember_words: bool = False,
    explain: bool = False,
) -> RankResult:
    """Rank catalogue tools for `query`, reusing the built index while the catalogue is unchanged.

    Needs the query implies but does not name ("save it to out/report.md": a file writer) get a place
    in the results (coffer.ranking.implied). `remember_words` saves the word stems and pieces the
    query taught the ranker in `cache_dir` (`Ranker.save_query_words`: `coffer search`, a process per query);
    `explain` fills `RankResult.parts` (the console shows them).
    Raises UsageError when k < 1 or `mode` is unknown.
    """
    docs = docs_from_tools(tools)
    ranker = cached_ranker(docs, mode=mode, cache_dir=cache_dir, key=key, implied_needs=True, english_docs=True)
    result = ranker.search(query, k, explain=explain)
    if remember_words:
        ranker.save_query_words()
    return result
