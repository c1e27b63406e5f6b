"""Implied needs (coffer.ranking.implied) and how the Ranker places them, on the 222 real tools."""

from __future__ import annotations

import pytest

from coffer.ranking import Doc, Ranker, docs_from_tools, search_tools
from coffer.ranking.implied import CURRENT_DATE_QUERY, implied_queries
from tests.ranking.test_ranking import real_tools

WRITERS = {"filesystem__write_file", "desktop-commander__write_file"}


@pytest.fixture(scope="module")
def real_docs() -> list[Doc]:
    return docs_from_tools(real_tools())


@pytest.mark.parametrize(
    ("query", "needs"),
    [
        ("Generate a deep report of bitcoin and save it in /root/markdown/bitcoin.md", ["write file"]),
        ("write the summary to notes.md", ["write file"]),
        ("save the API response to out/data.json", ["write file"]),
        ("export the sheet to report.xlsx", ["write excel spreadsheet file"]),
        ("make a deck on Q3 and save it to ~/slides/q3.pptx", ["write powerpoint presentation file"]),
        ("book a train for next Wednesday", [CURRENT_DATE_QUERY]),
        ("check the logs from the last 24 hours", [CURRENT_DATE_QUERY]),
        ("draft notes in a/b.md and save them to c/d.md tomorrow", ["write file", CURRENT_DATE_QUERY]),
        # read from, not written to
        ("Read the data under /root/excel/people_data.xlsx and tell me the total", []),
        ("read src/app.py", []),
        ("fix a typo on line 40 of README.md", []),
        # not file paths: a URL's tail, a framework name, a version
        ("see https://example.com/a/b.pdf and write notes", []),
        ("Show me CRUD code in Node.js", []),
        ("upgrade to python 3.12 and save", []),
        # "today" needs no date arithmetic: the tool that serves today's data knows it
        ("show today's trending repositories", []),
        ("", []),
    ],
)
def test_implied_queries(query: str, needs: list[str]) -> None:
    assert implied_queries(query) == needs


@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
def test_an_output_path_brings_a_file_writer_into_the_results(real_docs: list[Doc], mode: str) -> None:
    query = "list the open issues on the repo and save a summary to notes/issues.md"
    plain = [d.id for d, _ in Ranker(real_docs, mode=mode).search(query, 5).hits]
    ranker = Ranker(real_docs, mode=mode, implied_needs=True)
    with_needs = ranker.search(query, 5)
    ids = [d.id for d, _ in with_needs.hits]
    assert not WRITERS & set(plain), plain  # the whole-task query alone misses the writer
    assert WRITERS & set(ids[:5]) and ids[0] == plain[0] == "github__list_issues", ids
    scores = [s for _, s in with_needs.hits]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert len(ids) == len(set(ids)) == 5


def test_implied_needs_never_take_the_first_place_or_a_single_result(real_docs: list[Doc]) -> None:
    ranker = Ranker(real_docs, mode="hybrid", implied_needs=True)
    query = "summarise yesterday's sentry errors and write them to errors.md"
    plain = Ranker(real_docs, mode="hybrid").search(query, 10)
    assert [d.id for d, _ in ranker.search(query, 1).hits] == [plain.hits[0][0].id]
    two = [d.id for d, _ in ranker.search(query, 2).hits]
    assert two[0] == plain.hits[0][0].id and len(two) == 2
    ten = [d.id for d, _ in ranker.search(query, 10).hits]
    assert "time__get_current_time" in ten and WRITERS & set(ten)
    assert ranker.search(query, 10) == ranker.search(query, 10)  # deterministic


def test_queries_without_implied_needs_rank_as_before(real_docs: list[Doc]) -> None:
    on = Ranker(real_docs, mode="hybrid", implied_needs=True)
    off = Ranker(real_docs, mode="hybrid")
    for query in ("open a pull request for my branch", "read src/app.py", "what time is it"):
        assert on.search(query, 10).hits == off.search(query, 10).hits


def test_search_tools_uses_implied_needs() -> None:
    res = search_tools(real_tools(), "find the failing tests and save a report to out/report.md", 5)
    assert WRITERS & {d.id for d, _ in res.hits}
