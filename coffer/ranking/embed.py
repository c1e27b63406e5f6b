"""Offline embeddings from wordllama's bundled model, and a vector cache keyed by content hash.

wordllama ships a 256-dim static token-embedding model (Llama-2 BPE vocabulary) inside its wheel.
Its own loader may try to download the tokenizer from Hugging Face, and importing the package
configures the root logger, so neither is used: the tokenizer and the weights are read straight from
the package's `tokenizers/` and `weights/` files. A sentence vector is the mean of its token vectors,
L2-normalised; similarity is a dot product. Nothing here touches the network.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from coffer.errors import CofferError
from coffer.ranking.derived import load_derived, save_arrays, save_derived
from coffer.ranking.pieces import KEEP_FILES, PieceCache, vocab_file

M = TypeVar("M")

if TYPE_CHECKING:
    import numpy as np

MODEL_ID = "wordllama-l2_supercat-256"
_TOKENIZER_FILE = ("tokenizers", "l2_supercat_tokenizer_config.json")
_WEIGHTS_FILE = ("weights", "l2_supercat_256.safetensors")
_TENSOR_KEY = "embedding.weight"
_KEEP_CACHE_FILES = 8
_ENCODE_BATCH = 256
_QUERY_TEXTS = 16  # texts one query embeds at most (itself, its steps, its implied needs)


class Embedder(Protocol):
    """What the ranker needs of an embedding model (wordllama's here, or the optional MiniLM)."""

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class ModelUnavailable(CofferError):
    """The bundled embedding model cannot be found or loaded; callers fall back to BM25."""


class EmbeddingModel:
    """Static token embeddings + the matching tokenizer: text -> unit vector.

    The tokenizer is loaded on first need (`load_tokenizer`): texts whose every word is in `pieces`
    (filled from an index snapshot or by `learn_pieces`) are tokenised without it.
    """

    def __init__(
        self,
        matrix: np.ndarray,
        tokenizer: Any = None,
        model_id: str = MODEL_ID,
        *,
        load_tokenizer: Callable[[], Any] | None = None,
    ):
        if tokenizer is None and load_tokenizer is None:
            raise ValueError("an EmbeddingModel needs a tokenizer or a way to load one")
        self.matrix = matrix
        self._tokenizer = tokenizer
        self._load_tokenizer = load_tokenizer
        self._lock = threading.Lock()
        self.model_id = model_id
        self.dim = int(matrix.shape[1])
        self.pieces = PieceCache()
        self._vocab_learnt = False  # the vocabulary's words are in `pieces` (learn_pieces)

    @property
    def tokenizer(self) -> Any:
        with self._lock:
            if self._tokenizer is None:
                assert self._load_tokenizer is not None
                self._tokenizer = self._load_tokenizer()
            return self._tokenizer

    def learn_pieces(self, texts: Sequence[str], cache_dir: Path | None = None) -> None:
        """Remember the pieces of `texts` (a catalogue's) for later queries, with the tokenizer's ids.

        The vocabulary's whole words (most of the cache, ~0.6 s to learn) are the same for every
        catalogue: with `cache_dir` they are learnt once per model and read back after that, so a
        changed catalogue (or a new note for `coffer ask`) pays only for its own words.
        """
        if not self._vocab_learnt:
            path = vocab_file(cache_dir, self.model_id) if cache_dir is not None else None
            saved = load_derived(path) if path is not None else None
            try:
                self.pieces.update_from_arrays(saved or {})
            except (KeyError, ValueError, IndexError):
                saved = None  # damaged, or another tokenizer's: learnt again below
            if not saved or "piece_text" not in saved:
                vocab = PieceCache()
                vocab.learn(self.tokenizer, [])
                arrays = vocab.to_arrays()
                if path is not None and arrays:
                    save_arrays(path, arrays, KEEP_FILES)
                self.pieces.update_from_arrays(arrays)
            self._vocab_learnt = True
        self.pieces.learn(self.tokenizer, texts, vocab_words=False)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The tokenizer's ids for each text: from the piece cache where it knows every word."""
        out: list[list[int] | None] = [self.pieces.lookup(t) for t in texts]
        todo = [i for i, ids in enumerate(out) if ids is None]
        # in batches: the tokenizer's encodings (offsets, token strings) for 10,000 texts at once cost
        # ~200 MB that the allocator keeps after they are freed
        for start in range(0, len(todo), _ENCODE_BATCH):
            rows = todo[start : start + _ENCODE_BATCH]
            batch = self.tokenizer.encode_batch([texts[i] for i in rows], add_special_tokens=False)
            for row, enc in zip(rows, batch, strict=True):
                out[row] = enc.ids
        if 0 < len(todo) <= _QUERY_TEXTS:  # a query (a build embeds thousands): learn its new words
            self.pieces.learn_query(self.tokenizer, [texts[i] for i in todo])
        return [ids if ids is not None else [] for ids in out]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text (a zero row for text with no tokens)."""
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        vocab = self.matrix.shape[0]
        for row, token_ids in enumerate(self.token_ids(texts)):
            ids = [i for i in token_ids if 0 <= i < vocab]
            if ids:
                out[row] = self.matrix[ids].mean(axis=0, dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


def _package_dir() -> Path:
    # find_spec on a top-level name locates the package without importing (and running) it.
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable("the semantic ranker needs the 'wordllama' package, which is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def load_bundled_model(package_dir: Path | None = None) -> EmbeddingModel:
    """Read the bundled model from disk. Raises ModelUnavailable when files or libraries are missing."""
    base = package_dir if package_dir is not None else _package_dir()
    tok_path = base.joinpath(*_TOKENIZER_FILE)
    weights_path = base.joinpath(*_WEIGHTS_FILE)
    for path in (tok_path, weights_path):
        if not path.is_file():
            raise ModelUnavailable(f"embedding model file missing: {path}")
    try:
        import numpy as np
        from safetensors.numpy import load_file
    except ImportError as exc:
        raise ModelUnavailable(f"the semantic ranker needs {exc.name!r}, which is not installed") from exc
    if importlib.util.find_spec("tokenizers") is None:  # loaded on first need, so only looked for here
        raise ModelUnavailable("the semantic ranker needs 'tokenizers', which is not installed")
    try:
        # kept as stored (float16: 16 MB, not 32): rows are averaged in float32
        matrix = _mapped_tensor(weights_path, _TENSOR_KEY)
        if matrix is None:
            matrix = np.ascontiguousarray(load_file(str(weights_path))[_TENSOR_KEY])
        if matrix.dtype not in (np.float16, np.float32):
            matrix = matrix.astype(np.float32)
    except Exception as exc:  # corrupt file, wrong format: any of these means "no semantic path"
        raise ModelUnavailable(f"embedding model failed to load: {type(exc).__name__}: {exc}") from exc
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        raise ModelUnavailable(f"embedding model has an unexpected shape {matrix.shape}")
    return EmbeddingModel(matrix, load_tokenizer=lambda: _load_tokenizer(tok_path))


_SAFETENSORS_DTYPES = {"F16": "<f2", "F32": "<f4"}


def _mapped_tensor(path: Path, key: str) -> np.ndarray | None:
    """The tensor mapped read-only from the file, or None to let safetensors read it.

    A query reads a handful of the 32,000 rows; mapping the file instead of reading all 16 MB saves
    ~15 ms of every `coffer search`. The format is an 8-byte header length, a JSON header, then raw
    little-endian data; anything unexpected in it goes to the library, which owns the errors.
    """
    import json

    import numpy as np

    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            return None
        length = int.from_bytes(head, "little")
        if not 2 <= length <= min(size - 8, 1 << 24):
            return None
        try:
            header = json.loads(handle.read(length))
        except ValueError:
            return None
    info = header.get(key) if isinstance(header, dict) else None
    if not isinstance(info, dict) or info.get("dtype") not in _SAFETENSORS_DTYPES:
        return None
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if not (isinstance(shape, list) and len(shape) == 2 and all(isinstance(n, int) and n > 0 for n in shape)):
        return None
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(n, int) for n in offsets)):
        return None
    dtype = np.dtype(_SAFETENSORS_DTYPES[info["dtype"]])
    start, nbytes = 8 + length + offsets[0], shape[0] * shape[1] * dtype.itemsize
    if offsets[0] < 0 or offsets[1] - offsets[0] != nbytes or start + nbytes > size:
        return None
    return np.memmap(path, dtype=dtype, mode="r", offset=start, shape=(shape[0], shape[1]))


def _load_tokenizer(path: Path) -> Any:
    """The bundled tokenizer, loaded when a text first needs it; a file that fails to parse is
    ModelUnavailable, as it was when the tokenizer loaded with the weights (the ranker falls back)."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise ModelUnavailable(f"embedding model failed to load: {type(exc).__name__}: {exc}") from exc
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


class LoadOnce(Generic[M]):
    """A process-wide model: loaded on first use; a load failure is remembered and re-raised cheaply."""

    def __init__(self, loader: Callable[[], M]) -> None:
        self._loader = loader
        self._lock = threading.Lock()
        self._model: M | None = None
        self._error: ModelUnavailable | None = None

    def __call__(self) -> M:
        with self._lock:
            if self._model is None and self._error is None:
                try:
                    self._model = self._loader()
                except ModelUnavailable as exc:
                    self._error = exc
            if self._model is None:
                assert self._error is not None
                raise self._error
            return self._model


get_model = LoadOnce(load_bundled_model)


def texts_hash(model_id: str, texts: Sequence[str]) -> str:
    digest = hashlib.sha256(model_id.encode())
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def cached_vectors(model: Embedder, texts: Sequence[str], cache_dir: Path | None) -> np.ndarray:
    """Vectors for `texts`, read from `cache_dir` when this exact text list was embedded before.

    The cache is derived data: an unreadable or stale file is recomputed, a failed write is ignored.
    """
    import numpy as np

    if cache_dir is None:
        return model.embed(texts)
    folder = cache_dir / "vectors"
    path = folder / f"{texts_hash(model.model_id, texts)[:40]}.npy"
    try:
        vectors = np.load(path, allow_pickle=False)
        if vectors.shape == (len(texts), model.dim) and vectors.dtype == np.float32:
            return vectors
    except (OSError, ValueError):
        pass
    vectors = model.embed(texts)
    save_derived(path, lambda handle: np.save(handle, vectors, allow_pickle=False), _KEEP_CACHE_FILES)
    return vectors
