"""The word-piece cache (coffer.ranking.pieces) gives exactly the tokenizer's ids, or nothing.

Judged against the real tokenizer on every catalogue text and every eval query we have, and in a
fresh process where a restored index must answer a query without loading the tokenizer at all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from coffer.ranking import Doc, Ranker
from coffer.ranking.derived import SUFFIX
from coffer.ranking.embed import EmbeddingModel, ModelUnavailable, get_model, load_bundled_model
from coffer.ranking.pieces import MARK, PieceCache, decomposable, isolated_chars, punct_class
from tests.ranking.test_ranking import real_tools

ROOT = Path(__file__).parents[2]
ODD = [
    "",
    " ",
    "  ",
    "a  b",
    "  leading",
    "trailing  ",
    "open the (draft) PR?",
    "foo.bar/baz_qux-2.txt",
    "C++ & C#, 'quoted' \"twice\"",
    "“curly” — dash…",
    "é.ü; naïve café",
    "\n\nnew\tline\r\n",
    "日本語のテキスト",
    "emoji 🙂 ok",
    f"a literal {MARK} mark",
    "x\u2009y",
    "README.md",
    "port 3000, v1.2.3-rc4 and  42",
]


def _tokenizer():  # the real one, loaded (the model keeps it lazily)
    return get_model().tokenizer


def _eval_queries() -> list[str]:
    queries: list[str] = []
    for path in sorted((ROOT / "evals" / "data").glob("*/*.json*")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                queries.extend(row[k] for k in ("query", "question", "task") if isinstance(row.get(k), str))
    return queries


def _catalogue_texts() -> list[str]:
    return [t for tool in real_tools() for t in (tool.description, tool.tool, tool.name)]


def test_the_bundled_tokenizer_decomposes_by_piece() -> None:
    """What the cache relies on, read from the file wordllama ships."""
    config = json.loads(_tokenizer().to_str())
    vocab = list(config["model"]["vocab"])
    assert decomposable(config["normalizer"], config["pre_tokenizer"], config["model"]["type"], vocab)
    punct = punct_class(vocab, ("<unk>", "<s>", "</s>"))
    assert set("!?.,;:()[]{}'\"/_-") <= punct
    assert not punct & set("abcxyzABCXYZ0123456789")
    assert isolated_chars(vocab, ("<unk>", "<s>", "</s>")) == set("0123456789")
    # no token mixes the class with other characters, ▁ aside
    for token in vocab:
        chars = set(token) - {MARK}
        if token not in ("<unk>", "<s>", "</s>") and not token.startswith("<0x"):
            assert not (chars & punct and chars - punct), token


def test_other_tokenizers_are_not_decomposable() -> None:
    normalizer = json.loads(_tokenizer().to_str())["normalizer"]
    assert not decomposable(None, None, "BPE", ["a"])
    assert not decomposable(normalizer, {"type": "Whitespace"}, "BPE", ["a"])
    assert not decomposable(normalizer, None, "WordPiece", ["a"])
    assert not decomposable(normalizer, None, "BPE", [f"{MARK}a{MARK}b"])  # a token across a word start
    assert decomposable(normalizer, None, "BPE", [f"{MARK}{MARK}", f"{MARK}ab"])
    cache = PieceCache()
    from coffer.ranking.minilm import get_minilm, installed

    if installed():  # MiniLM's WordPiece tokenizer: the cache stays empty and every text goes to it
        cache.learn(get_minilm().tokenizer, ["open a PR"])
        assert cache.lookup("open a PR") is None and cache.to_arrays() == {}


def test_known_pieces_give_exactly_the_tokenizers_ids() -> None:
    tok = _tokenizer()
    texts = _catalogue_texts()
    queries = _eval_queries()
    assert len(queries) > 20_000
    cache = PieceCache()
    cache.learn(tok, texts)
    # every catalogue text is known; eval queries are known where their words are
    for text in texts:
        assert cache.lookup(text) == tok.encode(text, add_special_tokens=False).ids, text
    hits = [q for q in queries if cache.lookup(q) is not None]
    assert hits  # ordinary words are in the vocabulary's whole words
    cache.learn(tok, queries + ODD, vocab_words=False)
    mismatches = [q for q in queries + ODD if cache.lookup(q) != tok.encode(q, add_special_tokens=False).ids]
    assert mismatches == []


def test_unknown_words_and_special_tokens_go_to_the_tokenizer() -> None:
    tok = _tokenizer()
    cache = PieceCache()
    assert cache.lookup("open a PR") is None  # nothing learnt yet
    cache.learn(tok, ["open a pull request"], vocab_words=False)
    assert cache.lookup("open a pull request") == tok.encode("open a pull request", add_special_tokens=False).ids
    assert cache.lookup("open a zyxxyq") is None
    cache.learn(tok, ["x <s> y"], vocab_words=False)
    assert cache.lookup("x <s> y") is None  # the tokenizer matches "<s>" in raw text: never from pieces


def test_pieces_survive_a_snapshot_round_trip() -> None:
    tok = _tokenizer()
    cache = PieceCache()
    cache.learn(tok, _catalogue_texts()[:50], vocab_words=False)
    restored = PieceCache()
    restored.update_from_arrays(cache.to_arrays())
    assert len(restored) == len(cache) and restored.punct == cache.punct
    for text in [*_catalogue_texts()[:50], "open a PR"]:
        assert restored.lookup(text) == cache.lookup(text)
    # a second snapshot adds what the first lacked
    other = PieceCache()
    other.learn(tok, ["rotate the signing keys"], vocab_words=False)
    restored.update_from_arrays(other.to_arrays())
    assert (
        restored.lookup("rotate the signing keys")
        == tok.encode("rotate the signing keys", add_special_tokens=False).ids
    )
    assert PieceCache().to_arrays() == {}  # never taught: nothing saved, and nothing restored
    broken = cache.to_arrays()
    broken["piece_ends"] = broken["piece_ends"][:-1]
    with pytest.raises(ValueError, match="do not agree"):
        PieceCache().update_from_arrays(broken)


def test_a_restored_index_answers_known_words_without_the_tokenizer(tmp_path: Path) -> None:
    """In a fresh process: the snapshot's pieces tokenise the query, the tokenizer is never imported,
    and the ranking is the one the freshly built index gives."""
    from coffer.ranking import docs_from_tools

    docs = docs_from_tools(real_tools())
    built = Ranker(docs, mode="hybrid", cache_dir=tmp_path)
    expected = {
        q: [(d.id, s) for d, s in built.search(q, 5).hits] for q in ("open a PR", "kill the process on port 3000")
    }
    code = textwrap.dedent(
        f"""
        import json, sys
        from coffer.ranking import Ranker, docs_from_tools
        from pathlib import Path
        from tests.ranking.test_ranking import real_tools
        r = Ranker(docs_from_tools(real_tools()), mode="hybrid", cache_dir=Path({str(tmp_path)!r}))
        out = {{q: [[d.id, s] for d, s in r.search(q, 5).hits] for q in {list(expected)!r}}}
        print(json.dumps({{"snapshot": r.from_snapshot, "tokenizers": "tokenizers" in sys.modules, "hits": out}}))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, env=dict(os.environ)
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["snapshot"] and not out["tokenizers"]
    assert {q: [tuple(h) for h in hits] for q, hits in out["hits"].items()} == expected


def test_a_tokenizer_that_fails_on_first_need_falls_back_to_bm25(tmp_path: Path) -> None:
    """The tokenizer now loads when a text first needs it: a broken one still means BM25 with a note,
    whether that happens while building or at a query after a restore."""
    good = load_bundled_model()

    def broken() -> object:
        raise ModelUnavailable("embedding model failed to load: Exception: bad tokenizer file")

    docs = [
        Doc(id="a", name="create_issue", text="Create a new issue"),
        Doc(id="b", name="list_files", text="List files"),
    ]
    building = Ranker(docs, mode="hybrid", model=EmbeddingModel(good.matrix, load_tokenizer=broken))
    assert building.ranker == "bm25" and "bad tokenizer file" in (building.note or "")
    assert building.search("create an issue", 1).hits[0][0].id == "a"

    Ranker(docs, mode="hybrid", cache_dir=tmp_path, model=good)  # a snapshot with the pieces of these docs
    restored = Ranker(docs, mode="hybrid", cache_dir=tmp_path, model=EmbeddingModel(good.matrix, load_tokenizer=broken))
    assert restored.from_snapshot and restored.ranker == "hybrid"
    result = restored.search("create a zyxxyq issue", 1)  # an unknown word needs the tokenizer
    assert result.ranker == "bm25" and "bad tokenizer file" in (result.note or "")
    assert result.hits[0][0].id == "a"


def test_a_corrupt_tokenizer_file_is_model_unavailable(tmp_path: Path) -> None:
    from coffer.ranking.embed import _package_dir

    src = _package_dir()  # wordllama's files, copied with the tokenizer's JSON broken
    dst = tmp_path / "wordllama"
    (dst / "tokenizers").mkdir(parents=True)
    shutil.copytree(src / "weights", dst / "weights")
    (dst / "tokenizers" / "l2_supercat_tokenizer_config.json").write_text("{not json")
    model = load_bundled_model(dst)  # the weights load; the tokenizer waits for a text that needs it
    with pytest.raises(ModelUnavailable, match="failed to load"):
        model.embed(["hello"])
    assert model.embed([]).shape == (0, model.dim)  # nothing to tokenise: no tokenizer needed


def test_the_weights_are_mapped_exactly_as_safetensors_reads_them(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    from coffer.ranking.embed import _TENSOR_KEY, _WEIGHTS_FILE, _mapped_tensor, _package_dir

    path = _package_dir().joinpath(*_WEIGHTS_FILE)
    mapped = _mapped_tensor(path, _TENSOR_KEY)
    assert mapped is not None
    assert (mapped == load_file(str(path))[_TENSOR_KEY]).all()
    # what the mapper does not expect goes to the library: another dtype, another key, a short file
    other = tmp_path / "w.safetensors"
    save_file({_TENSOR_KEY: np.arange(12, dtype=np.int64).reshape(3, 4)}, str(other))
    assert _mapped_tensor(other, _TENSOR_KEY) is None
    save_file({"x": np.ones((2, 2), dtype=np.float32)}, str(other))
    assert _mapped_tensor(other, _TENSOR_KEY) is None
    save_file({_TENSOR_KEY: np.ones((2, 3), dtype=np.float32)}, str(other))
    assert (_mapped_tensor(other, _TENSOR_KEY) == 1).all()
    other.write_bytes(other.read_bytes()[:-4])  # truncated data
    assert _mapped_tensor(other, _TENSOR_KEY) is None
    other.write_bytes(b"\x01")
    assert _mapped_tensor(other, _TENSOR_KEY) is None


def test_query_pieces_are_learnt_only_with_classes_and_up_to_a_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    from coffer.ranking import pieces as pieces_mod

    tok = _tokenizer()
    cache = PieceCache()
    cache.learn_query(tok, ["rotate the zorblax keys"])  # no classes yet (no snapshot, no build): nothing
    assert len(cache) == 0 and not cache.fresh
    cache.learn(tok, ["open a pull request"], vocab_words=False)
    cache.learn_query(tok, ["rotate the zorblax keys"])
    assert "\u2581zorblax" in cache.fresh and "\u2581open" not in cache.fresh
    text = "rotate the zorblax keys"
    assert cache.lookup(text) == tok.encode(text, add_special_tokens=False).ids
    monkeypatch.setattr(pieces_mod, "MAX_FRESH", len(cache.fresh))
    cache.learn_query(tok, ["grommet"])
    assert cache.lookup("grommet") is None  # the cap: a long-running gateway stops learning


def test_a_damaged_query_pieces_file_is_ignored(tmp_path: Path) -> None:
    from coffer.ranking import docs_from_tools

    docs = docs_from_tools(real_tools())[:20]
    first = Ranker(docs, mode="hybrid", cache_dir=tmp_path)
    first.search("open a PR for the zorblax branch", 3)
    first.save_query_words()
    for saved in (tmp_path / "pieces").glob(f"*{SUFFIX}"):  # the query pieces, and the vocabulary's
        saved.write_bytes(b"not a saved array set")
    again = Ranker(docs, mode="hybrid", cache_dir=tmp_path)
    assert again.from_snapshot
    assert [d.id for d, _ in again.search("open a PR", 3).hits] == [d.id for d, _ in first.search("open a PR", 3).hits]


def test_queries_may_teach_the_cache_from_many_threads() -> None:
    """The gateway answers searches concurrently; each may learn words while others read and save."""
    from concurrent.futures import ThreadPoolExecutor

    tok = _tokenizer()
    cache = PieceCache()
    cache.learn(tok, ["open a pull request"], vocab_words=False)
    words = [f"zorb{a}{b}lax quux{b}{a}frob" for a in "abcdefgh" for b in "abcdefgh"]

    def teach(text: str) -> dict:
        cache.learn_query(tok, [text])
        return cache.to_arrays()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(teach, words))
    for text in words:
        assert cache.lookup(text) == tok.encode(text, add_special_tokens=False).ids


def test_the_vocabulary_pieces_are_learnt_once_per_model(tmp_path: Path) -> None:
    """A second catalogue (a changed one, or `coffer ask`'s notes) reads the vocabulary's pieces back
    instead of learning them again, and ranks exactly as a model that learnt everything itself."""
    from coffer.ranking import docs_from_tools
    from coffer.ranking.embed import MODEL_ID

    docs = docs_from_tools(real_tools())
    good = load_bundled_model()
    first = Ranker(docs[:40], mode="hybrid", cache_dir=tmp_path, model=good)
    vocab_file = tmp_path / "pieces" / f"{MODEL_ID}.vocab{SUFFIX}"
    assert vocab_file.is_file()
    stamp = vocab_file.stat().st_mtime_ns
    fresh = load_bundled_model()  # another process's model: nothing learnt yet
    second = Ranker(docs[40:90], mode="hybrid", cache_dir=tmp_path, model=fresh)
    assert vocab_file.stat().st_mtime_ns == stamp  # read, not rewritten
    alone = Ranker(docs[40:90], mode="hybrid", model=load_bundled_model())  # no cache: the tokenizer for all
    for q in ("open a PR", "kill the process on port 3000", "(draft) release notes?"):
        assert second.search(q, 5).hits == alone.search(q, 5).hits
        assert fresh.pieces.lookup(q) in (None, good.tokenizer.encode(q, add_special_tokens=False).ids)
    assert first.search("open a PR", 3).hits
