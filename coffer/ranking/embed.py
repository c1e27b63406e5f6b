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
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Generic, Protocol, TypeVar

from coffer.errors import CofferError

M = TypeVar("M")

if TYPE_CHECKING:
    import numpy as np

MODEL_ID = "wordllama-l2_supercat-256"
_TOKENIZER_FILE = ("tokenizers", "l2_supercat_tokenizer_config.json")
_WEIGHTS_FILE = ("weights", "l2_supercat_256.safetensors")
_TENSOR_KEY = "embedding.weight"
_KEEP_CACHE_FILES = 8
_ENCODE_BATCH = 256


class Embedder(Protocol):
    """What the ranker needs of an embedding model (wordllama's here, or the optional MiniLM)."""

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class ModelUnavailable(CofferError):
    """The bundled embedding model cannot be found or loaded; callers fall back to BM25."""


class EmbeddingModel:
    """Static token embeddings + the matching tokenizer: text -> unit vector."""

    def __init__(self, matrix: np.ndarray, tokenizer: Any, model_id: str = MODEL_ID):
        self.matrix = matrix
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.dim = int(matrix.shape[1])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text (a zero row for text with no tokens)."""
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        vocab = self.matrix.shape[0]
        # in batches: the tokenizer's encodings (offsets, token strings) for 10,000 texts at once cost
        # ~200 MB that the allocator keeps after they are freed
        for start in range(0, len(texts), _ENCODE_BATCH):
            batch = self.tokenizer.encode_batch(list(texts[start : start + _ENCODE_BATCH]), add_special_tokens=False)
            for row, enc in enumerate(batch, start):
                ids = [i for i in enc.ids if 0 <= i < vocab]
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
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise ModelUnavailable(f"the semantic ranker needs {exc.name!r}, which is not installed") from exc
    try:
        tokenizer = Tokenizer.from_file(str(tok_path))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        tensors = load_file(str(weights_path))
        # kept as stored (float16: 16 MB, not 32): rows are averaged in float32
        matrix = np.ascontiguousarray(tensors[_TENSOR_KEY])
        if matrix.dtype not in (np.float16, np.float32):
            matrix = matrix.astype(np.float32)
    except Exception as exc:  # corrupt file, wrong format: any of these means "no semantic path"
        raise ModelUnavailable(f"embedding model failed to load: {type(exc).__name__}: {exc}") from exc
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        raise ModelUnavailable(f"embedding model has an unexpected shape {matrix.shape}")
    return EmbeddingModel(matrix, tokenizer)


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


def save_derived(path: Path, write: Callable[[BinaryIO], None], keep: int) -> None:
    """Write a derived cache file atomically (never a half file under its name), then keep the newest
    `keep` files of its kind in its folder: old catalogues' files are never needed again. Errors are
    ignored: the data is recomputed when its file is missing. The vector cache and index snapshots."""
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=path.suffix)
        try:
            with os.fdopen(fd, "wb") as handle:
                write(handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        files = sorted(folder.glob(f"*{path.suffix}"), key=lambda p: p.stat().st_mtime, reverse=True)
        for stale in files[keep:]:
            stale.unlink(missing_ok=True)
    except OSError:
        pass
