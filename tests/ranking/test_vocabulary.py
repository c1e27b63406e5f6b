"""The developer vocabulary (coffer.ranking.vocabulary) on its own, and through the ranker on the 222 real tools."""

from __future__ import annotations

import pytest

from coffer.ranking import Doc, Ranker, docs_from_tools, search_tools, vocabulary
from coffer.ranking.rules import Rules
from coffer.ranking.tokenize import split_words, tokenize
from coffer.ranking.vocabulary import ACTION_VERBS, families, intents, name_families, rewrite
from coffer.vault.catalogue import build_tools
from tests.ranking.test_ranking import real_tools


def mapped(query: str) -> set[str]:
    return {target for _, targets in intents(split_words(query)) for target in targets}


@pytest.mark.parametrize(
    ("query", "means"),
    [
        ("open a PR", {"create"}),
        ("open a pull request", {"create"}),
        ("open the file", {"read"}),
        ("open the page in a new tab", {"navigate"}),
        ("file a bug", {"create", "issue"}),
        ("cut a release branch", {"create"}),
        ("grab the logs", {"get", "log"}),
        ("kill the dev server", {"stop"}),
        ("tail the access log", {"logs", "read"}),
        ("ls src", {"list", "directory"}),
        ("rm the temp dir", {"delete", "directory"}),
        ("mkdir build", {"create", "directory"}),
        ("cat package.json", {"read", "file"}),
        ("merge the MR", {"merge", "request"}),
    ],
)
def test_intents(query: str, means: set[str]) -> None:
    assert means <= mapped(query)


def test_objects_decide_what_open_means() -> None:
    assert "create" not in mapped("open the file") and "read" not in mapped("open a PR")
    assert mapped("list the open pull requests") == set()  # "open" here describes, it does not act


def test_rewrite_weights_typed_words_over_mapped_ones() -> None:
    rw = rewrite("open a PR")
    assert {"open", "pull", "request", "creat"} <= set(rw.terms)
    assert rw.weights["pull"] == 1.0 and 0 < rw.weights["creat"] < 1.0
    assert rw.action == "open" and "pull request" in rw.text and "(create)" in rw.text
    assert rewrite("list files").terms == tokenize("list files")  # nothing to map: the query as typed


def test_book_and_create_are_actions() -> None:
    assert "book" in ACTION_VERBS and "create" in ACTION_VERBS


def test_action_families() -> None:
    assert families("creates") == families("create") and "create" in families("open")
    assert "retrieve" in families("look") and families("look") & families("get")  # look up = get
    assert not families("update") & families("create") and not families("buy") & families("find")
    assert families("close") & families("update") and families("close") & families("stop")
    assert families("pull") == frozenset() and families("browser") == frozenset()  # not actions
    assert rewrite("open a PR").families == families("open") | families("create")  # what it maps to counts too
    assert rewrite("the weather in Paris").families == frozenset()


class _T:
    def __init__(self, name: str, description: str) -> None:
        self.name, self.server, self.tool, self.description, self.input_schema = (
            f"s__{name}",
            "s",
            name,
            description,
            {},
        )


def test_the_action_decides_between_tools_of_one_domain() -> None:
    """find vs buy, request vs send: same entity words, the action picks the tool."""
    tools = [
        _T("search_flights", "Search flights between two cities on a date"),
        _T("book_flight", "Book a flight for the passenger"),
        _T("request_payment", "Request a payment from a contact"),
        _T("send_payment", "Send a payment to a contact"),
    ]
    ranker = Ranker(docs_from_tools(tools), mode="hybrid")
    first = {
        q: ranker.search(q, 2).hits[0][0].id
        for q in (
            "find flights from Paris to Rome",
            "book me a flight from Paris to Rome",
            "request a payment from Bob",
            "send a payment to Bob",
        )
    }
    assert first == {
        "find flights from Paris to Rome": "s__search_flights",
        "book me a flight from Paris to Rome": "s__book_flight",
        "request a payment from Bob": "s__request_payment",
        "send a payment to Bob": "s__send_payment",
    }


REAL = [t for t in real_tools()]


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("open a PR", "github__create_pull_request"),
        ("open a pull request for my branch", "github__create_pull_request"),  # not update_pull_request_branch
        ("cat package.json", None),  # any file reader
        ("kill the process on port 3000", "desktop-commander__kill_process"),
        ("grab the README from the repo", "github__get_file_contents"),
    ],
)
def test_developer_queries_find_the_obvious_tool(query: str, first: str | None) -> None:
    hits = [doc.id for doc, _ in search_tools(REAL, query, 5).hits]
    if first is None:
        assert "read" in hits[0] and "file" in hits[0], hits
    else:
        assert hits[0] == first, hits


def test_each_step_of_a_request_gets_a_place() -> None:
    hits = [
        doc.id for doc, _ in search_tools(REAL, "search the web for MCP gateways, then write a summary file", 5).hits
    ]
    assert any("search" in h for h in hits) and any("write" in h for h in hits), hits


def test_build_tools_names_are_what_search_returns() -> None:
    assert {t.name for t in build_tools("github", [{"name": "create_pull_request"}])} == {"github__create_pull_request"}


def test_a_name_that_starts_with_a_noun_has_no_action() -> None:
    assert name_families("update_pull_request_branch") == families("update")
    assert name_families("BookTool") == frozenset() and name_families("EmailByNylas") == frozenset()
    assert name_families("book_flight") == frozenset()  # "book" starts names as a noun as often
    assert name_families("browser_take_screenshot") == frozenset()  # the server's noun, then the verb


def test_a_fact_to_keep_is_an_argument_not_the_action() -> None:
    """ "remember that Alice works at Acme": the words after "that" are the fact, weighed as an argument
    and kept from the embedder; a "Note that ..." inside a task is no verb of keeping."""
    kept = rewrite("remember that Alice works at Acme")
    assert kept.weights["work"] == vocabulary.FACT_WEIGHT and kept.weights["rememb"] == 1.0
    assert "works" not in kept.text and "memory" in kept.text and "knowledge" in kept.text
    task = rewrite("Download the report. Note that it works offline")
    assert task.weights["work"] == 1.0 and "works" in task.text


def test_a_question_asks_to_know() -> None:
    """A question's action is one that answers, whatever verb it holds; a request's is its verb."""
    for question in ("what branch am I on", "which files did I change", "is the server reachable"):
        asked = rewrite(question)
        assert asked.question and asked.families == vocabulary.ANSWERING, question
    assert rewrite("what branch am I on", questions=False).families == frozenset()  # the rule's switch
    for request in ("change the branch name", "how do I create a branch", "can you delete the file"):
        assert not rewrite(request).question, request
    # a question asks to know, not to have something converted: "what time is it in Tokyo" wants the time now
    assert rewrite("what time is it in Tokyo").families == frozenset({"retrieve"})
    assert "edit" not in rewrite("which files did I change").weights  # its verb asks to see, not to edit
    assert "edit" in rewrite("change the file").weights
    recalled = rewrite("what do you remember about the project").weights
    assert "memori" in recalled and "store" not in recalled  # memory, not storing


def test_a_verb_after_a_determiner_is_a_noun() -> None:
    assert rewrite("show the last commit").action == "show"
    assert rewrite("diff against the last commit").action is None  # "commit" is what is diffed against
    assert rewrite("commit the staged files").action == "commit"


def test_a_name_without_an_action_takes_its_descriptions_opening_verb() -> None:
    """Catalogues open a description with its verb: git_commit "Records changes to the repository"."""
    assert name_families("git_commit", "git", "records") == families("record")
    assert name_families("create_issue", "", "shows") == families("create")  # the name's own verb first
    assert name_families("BookTool", "", "book") == frozenset()  # a noun there too
    assert name_families("git_commit", "git", "the") == frozenset()


def test_a_names_own_server_prefix_is_not_its_action() -> None:
    assert name_families("git_create_branch", "git") == families("create")
    assert name_families("git_create_branch") == frozenset()  # without its server, "git" starts it
    assert name_families("git", "git") == frozenset()  # a name that is only the server's


def test_a_question_ranks_tools_that_answer_it_above_tools_that_act() -> None:
    """On the real git server: "what branch am I on" is git_branch (it lists them), not git_create_branch."""
    hits = [doc.id for doc, _ in search_tools(REAL, "what branch am I on", 5).hits]
    assert hits[0] == "git__git_branch", hits
    with_rule_off = Ranker(docs_from_tools(REAL), mode="hybrid", rules=Rules(questions=False))
    assert with_rule_off.search("what branch am I on", 1).hits[0][0].id != "git__git_branch"  # the rule decides it


def test_notes_are_not_judged_by_what_they_would_do() -> None:
    """A note is about something, it does nothing: one whose first word is a verb ("Create releases from
    main") still answers a question about it; tools, which act, are judged (`acting`)."""
    notes = [
        Doc(id="n1", name="releases", text="Create releases from main, tagged vX.Y.Z, after CI passes."),
        Doc(id="n2", name="branches", text="Feature branches are named after their issue and deleted once merged."),
    ]
    question = "what branch do releases come from"
    as_notes = Ranker(notes, mode="hybrid", acting=False).search(question, 2).hits
    as_tools = Ranker(notes, mode="hybrid").search(question, 2).hits
    assert as_notes[0][0].id == "n1"
    assert dict((d.id, s) for d, s in as_tools)["n1"] < dict((d.id, s) for d, s in as_notes)["n1"]
