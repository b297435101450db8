"""Multimodal embedders on Qwen vision-language backbones: Qwen3-VL-Embedding and GVE.

Both embed text, images and videos into one space with a Qwen-VL model run through ``transformers``:
the input is rendered with the model's chat template, the hidden state of the last real token is
taken and L2-normalised.

* **Qwen3-VL-Embedding** (2B: dim 2048, 8B: dim 4096; Qwen3-VL, patch 16 × merge 2): a ``system``
  turn carries the instruction, a ``user`` turn the content [videos…, images…, texts…].
* **GVE** (3B: dim 2048, 7B: dim 3584; Qwen2.5-VL, patch 14 × merge 2): a single ``user`` turn with
  one content item, no instruction (queries take the same path).

Images are resized here (aspect kept, sides multiples of the vision factor, pixel count within the
embedder's bounds, like ``qwen-vl-utils`` does for the reference code) and handed to the processor
with ``do_resize=False``, so the pixel bounds are this module's, whatever the checkpoint's processor
config says. torch and transformers are imported only when an embedder is built (fast app start).

Videos arrive as keyframes (``EmbedInput.frames``, in time order), thinned evenly to the family's
frame cap and fed to the processor as one video. Where no video processor can be had (transformers
5.x needs torchvision for every Qwen-VL video processor, and CPU installs here have none), the same
frames go in as several images in one user turn instead; ``info.extra["video_mode"]`` says which.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from vrag_desktop.core.embedders.base import (
    IMAGE,
    TEXT,
    VIDEO,
    Embedder,
    EmbedderError,
    EmbedderInfo,
    EmbedInput,
    l2_normalize,
    pick_device,
    pick_dtype,
)
from vrag_desktop.core.embedders.qwen_vl_inputs import (
    _TEMPLATE_RESERVE,
    GVE_FAMILY,
    GVE_LIMITS,
    QWEN3_DEFAULT_INSTRUCTION,
    QWEN3_LIMITS,
    QWEN3_VL_FAMILY,
    VisualLimits,
    _describe,
    _load_rgb,
    _model_name,
    _sample_indices,
    _with_period,
    last_token_pool,
)
from vrag_desktop.core.embedders.qwen_vl_loading import check_weights, load_processor, resolve_model_dir

if TYPE_CHECKING:  # pragma: no cover - typing only
    from typing_extensions import Unpack

log = logging.getLogger(__name__)

# ------------------------------------------------------------------ the embedders


@dataclass
class _Prepared:
    """One input made ready for the processor: its conversation and the pixels it refers to."""

    conversation: list[dict[str, Any]]
    images: list[Any] = field(default_factory=list)
    video: list[Any] | None = None  # frames of the one video, when fed as a video
    video_metadata: dict[str, Any] | None = None


class EmbedderOptions(VisualLimits, total=False):
    """Every keyword both families take: where and how to run, and how to size what is read."""

    device: str | None
    batch_size: int | None
    dtype: str | None
    data_dir: str | os.PathLike[str] | None  # whose models folder a hub id is looked up in first


class _QwenVLEmbedder(Embedder):
    """What Qwen3-VL-Embedding and GVE share: loading, pixel preparation, batching, pooling."""

    family: ClassVar[str]
    model_types: ClassVar[tuple[str, ...]]
    default_batch_size: ClassVar[int] = 8
    default_model: ClassVar[str]
    #: The family's sizing: every key a caller may override (a key absent here is refused).
    default_limits: ClassVar[VisualLimits]

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        device: str | None = None,
        batch_size: int | None = None,
        dtype: str | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        **limits: Unpack[VisualLimits],
    ) -> None:
        import torch
        from transformers import AutoConfig, AutoModel

        unknown = sorted(set(limits) - set(self.default_limits))
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword arguments {unknown}")
        given: dict[str, Any] = {**self.default_limits, **limits}
        min_pixels: int = given["min_pixels"]
        max_pixels: int = given["max_pixels"]
        max_frames: int = given["max_frames"]
        if min_pixels <= 0 or max_pixels < min_pixels:
            raise EmbedderError(f"bad pixel bounds: min_pixels={min_pixels}, max_pixels={max_pixels}")
        if max_frames < 1:
            raise EmbedderError(f"max_frames must be at least 1, got {max_frames}")
        self._torch = torch
        self.spec = str(model or self.default_model)
        self.device = pick_device(device)
        self.batch_size = batch_size or self.default_batch_size
        self.min_pixels = min_pixels
        self.max_pixels = max_pixels
        self.max_length: int = given["max_length"]
        self.fps: float = given["fps"]
        self.max_frames = max_frames
        self.frame_max_pixels: int = given["frame_max_pixels"]
        self.video_total_pixels: int | None = given.get("video_total_pixels")

        model_dir = resolve_model_dir(self.spec, data_dir)
        try:
            config = AutoConfig.from_pretrained(str(model_dir))
        except Exception as exc:
            raise EmbedderError(f"cannot read the model config in {model_dir}: {exc}") from exc
        model_type = getattr(config, "model_type", None)
        if model_type not in self.model_types:
            raise EmbedderError(
                f"{self.spec} is a {model_type!r} model; "
                f"{type(self).__name__} needs one of {self.model_types}"
            )
        try:
            self._dtype = pick_dtype(dtype or None, self.device)
        except ValueError as exc:
            raise EmbedderError(str(exc)) from None
        try:
            self._processor = load_processor(model_dir, model_type)
            # No device_map: it needs `accelerate`, which the app does not install. Weights load
            # on the CPU in the target dtype, then move.
            loaded = AutoModel.from_pretrained(str(model_dir), dtype=self._dtype, output_loading_info=True)
        except EmbedderError:
            raise
        except Exception as exc:
            raise EmbedderError(
                f"cannot load {self.spec} from {model_dir}: {type(exc).__name__}: {exc}"
            ) from exc
        self._model, loading_info = loaded
        check_weights(loading_info, self.spec, self.family)
        self._model = self._model.to(self.device).eval()

        image_processor = self._processor.image_processor
        self.factor = int(image_processor.patch_size) * int(image_processor.merge_size)
        self.temporal_patch_size = int(getattr(image_processor, "temporal_patch_size", 2) or 2)
        text_config = getattr(config, "text_config", config)
        dim = int(text_config.hidden_size)
        self._video_ok: bool | None = None  # decided on the first video (see _video_as_video)
        name = _model_name(self.spec)
        self._info = EmbedderInfo(
            id=f"{self.family}:{name}:{dim}{self._id_suffix()}",
            model=self.spec,
            dim=dim,
            modalities=frozenset({TEXT, IMAGE, VIDEO}),
            render_pixels=max_pixels,
            min_pixels=min_pixels,
            max_pixels=max_pixels,
            extra={
                "family": self.family,
                "dtype": str(self._dtype).replace("torch.", ""),
                "device": self.device,
            },
        )

    # ---- hooks for the families
    def _id_suffix(self) -> str:
        """Anything besides model and dim that changes the stored vectors (e.g. an instruction)."""
        return ""

    def _query_conversation(self, query: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _item_conversation(self, item: EmbedInput, n_images: int, has_video: bool) -> list[dict[str, Any]]:
        raise NotImplementedError

    # ---- Embedder API
    @property
    def info(self) -> EmbedderInfo:
        return self._info

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        parts = [np.zeros((0, self.dim), dtype=np.float32)]
        for start in range(0, len(queries), self.batch_size):
            chunk = queries[start : start + self.batch_size]
            prepared = [_Prepared(self._query_conversation(self._clip_text(q))) for q in chunk]
            parts.append(self._embed_prepared(prepared, [f"query {q[:40]!r}" for q in chunk]))
        return np.concatenate(parts)

    def embed_items(self, items: Sequence[EmbedInput]) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for start in range(0, len(items), self.batch_size):
            chunk = items[start : start + self.batch_size]
            prepared = [self._prepare_item(item) for item in chunk]
            vecs = self._embed_prepared(prepared, [_describe(item) for item in chunk])
            out.extend(vecs[i : i + 1] for i in range(len(chunk)))
        return out

    def close(self) -> None:
        self._model = None
        if self.device.startswith("cuda"):
            self._torch.cuda.empty_cache()

    # ---- preparation
    def _clip_text(self, text: str) -> str:
        """Cut a text to the token budget, so the template's end (pooled) is never truncated."""
        budget = self.max_length - _TEMPLATE_RESERVE
        if len(text) <= budget:  # a token is at least one character: no tokenizing needed
            return text
        tok = self._processor.tokenizer
        ids = tok(text, add_special_tokens=False)["input_ids"]
        return text if len(ids) <= budget else tok.decode(ids[:budget])

    def _prepare_item(self, item: EmbedInput) -> _Prepared:
        """Load the item's pixels and build its conversation; EmbedderError names a bad item."""
        if item.kind == IMAGE:
            if item.image_path is None:
                raise EmbedderError(f"image item without image_path: {_describe(item)}")
            image = _load_rgb(Path(item.image_path), self.factor, self.min_pixels, self.max_pixels)
            return _Prepared(self._item_conversation(item, 1, False), images=[image])
        if item.kind == VIDEO:
            return self._prepare_video(item)
        if item.kind == TEXT:
            clipped = EmbedInput(kind=TEXT, text=self._clip_text(item.text or ""))
            return _Prepared(self._item_conversation(clipped, 0, False))
        raise EmbedderError(f"unknown item kind {item.kind!r}")

    def _prepare_video(self, item: EmbedInput) -> _Prepared:
        """Keyframes → one video (or several images when video processing is unavailable).

        Frames beyond ``max_frames`` are thinned evenly over the clip. All frames get one size (from
        the first frame) and the per-frame pixel cap
        ``min(frame_max_pixels, video_total_pixels / n)``.
        """
        frames = list(item.frames or [])
        if not frames:
            raise EmbedderError(f"video item without frames: {_describe(item)}")
        keep = _sample_indices(len(frames), self.max_frames)
        paths = [Path(frames[i]) for i in keep]
        times = (
            [float(item.timestamps[i]) for i in keep]
            if item.timestamps and len(item.timestamps) == len(frames)
            else None
        )
        frame_max = self.frame_max_pixels
        if self.video_total_pixels:
            frame_max = min(frame_max, max(self.min_pixels, self.video_total_pixels // len(paths)))
        first = _load_rgb(paths[0], self.factor, self.min_pixels, frame_max)
        images = [first]
        for p in paths[1:]:
            im = _load_rgb(p, self.factor, self.min_pixels, frame_max)
            images.append(im if im.size == first.size else im.resize(first.size))
        if self._video_as_video():
            # Video processors group frames by temporal_patch_size: pad with the last frame.
            while len(images) % self.temporal_patch_size:
                images.append(images[-1])
                if times:
                    times.append(times[-1])
            meta = self._video_metadata(len(images), times)
            return _Prepared(self._item_conversation(item, 0, True), video=images, video_metadata=meta)
        return _Prepared(self._item_conversation(item, len(images), False), images=images)

    def _video_metadata(self, n: int, times: list[float] | None) -> dict[str, Any]:
        """Metadata for pre-sampled frames: frame i at ``times[i]`` seconds (or i / fps)."""
        indices = [round(t * self.fps) for t in times] if times else list(range(n))
        indices = [max(0, i) for i in indices]
        return {
            "total_num_frames": max(indices) + 1 if indices else n,
            "fps": self.fps,
            "frames_indices": indices,
            "duration": (max(indices) + 1) / self.fps if indices else n / self.fps,
        }

    def _video_as_video(self) -> bool:
        """Whether keyframes can go to the model as a video here (decided once, on first use).

        Needs a video processor, i.e. torchvision. Without one the frames are embedded as several
        images in one user turn: the same visual content, without the temporal merging of a video.
        A trial run on two tiny frames catches processors that exist but cannot take frame lists.
        """
        if self._video_ok is None:
            ok = getattr(self._processor, "video_processor", None) is not None
            if ok:
                from PIL import Image

                frame = Image.new("RGB", (self.factor * 2, self.factor * 2))
                probe = EmbedInput(kind=VIDEO, frames=[Path("probe")])
                try:
                    self._process(
                        [self._render(self._item_conversation(probe, 0, True))],
                        videos=[[frame] * self.temporal_patch_size],
                        video_metadata=[self._video_metadata(self.temporal_patch_size, None)],
                    )
                except Exception as exc:
                    log.warning("video input unavailable (%s); embedding keyframes as images", exc)
                    ok = False
            self._video_ok = ok
            self._info.extra["video_mode"] = "video" if ok else "frames-as-images"
        return self._video_ok

    # ---- model
    def _render(self, conversation: list[dict[str, Any]]) -> str:
        return str(
            self._processor.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
        )

    def _process(
        self,
        texts: list[str],
        *,
        images: list[Any] | None = None,
        videos: list[list[Any]] | None = None,
        video_metadata: list[dict[str, Any] | None] | None = None,
    ) -> Any:
        """Rendered texts + pre-sized pixels → model inputs (tensors), right-padded."""
        kwargs: dict[str, Any] = {"padding": True, "return_tensors": "pt", "do_resize": False}
        if videos:
            kwargs.update(videos=videos, video_metadata=video_metadata, do_sample_frames=False)
        return self._processor(text=texts, images=images or None, **kwargs)

    def _embed_prepared(self, prepared: list[_Prepared], names: list[str]) -> np.ndarray:
        """One forward pass over prepared inputs → (n, dim) float32, rows L2-normalised."""
        if not prepared:
            return np.zeros((0, self.dim), dtype=np.float32)
        torch = self._torch
        images = [im for p in prepared for im in p.images]
        videos = [p.video for p in prepared if p.video is not None]
        metadata = [p.video_metadata for p in prepared if p.video is not None]
        where = names[0] if len(names) == 1 else f"a batch of {len(names)} ({names[0]}, …)"
        try:
            texts = [self._render(p.conversation) for p in prepared]
            batch = self._process(
                texts, images=images, videos=videos or None, video_metadata=metadata or None
            )
        except Exception as exc:
            raise EmbedderError(f"cannot prepare {where} for the model: {type(exc).__name__}: {exc}") from exc
        batch.pop("video_metadata", None)
        inputs = {k: v.to(self.device) if hasattr(v, "to") else v for k, v in batch.items()}
        for key in ("pixel_values", "pixel_values_videos"):
            if key in inputs:
                inputs[key] = inputs[key].to(self._dtype)
        try:
            with torch.inference_mode():
                hidden = self._model(**inputs, use_cache=False).last_hidden_state
                pooled = last_token_pool(hidden, inputs["attention_mask"])
        except Exception as exc:
            raise EmbedderError(f"the model failed on {where}: {type(exc).__name__}: {exc}") from exc
        return l2_normalize(pooled.float().cpu().numpy())


class Qwen3VLEmbedder(_QwenVLEmbedder):
    """Qwen3-VL-Embedding (2B/8B): instruction in a system turn, last-token pooling.

    ``instruction`` is used for corpus items, ``query_instruction`` (default: the same) for queries;
    both get a final period when they lack punctuation, as in the reference. An item's text is added
    next to its image/video only with ``include_item_text=True`` (default: visual content alone, so
    page images embed as in the reference's document side).
    """

    family = QWEN3_VL_FAMILY
    model_types = ("qwen3_vl",)
    default_model = "Qwen/Qwen3-VL-Embedding-2B"
    default_limits = QWEN3_LIMITS

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        instruction: str = QWEN3_DEFAULT_INSTRUCTION,
        query_instruction: str | None = None,
        include_item_text: bool = False,
        **options: Unpack[EmbedderOptions],
    ) -> None:
        self.instruction = _with_period(instruction) or QWEN3_DEFAULT_INSTRUCTION
        self.query_instruction = _with_period(query_instruction) if query_instruction else self.instruction
        self.include_item_text = include_item_text
        super().__init__(model, **options)

    def _id_suffix(self) -> str:
        suffix = ""
        if self.instruction != QWEN3_DEFAULT_INSTRUCTION:
            suffix += ":instr-" + hashlib.sha1(self.instruction.encode()).hexdigest()[:8]
        if self.include_item_text:
            suffix += ":with-text"
        return suffix

    @staticmethod
    def _conversation(instruction: str, content: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {"role": "system", "content": [{"type": "text", "text": instruction}]},
            {"role": "user", "content": content or [{"type": "text", "text": "NULL"}]},
        ]

    def _query_conversation(self, query: str) -> list[dict[str, Any]]:
        content = [{"type": "text", "text": query}] if query.strip() else []
        return self._conversation(self.query_instruction, content)

    def _item_conversation(self, item: EmbedInput, n_images: int, has_video: bool) -> list[dict[str, Any]]:
        # Reference order: videos, then images, then texts.
        content: list[dict[str, Any]] = []
        if has_video:
            content.append({"type": "video"})
        content.extend({"type": "image"} for _ in range(n_images))
        text = (item.text or "").strip()
        if text and (item.kind == TEXT or self.include_item_text):
            content.append({"type": "text", "text": self._clip_text(text)})
        return self._conversation(self.instruction, content)


class GVEEmbedder(_QwenVLEmbedder):
    """GVE (3B/7B, Qwen2.5-VL): one user turn, one content item, no instruction, last-token pooling.

    Queries take the same path as text items. A video's keyframes go in as one video (at most 8
    frames) — or, without a video processor (no torchvision), as several images in that one turn.
    """

    family = GVE_FAMILY
    model_types = ("qwen2_5_vl",)
    default_model = "Alibaba-NLP/GVE-3B"
    default_limits = GVE_LIMITS  # no video_total_pixels: GVE caps each frame, not the video

    def _video_metadata(self, n: int, times: list[float] | None) -> dict[str, Any]:
        # GVE saw frames sampled at a steady 1 fps: keep that spacing (2 s per temporal grid step).
        return super()._video_metadata(n, None)

    def _query_conversation(self, query: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": [{"type": "text", "text": query}]}]

    def _item_conversation(self, item: EmbedInput, n_images: int, has_video: bool) -> list[dict[str, Any]]:
        if has_video:
            content: list[dict[str, Any]] = [{"type": "video"}]
        elif n_images:
            content = [{"type": "image"} for _ in range(n_images)]
        else:
            content = [{"type": "text", "text": item.text or ""}]
        return [{"role": "user", "content": content}]
