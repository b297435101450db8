"""Tiny random Qwen-VL checkpoints built offline, so the real VL embedder loaders can be tested.

Each builder writes a directory shaped like a hub checkpoint (``config.json`` + safetensors,
tokenizer files, ``preprocessor_config.json``, ``chat_template.jinja``) and returns it. The weights
are random (fixed seed), so vectors mean nothing; the tests check plumbing, pooling and padding.

No processor is saved with ``processor.save_pretrained``: without torchvision the Qwen video
processors cannot be built, so the processor (and its save) is unavailable here. The production
loader's fallback (image processor + tokenizer + chat template) is what reads these directories.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# A small Qwen-style template: one turn per message, vision placeholders for image and video parts.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' or 'image' in part -%}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif part['type'] == 'video' or 'video' in part -%}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{%- elif part['type'] == 'text' -%}{{- part['text'] -}}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

_CORPUS = [
    "Represent the user's input.",
    "The quick brown fox jumps over the lazy dog.",
    "A page of a scanned report with a table of quarterly revenue figures.",
    "What does the chart on page three show about energy use in 2023?",
    "Video frames of a cat sitting on a red sofa, then jumping to the floor.",
    "NULL system user assistant question answer document image video text",
]


def make_tokenizer(corpus: Sequence[str] = (), vocab_size: int = 400) -> Any:
    """A byte-level BPE Qwen2 tokenizer trained on a few sentences (and ``corpus``, whose words then
    become whole tokens), with Qwen's special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([*_CORPUS, *corpus], trainer=trainer)
    return Qwen2TokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )


def _token_ids(tok: Any) -> dict[str, int]:
    return {
        "image_token_id": tok.convert_tokens_to_ids("<|image_pad|>"),
        "video_token_id": tok.convert_tokens_to_ids("<|video_pad|>"),
        "vision_start_token_id": tok.convert_tokens_to_ids("<|vision_start|>"),
        "vision_end_token_id": tok.convert_tokens_to_ids("<|vision_end|>"),
    }


def _save(model: Any, tok: Any, image_processor: Any, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    image_processor.save_pretrained(out)
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    return out


def build_tiny_qwen25_vl(out: Path, seed: int = 0, with_lm_head: bool = False) -> Path:
    """A GVE-shaped checkpoint: Qwen2.5-VL (patch 14, merge 2), hidden size 64.

    ``with_lm_head`` saves the ``ForConditionalGeneration`` layout (as most hub checkpoints are).
    """
    import torch
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLModel,
        Qwen2VLImageProcessorPil,
    )

    torch.manual_seed(seed)
    tok = make_tokenizer()
    config = Qwen2_5_VLConfig(
        text_config=dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
            vocab_size=len(tok),
            bos_token_id=None,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        ),
        vision_config=dict(
            depth=2,
            hidden_size=32,
            out_hidden_size=64,
            intermediate_size=64,
            num_heads=2,
            window_size=56,
            fullatt_block_indexes=[1],
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
        ),
        **_token_ids(tok),
    )
    model_cls = Qwen2_5_VLForConditionalGeneration if with_lm_head else Qwen2_5_VLModel
    model = model_cls(config).eval()
    ip = Qwen2VLImageProcessorPil(
        min_pixels=4 * 28 * 28, max_pixels=16 * 28 * 28, patch_size=14, merge_size=2
    )
    return _save(model, tok, ip, Path(out))


def build_tiny_qwen2_vl(
    out: Path,
    seed: int = 0,
    with_lm_head: bool = False,
    extra_tokens: tuple[str, ...] = (),
    *,
    hidden: int = 64,
    layers: int = 2,
    vision_depth: int = 2,
    max_image_tokens: int = 16,
    vocabulary: Sequence[str] = (),
    vocab_size: int = 400,
) -> Path:
    """A Qwen2-VL checkpoint (patch 14, merge 2), hidden size 64: not an embedder family.

    ``with_lm_head`` saves a chat model (``Qwen2VLForConditionalGeneration``), as the trainer tests
    need; ``extra_tokens`` become single tokens (a toy task's tags, so a tiny policy can learn them).
    ``hidden``/``layers``/``vision_depth``/``max_image_tokens`` grow it (the GPU bench's ~150 M model).
    ``vocabulary``: texts the tokenizer also learns from, up to ``vocab_size`` tokens (whole words
    make a task's sequences shorter and its questions easier to copy).
    """
    import torch
    from transformers import (
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessorPil,
        Qwen2VLModel,
    )

    torch.manual_seed(seed)
    tok = make_tokenizer(vocabulary, vocab_size)
    if extra_tokens:
        tok.add_tokens(list(extra_tokens))
    heads = max(4, hidden // 64)
    half = hidden // heads // 2  # M-RoPE splits half the head dimension into t, h, w sections
    section = [half - 2 * (3 * half // 8), 3 * half // 8, 3 * half // 8]
    config = Qwen2VLConfig(
        text_config=dict(
            hidden_size=hidden,
            intermediate_size=hidden * 2 if hidden == 64 else hidden * 3,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=max(1, heads // 2) if hidden == 64 else max(1, heads // 4),
            rope_scaling={"type": "mrope", "mrope_section": section},
            vocab_size=len(tok),
            bos_token_id=None,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        ),
        vision_config=dict(
            depth=vision_depth,
            embed_dim=32 if hidden == 64 else 256,
            hidden_size=hidden,
            num_heads=2 if hidden == 64 else 4,
            mlp_ratio=2,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
        ),
        **_token_ids(tok),
    )
    model = (Qwen2VLForConditionalGeneration if with_lm_head else Qwen2VLModel)(config).eval()
    ip = Qwen2VLImageProcessorPil(
        min_pixels=4 * 28 * 28, max_pixels=max_image_tokens * 28 * 28, patch_size=14, merge_size=2
    )
    return _save(model, tok, ip, Path(out))


def build_tiny_qwen3_vl(out: Path, seed: int = 0, with_lm_head: bool = False) -> Path:
    """A Qwen3-VL-Embedding-shaped checkpoint: Qwen3-VL (patch 16, merge 2), hidden size 64.

    ``with_lm_head`` saves the ``ForConditionalGeneration`` layout instead of the base model's.
    """
    import torch
    from transformers import (
        Qwen2VLImageProcessorPil,
        Qwen3VLConfig,
        Qwen3VLForConditionalGeneration,
        Qwen3VLModel,
    )

    torch.manual_seed(seed)
    tok = make_tokenizer()
    config = Qwen3VLConfig(
        text_config=dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [2, 3, 3],
                "mrope_interleaved": True,
            },
            vocab_size=len(tok),
            bos_token_id=None,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        ),
        vision_config=dict(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            out_hidden_size=64,
            num_position_embeddings=64,
            deepstack_visual_indexes=[0],
            patch_size=16,
            spatial_merge_size=2,
            temporal_patch_size=2,
        ),
        **_token_ids(tok),
    )
    model_cls = Qwen3VLForConditionalGeneration if with_lm_head else Qwen3VLModel
    model = model_cls(config).eval()
    ip = Qwen2VLImageProcessorPil(
        min_pixels=4 * 32 * 32,
        max_pixels=16 * 32 * 32,
        patch_size=16,
        merge_size=2,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    return _save(model, tok, ip, Path(out))


class FrameListVideoProcessor:
    """A stand-in for a Qwen-VL video processor that takes pre-sampled, pre-sized frame lists.

    The real video processors need torchvision, which this environment lacks; this one does the
    same normalisation and patch layout as Qwen2-VL's processors (numpy only), so the embedders'
    video path (processor kwargs, metadata, video tokens, M-RoPE) can be exercised offline.
    """

    def __init__(self, image_processor: Any) -> None:
        self.patch_size = int(image_processor.patch_size)
        self.merge_size = int(image_processor.merge_size)
        self.temporal_patch_size = int(image_processor.temporal_patch_size)
        self.image_mean = list(image_processor.image_mean)
        self.image_std = list(image_processor.image_std)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, videos: Any, **kwargs: Any) -> Any:
        import numpy as np
        import torch
        from transformers import BatchFeature
        from transformers.video_utils import VideoMetadata

        self.calls.append(kwargs)
        if kwargs.get("do_resize", True) or kwargs.get("do_sample_frames", False):
            raise ValueError("this stand-in only takes pre-sized, pre-sampled frames")
        p, m, tp = self.patch_size, self.merge_size, self.temporal_patch_size
        mean = np.array(self.image_mean, dtype=np.float32)
        std = np.array(self.image_std, dtype=np.float32)
        pixels, grids, metas = [], [], []
        for i, frames in enumerate(videos):
            arr = np.stack([np.asarray(f.convert("RGB"), dtype=np.float32) / 255.0 for f in frames])
            arr = ((arr - mean) / std).transpose(0, 3, 1, 2)  # T, C, H, W
            if len(arr) % tp:
                arr = np.concatenate([arr, np.repeat(arr[-1:], tp - len(arr) % tp, axis=0)])
            t, c, h, w = arr.shape
            gt, gh, gw = t // tp, h // p, w // p
            patches = arr.reshape(gt, tp, c, gh // m, m, p, gw // m, m, p)
            patches = patches.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
            pixels.append(patches.reshape(gt * gh * gw, c * tp * p * p))
            grids.append([gt, gh, gw])
            meta = (kwargs.get("video_metadata") or [None] * len(videos))[i]
            metas.append(VideoMetadata(**meta) if isinstance(meta, dict) else meta)
        data = {
            "pixel_values_videos": torch.from_numpy(np.concatenate(pixels)),
            "video_grid_thw": torch.tensor(grids),
            "video_metadata": metas,
        }
        return BatchFeature(data, skip_tensor_conversion=["video_metadata"])
