"""Embedders: one interface (:class:`Embedder`), several models, created by name with :func:`create_embedder`."""

from __future__ import annotations

import os

from vrag_desktop.core.embedders.base import (
    Embedder,
    EmbedderError,
    EmbedderInfo,
    EmbedInput,
)

DEFAULT_EMBEDDER = "minilm"
_MINILM_ALIASES = {
    "minilm",
    "minilm-l6-v2",
    "all-minilm-l6-v2",
    "sentence-transformers/all-minilm-l6-v2",
}

#: The embedders the app offers by name (spec, what it is for a person); any Qwen3-VL-Embedding or
#: GVE hub id or local model folder works too (:func:`create_embedder`).
KNOWN_EMBEDDERS = (
    ("minilm", "Built in: small, fast, text only (works offline)"),
    ("Qwen/Qwen3-VL-Embedding-2B", "Multimodal: pages as images; needs a GPU to be quick"),
    ("Alibaba-NLP/GVE-3B", "Multimodal, video-aware; needs a GPU"),
)

__all__ = [
    "DEFAULT_EMBEDDER",
    "KNOWN_EMBEDDERS",
    "EmbedInput",
    "Embedder",
    "EmbedderError",
    "EmbedderInfo",
    "create_embedder",
    "loads_quickly",
    "same_embedder",
]


def loads_quickly(spec: str | None) -> bool:
    """Whether ``spec`` names the small text model (MiniLM: ~90 MB on the CPU, loaded in well under a
    second), which the app loads before anyone asks for it; a vision-language embedder takes
    gigabytes and is loaded only when a job or a search needs it."""
    return (spec or DEFAULT_EMBEDDER).strip().lower() in _MINILM_ALIASES


def same_embedder(a: str | None, b: str | None) -> bool:
    """Whether two specs name the same embedder (MiniLM's aliases are one; others by name)."""
    a, b = (a or DEFAULT_EMBEDDER).strip(), (b or DEFAULT_EMBEDDER).strip()
    return a == b or (loads_quickly(a) and loads_quickly(b))


def create_embedder(
    spec: str | None = None, *, device: str | None = None, data_dir: str | os.PathLike[str] | None = None
) -> Embedder:
    """Build an embedder from a name, hub id or local model directory.

    ``minilm`` (default, offline, text); a Qwen3-VL-Embedding or GVE hub id or local directory
    (multimodal, needs the weights: from ``data_dir``'s models folder, downloaded when online, else
    pass a local path).
    """
    spec = (spec or DEFAULT_EMBEDDER).strip()
    if spec.lower() in _MINILM_ALIASES:
        from vrag_desktop.core.embedders.minilm import MiniLMEmbedder

        return MiniLMEmbedder(device=device)
    from vrag_desktop.core.embedders import qwen_vl
    from vrag_desktop.core.embedders.qwen_vl_inputs import detect_family

    family = detect_family(spec)
    if family == "qwen3-vl-embedding":
        return qwen_vl.Qwen3VLEmbedder(spec, device=device, data_dir=data_dir)
    if family == "gve":
        return qwen_vl.GVEEmbedder(spec, device=device, data_dir=data_dir)
    raise EmbedderError(
        f"unknown embedder {spec!r}: use 'minilm' (offline default), a Qwen3-VL-Embedding or GVE "
        "model id (e.g. Qwen/Qwen3-VL-Embedding-2B, Alibaba-NLP/GVE-3B) or a local model directory"
    )
