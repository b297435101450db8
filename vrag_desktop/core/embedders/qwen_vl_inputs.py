"""What the Qwen-VL embedders read and how they size it: the two families (by name or by a local
checkpoint's ``model_type``), their reference sizes, and the pure helpers that resize images,
thin video frames and pool the last token. Kept apart from the embedders so they can be read and
tested without torch or a model."""

from __future__ import annotations

import json
import math
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from vrag_desktop.core.embedders.base import IMAGE, VIDEO, EmbedderError, EmbedInput
from vrag_desktop.core.images import flatten_rgb, orientation, upright

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch
    from PIL import Image

QWEN3_VL_FAMILY = "qwen3-vl-embedding"
GVE_FAMILY = "gve"


class VisualLimits(TypedDict, total=False):
    """How a Qwen-VL embedder sizes what it reads (keyword arguments; each family has defaults)."""

    min_pixels: int
    max_pixels: int
    max_length: int
    fps: float
    max_frames: int
    frame_max_pixels: int
    video_total_pixels: int | None


def reference_limits(
    factor: int, *, max_patches: int, frame_patches: int, max_frames: int, video_frames: int | None = None
) -> VisualLimits:
    """A family's sizing as its reference states it: pixel budgets counted in merged patches of
    ``factor`` pixels a side (at least 4 patches an image), 8,192 tokens, one video frame a second.
    ``video_frames``: all frames of one video share that many frames' pixels (the reference's
    ``MAX_TOTAL_PIXELS``); None: each frame is capped alone, and the key is absent (so refused)."""
    patch = factor * factor
    limits = VisualLimits(
        min_pixels=4 * patch,
        max_pixels=max_patches * patch,
        max_length=8192,
        fps=1.0,
        max_frames=max_frames,
        frame_max_pixels=frame_patches * patch,
    )
    if video_frames is not None:
        limits["video_total_pixels"] = video_frames * frame_patches * patch
    return limits


# Qwen3-VL-Embedding: patch 16 × spatial merge 2; images 4,096 to 1,843,200 pixels; video frames at
# most 786,432 pixels each and 7,864,320 together, so a 64-frame clip stays far below 8,192 tokens
# instead of being truncated mid-video.
QWEN3_LIMITS = reference_limits(32, max_patches=1800, frame_patches=768, max_frames=64, video_frames=10)
QWEN3_DEFAULT_INSTRUCTION = "Represent the user's input."
# GVE: patch 14 × spatial merge 2; images 3,136 to 200,704 pixels; at most 8 video frames of 156,800.
GVE_LIMITS = reference_limits(28, max_patches=256, frame_patches=200, max_frames=8)

MAX_ASPECT_RATIO = 200  # the Qwen vision processors refuse anything longer/thinner
# Tokens kept free for the chat template around a text, so the template's final tokens (where the
# embedding is pooled) survive a long text being clipped.
_TEMPLATE_RESERVE = 64
# What is fetched for a hub id: configs, tokenizer, template and safetensors weights, nothing else.

_MODEL_TYPE_FAMILY = {"qwen3_vl": QWEN3_VL_FAMILY, "qwen2_5_vl": GVE_FAMILY}


# ------------------------------------------------------------------ family detection


def detect_family(spec: str) -> str | None:
    """Which embedder family a model spec (hub id or local directory) belongs to, or None.

    By name first (case-insensitive: ``qwen3-vl-embedding``/``qwen3_vl_embedding``/``qwen3-vl`` →
    Qwen3-VL-Embedding, ``gve`` → GVE); for a local directory with an uninformative name, by its
    ``config.json`` ``model_type`` (``qwen3_vl`` → Qwen3-VL-Embedding, ``qwen2_5_vl`` → GVE).
    """
    name = str(spec).lower()
    if any(s in name for s in ("qwen3-vl-embedding", "qwen3_vl_embedding", "qwen3-vl")):
        return QWEN3_VL_FAMILY
    if "gve" in name:
        return GVE_FAMILY
    config = Path(spec).expanduser() / "config.json"
    try:
        model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None
    return _MODEL_TYPE_FAMILY.get(model_type) if isinstance(model_type, str) else None


# ------------------------------------------------------------------ pure helpers


def last_token_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Hidden state at each row's last position whose attention mask is 1.

    Works for right padding (the usual case here) and left padding alike, unlike ``mask.sum() - 1``
    which is only right for right padding.
    """
    import torch

    mask = attention_mask.to(torch.long)
    last_from_end = mask.flip(dims=[1]).argmax(dim=1)
    col = mask.shape[1] - 1 - last_from_end
    row = torch.arange(hidden.shape[0], device=hidden.device)
    return hidden[row, col.to(hidden.device)]


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Target (height, width): sides multiples of ``factor``, area within bounds, aspect ratio kept.

    The rule of ``qwen-vl-utils`` (what the reference embedders feed their models), so vectors match
    the reference's for the same pixel bounds.
    """
    if min(height, width) <= 0:
        raise ValueError(f"empty image ({width}x{height})")
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise ValueError(f"aspect ratio above {MAX_ASPECT_RATIO} ({width}x{height})")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def _with_period(instruction: str) -> str:
    """The reference ends instructions with punctuation; add a period when there is none."""
    instruction = instruction.strip()
    if instruction and not unicodedata.category(instruction[-1]).startswith("P"):
        instruction += "."
    return instruction


def _sample_indices(n: int, cap: int) -> list[int]:
    """At most ``cap`` indices spread evenly over ``range(n)``, first and last kept, in order."""
    if n <= cap:
        return list(range(n))
    return sorted({round(i * (n - 1) / (cap - 1)) for i in range(cap)}) if cap > 1 else [0]


def _model_name(spec: str) -> str:
    """The model's name for :attr:`EmbedderInfo.id`: hub id or directory basename, lower case.

    A hub id and a local copy in a directory of the same name get the same id; a path inside the
    hub cache (``models--Org--Name/snapshots/<rev>``) is named after the model, not the revision.
    """
    parts = [p for p in spec.replace("\\", "/").split("/") if p]
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3].split("--")[-1].lower()
    return (parts[-1] if parts else spec).lower()


def _describe(item: EmbedInput) -> str:
    """A short name for an item in error messages (callers use it to find the bad file)."""
    if item.kind == IMAGE:
        return f"image {item.image_path}"
    if item.kind == VIDEO:
        frames = item.frames or []
        first = frames[0] if frames else None
        return f"video with {len(frames)} frames (first {first})"
    text = (item.text or "").strip().replace("\n", " ")
    return f"text {text[:40]!r}"


def _load_rgb(path: Path, factor: int, min_pixels: int, max_pixels: int) -> Image.Image:
    """Open an image, honour EXIF rotation, flatten alpha on white, and resize for the model."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            turn = orientation(im)
            target_h, target_w = smart_resize(im.height, im.width, factor, min_pixels, max_pixels)
            im.draft("RGB", (target_w, target_h))  # JPEG: decode at a reduced scale when possible
            rgb = flatten_rgb(upright(im, turn))
            target_h, target_w = smart_resize(rgb.height, rgb.width, factor, min_pixels, max_pixels)
            return rgb.resize((target_w, target_h), Image.Resampling.BICUBIC)
    except Exception as exc:  # PIL raises many types: unreadable, truncated, not an image, too big
        raise EmbedderError(f"cannot read image {path}: {exc}") from exc
