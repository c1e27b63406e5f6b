"""The ranking package on the 222 real tools: tokenizer, BM25F, fusion, Ranker, vector cache."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from coffer.errors import UsageError
from coffer.ranking import Doc, Ranker, cached_ranker, docs_from_tools, search_tools
from coffer.ranking.bm25 import BM25Index, BM25Params, FieldSpec
from coffer.ranking.derived import SUFFIX
from coffer.ranking.docs import SavedDocs, ToolLike, schema_text
from coffer.ranking.embed import ModelUnavailable, load_bundled_model
from coffer.ranking.fuse import top_k
from coffer.ranking.tokenize import split_words, tokenize

DATA = Path(__file__).parents[1] / "data" / "real-servers.json"


class _Tool:
    def __init__(self, raw: dict) -> None:
        self.server = raw["server"]
        self.tool = raw["name"]
        self.name = f"{raw['server']}__{raw['name']}"
        self.description = raw.get("description") or ""
        self.input_schema = raw.get("inputSchema") or {}
        self.title = None


def real_tools() -> list[ToolLike]:
    return [_Tool(raw) for raw in json.loads(DATA.read_text())]


@pytest.fixture(scope="module")
def real_docs() -> list[Doc]:
    return docs_from_tools(real_tools())


@pytest.fixture(scope="module")
def bm25_ranker(real_docs: list[Doc]) -> Ranker:
    return Ranker(real_docs, mode="bm25")


@pytest.fixture(scope="module")
def hybrid_ranker(real_docs: list[Doc], tmp_path_factory: pytest.TempPathFactory) -> Ranker:
    return Ranker(real_docs, mode="hybrid", cache_dir=tmp_path_factory.mktemp("cache"))


# ------------------------------------------------------------------ tokenizer


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("create_pull_request", ["create", "pull", "request"]),
        ("browser-navigate", ["browser", "navigate"]),
        ("getFileInfo", ["get", "file", "info"]),
        ("getHTTPResponse", ["get", "http", "response"]),
        ("list_S3_buckets", ["list", "s", "3", "s3", "buckets"]),
        ("base64", ["base", "64", "base64"]),
        ("API-post-search", ["api", "post", "search"]),
    ],
)
def test_identifiers_split_on_case_separators_and_digits(text: str, words: list[str]) -> None:
    assert split_words(text) == words


def test_tokenize_stems_drops_stopwords_and_expands_short_forms() -> None:
    assert tokenize("Open a PR for my repo") == ["open", "pull", "request", "repositori"]
    assert tokenize("the k8s pods") == ["kubernet", "pod"]
    assert tokenize("creating pull requests") == tokenize("create_pull_request")
    assert tokenize("") == []
    assert tokenize("使用必应搜索") == ["使", "用", "必", "应", "搜", "索"]


# ------------------------------------------------------------------ BM25


def test_the_compiled_and_pure_python_stemmers_agree() -> None:
    """PyStemmer (used when installed) and snowballstemmer (the fallback) give the same stem for every
    word of the real catalogue and of every eval set, so rankings do not depend on which one runs."""
    import re

    stemmer_c = pytest.importorskip("Stemmer").Stemmer("english")
    from snowballstemmer.english_stemmer import EnglishStemmer

    pure = EnglishStemmer()
    root = Path(__file__).parents[2]
    words: set[str] = set()
    for path in [DATA, *sorted((root / "evals" / "data").glob("*/*.json*"))]:
        words.update(w.lower() for w in re.findall(r"[A-Za-z]+", path.read_text(encoding="utf-8")))
    assert len(words) > 10_000
    assert [w for w in sorted(words) if stemmer_c.stemWord(w) != pure.stemWord(w)] == []


def test_idf_is_never_negative() -> None:
    """Lucene's idf: a term in every document still scores above zero, and rarer terms score higher."""
    corpus = [["common", "rare"], ["common", "some"], ["common", "some"], ["common"]]
    index = BM25Index([{"text": d} for d in corpus], BM25Params(k1=1.2, fields={"text": FieldSpec(1.0, 0.0)}))
    assert min(index.scores(["common"]).tolist()) > 0
    assert index.scores(["rare"])[0] > index.scores(["some"])[1] > index.scores(["common"])[1]


def _textbook_bm25(corpus: list[list[str]], query: list[str], k1: float, b: float) -> list[float]:
    n = len(corpus)
    avg = sum(len(d) for d in corpus) / n
    df = Counter(t for d in corpus for t in set(d))
    out = []
    for doc in corpus:
        tf = Counter(doc)
        score = 0.0
        for term in set(query):
            if tf[term]:
                w = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += w * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(doc) / avg))
        out.append(score)
    return out


def test_single_field_bm25_matches_the_textbook_formula() -> None:
    corpus = [
        ["pull", "request", "creat", "github"],
        ["issu", "creat", "github", "github"],
        ["file", "read", "text", "file", "content", "encod"],
        ["screenshot", "page"],
        ["merg", "pull", "request"],
    ]
    params = BM25Params(k1=1.2, fields={"text": FieldSpec(weight=1.0, b=0.75)})
    index = BM25Index([{"text": d} for d in corpus], params)
    for query in (["pull", "request"], ["github", "creat"], ["file"], ["nothing"]):
        got = index.scores(query).tolist()
        assert got == pytest.approx(_textbook_bm25(corpus, query, 1.2, 0.75), rel=1e-5)


def test_single_field_bm25_matches_bm25s_lucene() -> None:
    bm25s = pytest.importorskip("bm25s")
    import numpy as np

    corpus = [tokenize(f"{t.tool} {t.description}") for t in real_tools()]
    params = BM25Params(k1=1.5, fields={"text": FieldSpec(weight=1.0, b=0.75)})
    ours = BM25Index([{"text": d} for d in corpus], params)
    ref = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    ref.index(corpus, show_progress=False)
    for q in ("create pull request", "read file contents", "kubernetes pod logs"):
        terms = list(dict.fromkeys(tokenize(q)))
        # bm25s (like Lucene >= 8) drops the constant (k1 + 1) factor: same ranking, scaled scores
        expected = ref.get_scores(terms) * (1.5 + 1)
        assert np.allclose(ours.scores(terms), expected, rtol=1e-4, atol=1e-5)


def test_name_field_outweighs_description() -> None:
    docs = [
        Doc(id="a", name="helper", text="Can also take a screenshot of things."),
        Doc(id="b", name="take_screenshot", text="Captures the page."),
    ]
    res = Ranker(docs, mode="bm25").search("screenshot", 2)
    assert [d.id for d, _ in res.hits] == ["b", "a"]


def test_server_name_counts(bm25_ranker: Ranker) -> None:
    ids = [d.id for d, _ in bm25_ranker.search("sentry issues", 3).hits]
    assert ids[0].startswith("sentry__")


# ------------------------------------------------------------------ fusion and top-k


def test_top_k_skips_zero_scores_and_breaks_ties_by_index() -> None:
    import numpy as np

    scores = np.array([0.0, 0.5, 0.9, 0.5, 0.0, 0.5], dtype=np.float32)
    assert top_k(scores, 10) == [2, 1, 3, 5]
    assert top_k(scores, 2) == [2, 1]
    assert top_k(np.zeros(4, dtype=np.float32), 3) == []


# ------------------------------------------------------------------ Ranker on the real catalogue


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("create a pull request", "github__create_pull_request"),
        ("open a PR for my branch", "github__create_pull_request"),
        ("take a screenshot of the page", "playwright__browser_take_screenshot"),
        ("show the commit logs", "git__git_log"),
        ("list tables in the sqlite database", "sqlite__list_tables"),
    ],
)
def test_obvious_intents_rank_first_or_close(
    bm25_ranker: Ranker, hybrid_ranker: Ranker, query: str, expected: str
) -> None:
    for ranker in (bm25_ranker, hybrid_ranker):
        ids = [d.id for d, _ in ranker.search(query, 3).hits]
        assert expected in ids, (ranker.ranker, query, ids)


def test_results_are_deterministic_and_sorted(real_docs: list[Doc], hybrid_ranker: Ranker) -> None:
    again = Ranker(real_docs, mode="hybrid")
    for q in ("read a file", "delete the kubernetes job", "what time is it"):
        first = hybrid_ranker.search(q, 10)
        second = again.search(q, 10)
        assert [(d.id, s) for d, s in first.hits] == [(d.id, s) for d, s in second.hits]
        scores = [s for _, s in first.hits]
        assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
        assert first.total == 222 and first.ranker == "hybrid"


def test_no_zero_score_matches(bm25_ranker: Ranker) -> None:
    res = bm25_ranker.search("xyzzy plugh", 5)
    assert res.hits == [] and res.total == 222 and res.ranker == "bm25"
    assert Ranker([], mode="hybrid").search("anything", 5).hits == []


def test_semantic_mode_finds_paraphrases(real_docs: list[Doc]) -> None:
    ranker = Ranker(real_docs, mode="semantic")
    assert ranker.ranker == "semantic"
    ids = [d.id for d, _ in ranker.search("capture an image of what the browser shows", 5).hits]
    assert "playwright__browser_take_screenshot" in ids


def test_bad_arguments_are_usage_errors(bm25_ranker: Ranker, real_docs: list[Doc]) -> None:
    with pytest.raises(UsageError):
        bm25_ranker.search("x", 0)
    with pytest.raises(UsageError):
        Ranker(real_docs, mode="fuzzy")


def test_docs_from_tools_reads_names_params_and_server() -> None:
    tools = {t.name: t for t in real_tools()}
    (doc,) = docs_from_tools([tools["github__create_pull_request"]])
    assert (doc.id, doc.name, doc.server) == ("github__create_pull_request", "create_pull_request", "github")
    assert "head" in doc.params.split() and "base" in doc.params.split()
    assert schema_text({"properties": {"q": {"description": "the query"}}}) == "q the query"
    assert schema_text("not a schema") == ""


# ------------------------------------------------------------------ model and cache


def test_vectors_are_cached_by_content_hash(real_docs: list[Doc], tmp_path: Path) -> None:
    first = Ranker(real_docs, mode="hybrid", cache_dir=tmp_path)
    files = list((tmp_path / "vectors").glob("*.npy"))
    assert len(files) == 1
    stamp = files[0].stat().st_mtime_ns
    second = Ranker(real_docs, mode="hybrid", cache_dir=tmp_path)
    assert files[0].stat().st_mtime_ns == stamp  # read, not rewritten
    q = "rename a file"
    assert [(d.id, s) for d, s in first.search(q, 5).hits] == [(d.id, s) for d, s in second.search(q, 5).hits]
    files[0].write_bytes(b"garbage")  # a damaged cache is recomputed, not trusted
    shutil.rmtree(tmp_path / "index")  # (the whole-index snapshot would answer first)
    third = Ranker(real_docs, mode="hybrid", cache_dir=tmp_path)
    assert [d.id for d, _ in third.search(q, 5).hits] == [d.id for d, _ in first.search(q, 5).hits]
    changed = Ranker([*real_docs[:-1], Doc(id="x", name="x", text="new tool")], mode="hybrid", cache_dir=tmp_path)
    assert changed.ranker == "hybrid" and len(list((tmp_path / "vectors").glob("*.npy"))) == 2


def test_a_built_index_is_restored_from_its_snapshot(real_docs: list[Doc], tmp_path: Path) -> None:
    first = Ranker(real_docs, mode="hybrid", cache_dir=tmp_path)
    assert not first.from_snapshot
    (snap,) = (tmp_path / "index").glob(f"*{SUFFIX}")
    second = Ranker(real_docs, mode="hybrid", cache_dir=tmp_path)
    assert second.from_snapshot and second.ranker == "hybrid"
    for q in ("open a PR", "rename a file", "take a screenshot of the page; then save it to shot.png"):
        assert [(d.id, s) for d, s in first.search(q, 8).hits] == [(d.id, s) for d, s in second.search(q, 8).hits]
    # another mode or catalogue is another snapshot; BM25 alone holds no vectors
    bm25 = Ranker(real_docs, mode="bm25", cache_dir=tmp_path)
    assert not bm25.from_snapshot and Ranker(real_docs, mode="bm25", cache_dir=tmp_path).from_snapshot
    assert not Ranker(real_docs[:-1], mode="hybrid", cache_dir=tmp_path).from_snapshot
    # a damaged snapshot is rebuilt (and rewritten), never trusted
    snap.write_bytes(snap.read_bytes()[:1000])
    third = Ranker(real_docs, mode="hybrid", cache_dir=tmp_path)
    assert not third.from_snapshot
    assert [d.id for d, _ in third.search("rename a file", 5).hits] == [
        d.id for d, _ in first.search("rename a file", 5).hits
    ]
    assert Ranker(real_docs, mode="hybrid", cache_dir=tmp_path).from_snapshot


def test_a_saved_index_searches_without_its_docs(real_docs: list[Doc], tmp_path: Path) -> None:
    """`Ranker.saved` (what a warm `coffer find` over 30,000 servers uses) reads no doc: it ranks as the
    ranker that built the snapshot did, deprecated docs' lower standing included (it is kept there)."""
    old = Doc(id="old__read_file", name="read_file", text="Read a file. DEPRECATED: use read_text_file instead.")
    docs = [*real_docs, old]
    built = Ranker(docs, mode="hybrid", cache_dir=tmp_path, docs_key="catalogue-1")
    assert built.index.standing is not None
    saved = Ranker.saved(tmp_path, "catalogue-1")
    assert saved is not None and saved.from_snapshot and isinstance(saved.docs, SavedDocs)
    assert saved.total == len(docs) and saved.position("old__read_file") == len(docs) - 1
    assert saved.docs.leads[0] == "echoes"  # the word each text opens with: a tool's action, where its name has none
    for q in ("read a file", "open a PR", "take a screenshot of the page", "what changed in the last commit"):
        assert [(d.id, d.name, s) for d, s in saved.search(q, 8).hits] == [
            (d.id, d.name, s) for d, s in built.search(q, 8).hits
        ]
    at = [len(docs) - 1]
    assert saved.scores_of("read a file", at) == built.scores_of("read a file", at)
    unmarked = Ranker([*real_docs, Doc(id=old.id, name=old.name, text="Read a file.")], mode="hybrid")
    assert saved.scores_of("read a file", at)[0] < unmarked.scores_of("read a file", at)[0]
    assert Ranker.saved(tmp_path, "catalogue-2") is None  # no such snapshot
    assert Ranker.saved(tmp_path, "catalogue-1", mode="bm25") is None


def test_cached_ranker_is_reused_while_docs_are_unchanged(real_docs: list[Doc]) -> None:
    one = cached_ranker(real_docs, mode="bm25")
    assert cached_ranker(list(real_docs), mode="bm25") is one
    assert cached_ranker(real_docs[:10], mode="bm25") is not one
    res = search_tools(real_tools(), "merge a pull request", 3, mode="bm25")
    assert res.hits[0][0].id == "github__merge_pull_request"


def test_missing_model_files_raise_model_unavailable(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="missing"):
        load_bundled_model(tmp_path)


def _run(code: str, env_extra: dict[str, str] | None = None) -> dict:
    import os

    env = dict(os.environ, **(env_extra or {}))
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_model_loads_with_the_network_blocked() -> None:
    out = _run(
        """
        import json, socket, sys
        def refuse(*a, **k):
            raise OSError("network disabled in this test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        import coffer.ranking as r
        before = "numpy" in sys.modules
        ranker = r.Ranker([r.Doc(id="a", name="take_screenshot", text="Take a screenshot of the page")])
        res = ranker.search("capture the screen", 1)
        print(json.dumps({"numpy_at_import": before, "ranker": res.ranker, "hit": res.hits[0][0].id,
                          "wordllama_imported": "wordllama" in sys.modules}))
        """
    )
    assert out == {"numpy_at_import": False, "ranker": "hybrid", "hit": "a", "wordllama_imported": False}


def test_broken_model_install_falls_back_to_bm25(tmp_path: Path) -> None:
    fake = tmp_path / "wordllama"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('should never be imported')\n")
    out = _run(
        """
        import json
        import coffer.ranking as r
        res = r.Ranker([r.Doc(id="a", name="take_screenshot", text="Take a screenshot")]).search("screenshot", 3)
        print(json.dumps({"ranker": res.ranker, "note": res.note, "hits": [d.id for d, _ in res.hits]}))
        """,
        {"PYTHONPATH": f"{tmp_path}:{Path(__file__).resolve().parents[2]}"},
    )
    assert out["ranker"] == "bm25" and out["hits"] == ["a"]
    assert "semantic model unavailable" in out["note"] and "missing" in out["note"]
