"""The one interface every embedder implements, so the index never cares which model it runs.

An index records :attr:`EmbedderInfo.id` of the embedder that built it; searching it with an embedder
of another id is refused (vectors of different models are not comparable).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

TEXT = "text"
IMAGE = "image"
VIDEO = "video"


class EmbedderError(RuntimeError):
    """An embedder could not be created or could not embed (message says why, for the user)."""


@dataclass(frozen=True)
class EmbedderInfo:
    """What identifies an embedder's vector space, and what it can embed.

    ``id`` is recorded in every index; two embedders with the same ``id`` must produce comparable
    vectors. ``render_pixels`` is the pixel budget page images are rendered at for this embedder
    (its own maximum input size, so no time is spent rendering pixels it would throw away).
    """

    id: str
    model: str
    dim: int
    modalities: frozenset[str]
    render_pixels: int
    min_pixels: int | None = None
    max_pixels: int | None = None
    extra: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_multimodal(self) -> bool:
        return IMAGE in self.modalities


@dataclass
class EmbedInput:
    """One corpus item to embed.

    ``kind`` is ``text``, ``image`` or ``video``. Text embedders use ``text`` (the PDF text layer or
    OCR); multimodal embedders use ``image_path`` (a page render or an image) or ``frames`` (a video
    clip's keyframes, in time order, with ``timestamps`` in seconds) and may also use ``text``.
    """

    kind: str
    text: str | None = None
    image_path: Path | None = None
    frames: list[Path] | None = None
    timestamps: list[float] | None = None
    #: A header naming the item's document (:mod:`vrag_desktop.core.corpus.context`); a text embedder
    #: that splits ``text`` into windows puts it at the head of every window.
    context: str | None = None


class Embedder(abc.ABC):
    """Embeds queries and corpus items into one L2-normalised vector space (inner product = cosine)."""

    #: items per forward pass; the index builder batches by this
    batch_size: int = 16
    #: "cpu", "cuda", "cuda:1", …
    device: str = "cpu"

    @property
    @abc.abstractmethod
    def info(self) -> EmbedderInfo: ...

    @property
    def dim(self) -> int:
        return self.info.dim

    @abc.abstractmethod
    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        """Return a float32 array of shape ``(len(queries), dim)``, rows L2-normalised."""

    @abc.abstractmethod
    def embed_items(self, items: Sequence[EmbedInput]) -> list[np.ndarray]:
        """Return one float32 array of shape ``(k, dim)``, k >= 1, per item (k > 1: text chunks).

        Rows are L2-normalised. An item that cannot be embedded raises :class:`EmbedderError`
        naming it; callers retry the batch item by item to isolate the bad one.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release model memory (GPU memory in particular)."""


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation in float32; zero rows stay zero instead of becoming NaN."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def pick_device(requested: str | None = None) -> str:
    """``requested`` if given, else CUDA when torch sees a GPU, else CPU."""
    if requested:
        return requested
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:  # torch missing or broken: CPU paths still work
        return "cpu"


_DTYPE_NAMES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float32": "float32",
    "float": "float32",
}


def pick_dtype(requested: Any, device: str) -> torch.dtype:
    """``requested`` (a name such as ``bf16`` or ``float32``, ``auto``, or a torch dtype) if given,
    else bf16 on CUDA (fp16 where the GPU has no bf16) and fp32 on CPU. ValueError names a bad value.

    Why one place: the embedders and the local chat model load the same checkpoints and must agree
    on what a dtype name means.
    """
    import torch

    dtype = requested
    if isinstance(dtype, str):
        key = dtype.lower().removeprefix("torch.")
        if key != "auto" and key not in _DTYPE_NAMES:
            raise ValueError(f"unknown dtype {requested!r} (bfloat16, float16, float32)")
        dtype = getattr(torch, _DTYPE_NAMES[key]) if key in _DTYPE_NAMES else None
    if dtype is None:
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype must be a string or a torch dtype, got {type(dtype).__name__}")
    return dtype
