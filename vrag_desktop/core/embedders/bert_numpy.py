"""A BERT encoder's forward pass in NumPy, for inputs too small to be worth importing torch.

Why it exists: ``import torch`` plus transformers' model classes take 3–8 s on a workstation's CPU;
a search's query through all-MiniLM-L6-v2 (6 layers, 384 wide) takes milliseconds. The pass mirrors
transformers' ``BertModel`` in eval mode (absolute positions, post-layer-norm, exact erf GELU) and
returns the last hidden state's masked mean (an embedder: token type 0) or, for a cross-encoder
(``BertForSequenceClassification``: a query and a passage told apart by token types), the pooler's
and the classifier's logits; ``tests/test_minilm_paths.py`` and ``tests/test_rerank.py`` hold it to
transformers' output. Bulk work stays on torch (:mod:`~vrag_desktop.core.embedders.minilm`):
NumPy has no fused kernels and is several times slower there.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

_BLAS_LOCK = threading.Lock()


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to 1.5e-7 (Abramowitz & Stegun 7.1.26): below float32's resolution of GELU's output.
    In place on two temporaries (the same operations in the same order: the same bits), since this
    is a cross-encoder pass's largest cost after the matrix products (bench/rerank_latency.py)."""
    a = np.abs(x)
    t = a * np.float32(0.3275911)
    t += 1
    np.reciprocal(t, out=t)
    p = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        p += np.float32(c)
        p *= t
    np.multiply(a, a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    a *= p
    np.subtract(np.float32(1), a, out=a)
    return np.copysign(a, x, out=a)


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdims=True)
    return centred / np.sqrt(var + eps) * gamma + beta


@dataclass(frozen=True)
class BertWeights:
    """A BERT encoder's tensors by their transformers names, and the shape facts the pass needs."""

    tensors: Mapping[str, np.ndarray]
    layers: int
    heads: int
    eps: float

    @classmethod
    def load(cls, path: Path, config: Mapping[str, Any]) -> BertWeights:
        from safetensors.numpy import load_file

        tensors = {k.removeprefix("bert."): v for k, v in load_file(str(path)).items()}
        if config.get("hidden_act", "gelu") != "gelu" or config.get(
            "position_embedding_type", "absolute"
        ) != ("absolute"):
            raise ValueError("only BERT with GELU and absolute positions is supported")
        return cls(
            tensors,
            int(config["num_hidden_layers"]),
            int(config["num_attention_heads"]),
            float(config.get("layer_norm_eps", 1e-12)),
        )

    def sharing(self, tensors: Mapping[str, np.ndarray]) -> BertWeights:
        """The same encoder reading ``tensors`` (e.g. torch's, as NumPy views) instead of its own."""
        return BertWeights(dict(tensors), self.layers, self.heads, self.eps)

    def mean_pooled(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The masked mean of the last hidden state, ``(rows, hidden)`` float32.

        On one BLAS thread: these matrices are small, and OpenBLAS's worker threads spin-wait for
        work, so on a busy CPU (indexing, a trainer, a vLLM server beside it) its default pool made
        a query's pass 7× slower than one thread (bench/minilm_paths.py). The lock keeps concurrent
        passes from restoring each other's limits out of order."""
        with _blas_threads(1):
            x = self._encode(ids, mask, None)
        m = mask[..., None].astype(np.float32)
        return np.asarray((x * m).sum(1) / np.maximum(m.sum(1), 1e-9), dtype=np.float32)

    def logits(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray, threads: int = 1) -> np.ndarray:
        """A sequence classifier's logits, ``(rows, labels)`` float32: the pooler (tanh of a dense
        layer over [CLS]'s last hidden state) and the classifier, as
        ``BertForSequenceClassification`` computes them. ``types``: each token's segment (0: the
        query and its [CLS]/[SEP], 1: the passage). ``threads``: BLAS threads (bench/rerank_latency.py)."""
        w = self.tensors
        with _blas_threads(threads):
            cls = self._encode(ids, mask, types)[:, 0]
            pooled = np.tanh(cls @ w["pooler.dense.weight"].T + w["pooler.dense.bias"])
            out = pooled @ w["classifier.weight"].T + w["classifier.bias"]
        return np.asarray(out, dtype=np.float32)

    def _encode(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray | None) -> np.ndarray:
        """The last hidden state, ``(rows, width, hidden)``."""
        w = self.tensors
        rows, width = ids.shape
        segment = w["embeddings.token_type_embeddings.weight"]
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:width][None]
            + (segment[0] if types is None else segment[types])
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        hidden = x.shape[-1]
        head = hidden // self.heads
        blocked = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min).astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(head))
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def linear(name: str, h: np.ndarray, p: str = p) -> np.ndarray:
                return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            def heads(h: np.ndarray) -> np.ndarray:
                return np.ascontiguousarray(h.reshape(rows, width, self.heads, head).transpose(0, 2, 1, 3))

            q = heads(linear("attention.self.query", x)) * scale
            k = heads(linear("attention.self.key", x))
            v = heads(linear("attention.self.value", x))
            scores = q @ np.ascontiguousarray(k.transpose(0, 1, 3, 2)) + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(rows, width, hidden)
            x = _layer_norm(
                linear("attention.output.dense", context) + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                self.eps,
            )
            h = linear("intermediate.dense", x)
            g = _erf(h * np.float32(1.0 / np.sqrt(2.0)))
            g += 1
            g *= h
            h = g * np.float32(0.5)
            x = _layer_norm(
                linear("output.dense", h) + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
                self.eps,
            )
        return x


@contextmanager
def _blas_threads(n: int) -> Iterator[None]:
    """BLAS limited to ``n`` threads while a pass runs (see :meth:`BertWeights.mean_pooled`)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # a declared dependency; without it only the speed on a busy CPU suffers
        yield
        return
    with _BLAS_LOCK, threadpool_limits(limits=n, user_api="blas"):
        yield
