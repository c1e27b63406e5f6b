"""How developers ask for tools, in the words tools are described with.

People type "open a PR", "grab the README", "kill the dev server", "tail the logs", "ls src"; tool
catalogues say create_pull_request, get_file_contents, kill_process, get logs, list_directory. This
module is a small, documented vocabulary applied to every query (never to the catalogue):

- verb intents: a verb people use for an action, and the verb catalogues use for it (`VERB_INTENTS`),
  some only next to certain objects (`OBJECT_INTENTS`: you open a pull request by creating it, but
  open a file by reading it);
- shell and jargon short forms (`SHELL_WORDS`), on top of the abbreviations every text gets
  (`coffer.ranking.tokenize.ABBREVIATIONS`: PR, repo, k8s, db ...);
- the query's first action word, and the families of actions it (and what it maps to) belongs to
  (`VERB_FAMILIES`), so a tool that does another kind of thing can be told apart (coffer.ranking.rerank).

`rewrite(query)` returns the BM25 terms with their weights and the text the embedder should see.
Rules here are general English and developer usage, not phrases from any eval set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from coffer.ranking.tokenize import expand_abbreviations, split_words, stem, tokenize

EXPANSION_WEIGHT = 0.3
# "remember that Alice works at Acme": the clause after "that" is the fact to keep, an argument, not the
# action ("works" is not a working directory); its words count this much, and the embedder sees the rest
KEEP_VERBS = frozenset({"remember", "memorize", "memorise", "note", "forget", "remind"})
FACT_WEIGHT = 0.2
SHELL_WEIGHT = 1.0  # `cat`, `ls`, `mr`: words catalogues never use, so their meaning counts in full

# verb people type -> verbs catalogues use (always)
VERB_INTENTS: dict[str, tuple[str, ...]] = {
    "grab": ("get",),
    "fetch": ("get",),
    "retrieve": ("get",),
    "obtain": ("get",),
    "show": ("get", "list"),
    "kill": ("stop", "terminate"),
    "terminate": ("stop", "kill"),
    "halt": ("stop",),
    "end": ("stop",),
    "tail": ("logs", "read"),
    "spin": ("start", "create"),
    "launch": ("start", "run"),
    "boot": ("start",),
    "nuke": ("delete",),
    "erase": ("delete",),
    "wipe": ("delete",),
    "drop": ("delete",),
    "modify": ("update", "edit"),
    "change": ("update", "edit"),
    "tweak": ("update", "edit"),
    "rename": ("move", "update"),
    "lookup": ("search", "find"),
    "look": ("search", "find"),
    "locate": ("find", "search"),
    "save": ("write",),
    "store": ("write", "save"),
    "dump": ("write", "export"),
    "book": ("reserve",),
    "ping": ("check", "status"),
    # everyday words for what memory tools do, and arithmetic in words
    "remember": ("memory", "knowledge", "store", "add"),
    "memorize": ("memory", "knowledge", "store", "add"),
    "forget": ("memory", "knowledge", "delete", "remove"),
    "recall": ("memory", "knowledge", "search", "read"),
    "plus": ("add", "sum"),
    "minus": ("subtract", "difference"),
}

# shell and jargon words -> what catalogues say
SHELL_WORDS: dict[str, tuple[str, ...]] = {
    "ls": ("list", "directory"),
    "dir": ("directory",),
    "rm": ("delete", "remove"),
    "rmdir": ("delete", "directory"),
    "mkdir": ("create", "directory"),
    "cat": ("read", "file"),
    "cp": ("copy",),
    "mv": ("move",),
    "grep": ("search",),
    "curl": ("fetch", "http"),
    "wget": ("download",),
    "ps": ("list", "process"),
    "mr": ("merge", "request"),
    "mrs": ("merge", "request"),
    "cfg": ("configuration",),
    "conf": ("configuration",),
    "deps": ("dependencies",),
    "pkg": ("package",),
    "creds": ("credentials",),
    "auth": ("authentication",),
    "gh": ("github",),
    "logs": ("log",),
    "bug": ("issue",),
    "bugs": ("issue",),
    "readme": ("file",),
}

# verb + object -> the catalogue's verb for that pair ("open a PR" creates one, "open a file" reads it)
_CREATE_OBJECTS = ("pull", "pr", "prs", "mr", "merge", "issue", "ticket", "bug", "branch", "incident", "repo")
OBJECT_INTENTS: dict[str, list[tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "open": [
        (_CREATE_OBJECTS, ("create",)),
        (("file", "document", "doc"), ("read",)),
        (("url", "page", "link", "tab", "website", "site", "browser"), ("navigate", "open")),
    ],
    "file": [(("pull", "pr", "mr", "issue", "ticket", "bug", "incident", "report"), ("create",))],
    "raise": [(("pull", "pr", "mr", "issue", "ticket", "bug", "incident"), ("create",))],
    "submit": [(("pull", "pr", "mr", "issue", "ticket", "bug", "form"), ("create",))],
    "cut": [(("branch", "release", "tag"), ("create",))],
    "new": [((*_CREATE_OBJECTS, "file", "directory", "folder", "project"), ("create",))],
    "make": [((*_CREATE_OBJECTS, "file", "directory", "folder", "project", "table"), ("create",))],
    "add": [(("issue", "ticket", "comment", "note", "label", "file", "directory"), ("create",))],
    "pull": [(("changes", "latest", "upstream", "origin", "main", "master"), ("fetch", "pull"))],
}

# Words that start an action in a query (what the action weight applies to), besides the keys above.
ACTION_VERBS: frozenset[str] = frozenset(
    {
        *("create", "get", "list", "delete", "remove", "update", "edit", "read", "write", "search", "find"),
        *("send", "post", "reply", "stop", "start", "run", "execute", "restart", "deploy", "merge", "close"),
        *("open", "move", "copy", "download", "upload", "install", "build", "test", "check", "navigate"),
        *("click", "type", "fill", "take", "capture", "convert", "translate", "summarize", "summarise"),
        *("buy", "purchase", "order", "pay", "request", "book", "reserve", "cancel", "schedule", "add"),
        *("query", "insert", "commit", "push", "fork", "clone", "analyze", "analyse", "compare", "count"),
        *("calculate", "compute", "generate", "draw", "plot", "render", "export", "import", "share"),
        *("subscribe", "unsubscribe", "invite", "assign", "approve", "review", "comment", "tag", "label"),
        *("monitor", "watch", "track", "log", "record", "play", "pause", "resume", "scrape", "crawl", "visit"),
        *("browse", "show", "display", "view", "describe", "explain", "set", "enable", "disable", "rename"),
        *VERB_INTENTS,
        *OBJECT_INTENTS,
        *("ls", "rm", "mkdir", "cat", "cp", "mv", "grep", "curl", "wget", "tail"),
    }
)


# A query that opens with one of these is a question; "how" (how do I ...) and "when" (when it is 9am
# in Paris, ...) open requests as often, and "can you ..." is a request.
QUESTION_WORDS = frozenset({"what", "which", "who", "whose", "where", "am", "is", "are", "did", "does", "do", "has"})
# The family of actions that answer a question: a question asks to know, never to create, change, send,
# run or convert anything ("what time is it in Tokyo" asks for the time now, not for a conversion). Convert,
# translate and summarize answered too until 2026-12-08: dropping them lost no ask of any eval set and put
# get_current_time first for the README's own example (evals/README.md, "Questions").
ANSWERING = frozenset({"retrieve"})

# Families of actions, for telling a tool that does something else from one that does what was asked
# ("open a PR for my branch": create_pull_request, not update_pull_request_branch; "buy a ticket", not
# "find tickets"). A verb may belong to several ("open" reads a file, creates a PR, navigates to a page;
# "close" an issue updates it, "close" a process stops it); two actions conflict only when their
# families are disjoint. Retrieval verbs are one family: people say "look up", "show" and "find" for
# what catalogues call get_, list_ and search_.
VERB_FAMILIES: dict[str, str] = {
    "retrieve": "get read fetch retrieve show view describe obtain grab download load inspect list ls "
    "enumerate browse search find query lookup look locate grep seek check analyze analyse monitor count open",
    "create": "create add new make insert generate build spin file raise submit cut init initialize open write",
    "update": "update edit modify change set patch rename tweak replace configure close reset",
    "delete": "delete remove drop destroy erase wipe nuke rm purge clear",
    "run": "run execute start launch boot invoke call trigger",
    "stop": "stop kill terminate halt cancel end abort close",
    "send": "send post publish reply email notify message share",
    "write": "write save put store dump export upload create record",
    "buy": "buy purchase order pay checkout book reserve",
    "merge": "merge",
    "move": "move mv",
    "copy": "copy cp clone fork",
    "navigate": "navigate go visit open",
    "interact": "click press type fill select hover drag",
    "translate": "translate",
    "convert": "convert",
    "summarize": "summarize summarise",
}


# Words that start tool names as nouns at least as often as verbs (BookTool, EmailByNylas, file_info,
# order_status, message_list): a name starting with one says nothing about its action.
NAME_NOUNS: frozenset[str] = frozenset(
    {"book", "email", "message", "order", "file", "post", "query", "type", "new", "end", "call", "share", "drop"}
    | {"count", "log", "record"}
)


def name_families(name: str, server: str = "", lead: str = "") -> frozenset[str]:
    """The action families of the verb a tool's name starts with (update_pull_request_branch: update),
    after its own server's prefix (git_create_branch: create); where the name holds no action, those of
    the word its description opens with (`lead`: catalogues open with the verb, git_commit's "Records
    changes to the repository")."""
    words = split_words(name)
    if server and len(words) > 1 and words[0] in split_words(server):
        words = words[1:]
    found = families(words[0]) if words and words[0] not in NAME_NOUNS else frozenset()
    return found or (families(lead) if lead and lead not in NAME_NOUNS else frozenset())


@lru_cache(maxsize=1)
def _families_by_stem() -> dict[str, frozenset[str]]:
    """VERB_FAMILIES inverted, by stem; built on first use (stemming at import would slow every start)."""
    found: dict[str, set[str]] = {}
    for family, verbs in VERB_FAMILIES.items():
        for verb in verbs.split():
            found.setdefault(stem(verb), set()).add(family)
    return {term: frozenset(names) for term, names in found.items()}


def families(verb: str) -> frozenset[str]:
    """The action families of a verb (or of its stem: "creates", "updating"); empty when it is none."""
    return _families_by_stem().get(stem(verb), frozenset())


@dataclass
class Rewrite:
    """A query as the ranker uses it: weighted BM25 terms and the text for the embedder."""

    terms: list[str]
    weights: dict[str, float] = field(default_factory=dict)
    text: str = ""
    action: str | None = None  # the word taken as the query's action, if any
    families: frozenset[str] = frozenset()  # the action's families, with what it maps to (`families`)
    question: bool = False  # a question: its families are those that answer (`ANSWERING`)


# A verb after one of these is a noun ("the last commit", "a search engine"), never the query's action.
DETERMINERS = frozenset(
    {"the", "a", "an", "my", "this", "these", "those", "last", "latest", "your", "our", "its", "their", "each"}
    | {"every", "some", "any"}
)


def _asks(words: list[str]) -> bool:
    """Whether the query is a question ("what branch am I on", "is the server reachable"): it asks to
    know, so its action is one that answers (`ANSWERING`), whatever verb it holds ("which files did I
    change" asks to see changes, not to make them)."""
    return bool(words) and words[0] in QUESTION_WORDS


def _answers(verb: str) -> bool:
    """Whether a mapped word may stand in a question: a noun ("memory") or a verb that answers ("search")."""
    found = families(verb)
    return not found or bool(found & ANSWERING)


def _action(words: list[str]) -> str | None:
    """The query's first action word; a verb after a determiner is a noun ("in the last commit")."""
    return next(
        (w for i, w in enumerate(words) if w in ACTION_VERBS and (i == 0 or words[i - 1] not in DETERMINERS)), None
    )


def intents(words: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """(word, what it maps to) for every word of the query this vocabulary knows. A verb that depends
    on its object ("open") is read only as the query's action: in "list the open pull requests" it
    describes the pull requests and maps to nothing."""
    found: list[tuple[str, tuple[str, ...]]] = []
    action = _action(words)
    for i, word in enumerate(words):
        if word in SHELL_WORDS:
            found.append((word, SHELL_WORDS[word]))
        if word in VERB_INTENTS:
            found.append((word, VERB_INTENTS[word]))
        for objects, target in OBJECT_INTENTS.get(word, []) if word == action else []:
            if any(w in objects for w in words[i + 1 : i + 5]):
                found.append((word, target))
                break
    return found


def _fact(words: list[str]) -> int | None:
    """Where a fact to keep starts: the word after "that" following the verb of keeping the ask opens with
    ("note down that ..."; "Note that ..." inside a task is no such verb)."""
    for i, word in enumerate(words[:2]):
        if word in KEEP_VERBS and (i == 0 or words[0] == "please"):
            for j in range(i + 1, min(i + 3, len(words))):
                if words[j] == "that" and j + 1 < len(words):
                    return j + 1
    return None


def rewrite(query: str, vocabulary: bool = True, questions: bool = True) -> Rewrite:
    """The query's BM25 terms (mapped words added at `EXPANSION_WEIGHT`, shell words at `SHELL_WEIGHT`),
    its action and the action's families, and the embedder's text (short forms spelled out, mapped
    verbs appended). Without `vocabulary` (the ablation's switch) no word is mapped: the terms are the
    query's own, the action its own verb. A question's verbs map only to words that answer ("did I
    change" to no edit); without `questions` (its switch) a question is read as a request."""
    words = split_words(query)
    terms = tokenize(query)
    weights: dict[str, float] = dict.fromkeys(terms, 1.0)
    fact = _fact(words) if vocabulary else None
    if fact is not None:
        head = set(tokenize(" ".join(words[:fact])))
        for term in tokenize(" ".join(words[fact:])):
            if term not in head:
                weights[term] = FACT_WEIGHT
    mapped = intents(words) if vocabulary else []
    question = questions and _asks(words)
    if question:  # "which files did I change" asks to see changes: "change" maps to no edit tool
        mapped = [(w, kept) for w, targets in mapped if (kept := tuple(t for t in targets if _answers(t)))]
    extra: list[str] = []
    for word, targets in mapped:
        weight = SHELL_WEIGHT if word in SHELL_WORDS else EXPANSION_WEIGHT
        for target in targets:
            for term in tokenize(target):
                if term not in weights:
                    weights[term] = weight
                    terms.append(term)
                extra.append(target)
    action = _action(words)
    action_families: frozenset[str] = frozenset()
    if question:
        action, action_families = words[0], ANSWERING
    elif action is not None:
        action_families = families(action)
        for word, targets in mapped:
            if word == action:
                action_families = action_families.union(*(families(t) for t in targets))
    text = expand_abbreviations(query if fact is None else " ".join(words[:fact]) + " a fact")
    if extra:
        text = f"{text} ({' '.join(dict.fromkeys(extra))})"
    return Rewrite(terms=terms, weights=weights, text=text, action=action, families=action_families, question=question)
