"""Peak memory of a training run, estimated from the model's ``config.json`` before the start.

Why: a run that does not fit dies after minutes of loading with a CUDA traceback, and a person
with one 24 GB card needs to know *which* settings make the 7B VRAG model fit (docs/trainer.md,
"Memory"). The formula follows what the trainer does (vrag_trainer: bf16 weights on a GPU, torch
AdamW with moments in the weights' dtype, PEFT adapters in fp32, TRL's reference model only for a
full fine-tune with ``kl_coef > 0``, rows forwarded ``micro_batch_rows`` at a time, rollouts
generated up to 8 at a time). Per device::

    peak = kept + max(training pass, rollouts) + CUDA context
    kept     = weights + optimiser state (+ reference copy)
    training = gradients + LM activations + vision activations + log-prob tiles
    rollouts = KV cache of the concurrent HF-generate rows (vLLM colocate: its reserved share)

Everything is bytes; ``T`` (tokens of a row) is ``max_model_len``, an upper bound.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vrag_desktop.core.runtime.gpu import GPUReport
    from vrag_desktop.core.training.config import TrainConfig

__all__ = ["CPU_TINY_PARAMS", "SKIP_CHECK_ENV", "Estimate", "Shape", "memory_estimate", "model_shape"]

GiB = 1024**3
#: Above this many parameters a CPU run is refused advice-wise (rollouts are token-by-token).
CPU_TINY_PARAMS = 500_000_000
#: Set to 1 to start a run the estimate refuses (the estimate is an upper bound, not a measurement).
SKIP_CHECK_ENV = "VRAG_TRAINER_SKIP_MEMORY_CHECK"
#: Rollouts a training step runs at once (``trl_trainer.py``: ``asyncio.Semaphore(8)``).
CONCURRENT_ROLLOUTS = 8
CUDA_CONTEXT = int(1.5 * GiB)
#: TRL 1.16's chunked log-prob kernel tile (trl/kernels/chunked_logprob.py: TOKEN_CHUNK_SIZE, and
#: the vocabulary chunk add_fused_lm_head passes).
LOGIT_TILE = (4096, 32768)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class Shape:
    """The dimensions the estimate needs, read from a Hugging Face ``config.json``."""

    params: int
    lm_linear: int  # parameters of the decoder's linear layers (what QLoRA quantises)
    hidden: int
    layers: int
    q_dim: int
    kv_dim: int
    inter: int
    vocab: int
    vis_params: int = 0
    vis_hidden: int = 0
    vis_depth: int = 0
    vis_inter: int = 0
    vis_gated: bool = True
    patch: int = 14
    merge: int = 2


def model_shape(cfg: dict[str, Any]) -> Shape:
    """:class:`Shape` of a Llama/Qwen-style (VL) config; ``KeyError`` when it lacks a field."""
    from vrag_desktop.core.runtime.gpu import count_params

    t = {**cfg, **(cfg.get("text_config") or cfg.get("llm_config") or {})}
    h, layers, vocab = int(t["hidden_size"]), int(t["num_hidden_layers"]), int(t["vocab_size"])
    heads = int(t.get("num_attention_heads") or max(1, h // 128))
    kv = int(t.get("num_key_value_heads") or heads)
    hd = int(t.get("head_dim") or h // heads)
    inter = int(t.get("intermediate_size") or 4 * h)
    lm_linear = layers * (2 * h * heads * hd + 2 * h * kv * hd + 3 * h * inter)
    vc = cfg.get("vision_config") or {}
    total = count_params(cfg)
    if not vc:
        return Shape(total, lm_linear, h, layers, heads * hd, kv * hd, inter, vocab)
    if "embed_dim" in vc:  # Qwen2-VL: embed_dim is the tower's width, hidden_size its output
        vh = int(vc["embed_dim"])
        vi = int(vh * float(vc.get("mlp_ratio", 4)))
    else:
        vh = int(vc.get("hidden_size") or 1024)
        vi = int(vc.get("intermediate_size") or 4 * vh)
    text_only = count_params({k: v for k, v in cfg.items() if k != "vision_config"})
    return Shape(
        total,
        lm_linear,
        h,
        layers,
        heads * hd,
        kv * hd,
        inter,
        vocab,
        vis_params=total - text_only,
        vis_hidden=vh,
        vis_depth=int(vc.get("depth") or vc.get("num_hidden_layers") or 0),
        vis_inter=vi,
        vis_gated=str(vc.get("hidden_act", "")).lower() in ("silu", "swiglu"),
        patch=int(vc.get("patch_size", 14)),
        merge=int(vc.get("spatial_merge_size", 1)),
    )


def lora_params(s: Shape, targets: tuple[str, ...], rank: int, vision: bool) -> int:
    """Adapter parameters: ``rank × (in + out)`` for every adapted linear layer."""
    h = s.hidden
    dims = {
        "q_proj": (h, s.q_dim),
        "k_proj": (h, s.kv_dim),
        "v_proj": (h, s.kv_dim),
        "o_proj": (s.q_dim, h),
        "gate_proj": (h, s.inter),
        "up_proj": (h, s.inter),
        "down_proj": (s.inter, h),
    }
    n = s.layers * sum(rank * sum(dims[t]) for t in targets if t in dims)
    if vision and s.vis_depth:
        vh, vi = s.vis_hidden, s.vis_inter
        mlp = 3 * (vh + vi) if s.vis_gated else 2 * (vh + vi)
        n += s.vis_depth * rank * (4 * vh + 2 * vh + mlp)  # qkv, proj, MLP
    return n


@dataclass
class Estimate:
    """Memory a run needs per device: the parts kept all run, those of a training pass and those
    of the rollouts (the peak takes the larger of the two), the assumptions and the warnings."""

    name: str
    params: int | None
    device: str  # "cuda" or "cpu"
    devices: int = 1
    kept: list[tuple[str, int]] = field(default_factory=list)
    training: list[tuple[str, int]] = field(default_factory=list)
    rollout: list[tuple[str, int]] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Set when the run cannot fit the GPU at all (plan.py refuses it, the dialog turns Start off).
    refusal: str | None = None
    advice: list[str] = field(default_factory=list)

    @property
    def parts(self) -> list[tuple[str, int]]:
        return self.kept + self.training + self.rollout

    @property
    def per_device_bytes(self) -> int:
        return sum(b for _, b in self.kept) + max(
            sum(b for _, b in self.training), sum(b for _, b in self.rollout)
        )

    def lines(self) -> list[str]:
        if self.params is None:
            return list(self.warnings)
        where = "per GPU" if self.device == "cuda" else "in RAM"
        out = [
            f"{self.name}: {self.params / 1e9:.2f} B parameters, peak ~{gib(self.per_device_bytes)} GiB {where}"
            " = kept + max(training pass, rollouts)"
        ]
        for title, parts in (
            ("kept", self.kept),
            ("training pass", self.training),
            ("rollouts", self.rollout),
        ):
            if parts:
                out.append(f"  {title}: " + ", ".join(f"{what} {gib(b)}" for what, b in parts) + " GiB")
        return out + self.warnings


def gib(n: float) -> str:
    """GiB for a person: whole above 10, one decimal below."""
    g = n / GiB
    return f"{g:.0f}" if g >= 10 else f"{g:.1f}"


def _default_pixels(agent: str) -> int:
    if agent == "vimrag":
        from vrag_desktop.core.agents.vimrag_prompts import MAX_PIXELS_IMAGE

        return MAX_PIXELS_IMAGE
    from vrag_desktop.core.agents.vrag_protocol import MAX_PIXELS

    return MAX_PIXELS


def _compute(
    est: Estimate, s: Shape, cfg: TrainConfig, b: int, device: str, max_pixels: int, processes: int
) -> None:
    lo = cfg.lora
    rows, t = cfg.micro_batch_rows, cfg.max_model_len
    gc = cfg.gradient_checkpointing
    if lo.enabled:
        a = lora_params(s, tuple(lo.target_modules), lo.rank, lo.vision)
        base = int(s.lm_linear * 0.5 * 1.1) + (s.params - s.lm_linear) * b if lo.qlora else s.params * b
        est.kept += [
            ("weights" + (" (4-bit)" if lo.qlora else ""), base),
            (f"LoRA adapters ({a / 1e6:.0f} M, fp32)", a * 4),
            ("AdamW moments (adapters)", 2 * a * 4),
        ]
        est.training.append(("gradients", a * 4))
    else:
        est.kept += [("weights", s.params * b), ("AdamW moments (2)", 2 * s.params * b)]
        if cfg.kl_coef > 0:
            est.kept.append(("reference model (KL)", s.params * b))
        est.training.append(("gradients", s.params * b))
    # LM activations of one micro-batch; per layer and token ≈ 6h + q + 2kv + 4·inter values kept for
    # the backward (norms, residuals, q/k/v, attention output, gate/up/act/product)
    per_layer = 6 * s.hidden + s.q_dim + 2 * s.kv_dim + 4 * s.inter
    tokens = rows * t
    # checkpointing: each layer's input kept, one layer's activations recomputed at a time
    lm_act = tokens * ((s.layers * s.hidden + per_layer) if gc else s.layers * per_layer) * b
    est.training.append(("activations" + (" (checkpointed)" if gc else ""), lm_act))
    if s.vis_depth:
        per_image = max(1, max_pixels // (s.patch * s.merge) ** 2)  # merged tokens an image adds
        images = min(cfg.max_images, max(1, t // per_image))
        patches = rows * images * per_image * s.merge**2
        vis_layer = 6 * s.vis_hidden + (4 if s.vis_gated else 2) * s.vis_inter
        trains_vision = (not lo.enabled) or lo.vision
        if not trains_vision:  # frozen tower: one block's activations at a time, nothing kept
            vis = patches * vis_layer * b
        elif gc:
            vis = patches * (s.vis_depth * s.vis_hidden + vis_layer) * b
        else:
            vis = patches * s.vis_depth * vis_layer * b
        est.training.append((f"vision ({images} images × {per_image} tokens)", vis))
    # log-probs: TRL 1.16's fused LM head scores [4096 tokens × 32768 vocab] fp32 tiles and turns each
    # into its gradient in place, so the [tokens × vocab] logits (tokens·vocab·4 bytes, 35 GiB for
    # one 10,240-token row of the 7B model) never exist; two tiles are counted
    tile = min(tokens, LOGIT_TILE[0]) * min(s.vocab, LOGIT_TILE[1]) * 4
    est.training.append(("logits (fused LM head tiles)", 2 * tile))
    if cfg.generator == "hf":
        group_rows = cfg.group_size * math.ceil(cfg.prompts_per_step / max(1, processes))
        concurrent = min(CONCURRENT_ROLLOUTS, group_rows)
        kv = 2 * s.layers * s.kv_dim * b
        est.rollout.append((f"HF generate KV cache ({concurrent} rows)", concurrent * t * kv))
    est.assumptions = [
        f"{'bf16/fp16' if b == 2 else 'fp32'} weights; "
        + (
            "LoRA adapters and their AdamW state in fp32" if lo.enabled else "AdamW moments in the same dtype"
        ),
        f"micro-batch of {rows} rows × {t} tokens (max_model_len)"
        + (", gradient checkpointing" if gc else ""),
        f"images of up to {max_pixels:,} pixels (the {cfg.agent} agent's), at most {cfg.max_images} a row",
        "DDP: each GPU holds a full copy" if device == "cuda" else "one process on the CPU",
    ]
    if cfg.generator == "vllm" and cfg.vllm_mode == "colocate":
        est.assumptions.append(
            f"vLLM colocated: {cfg.vllm_gpu_memory_utilization:g} of the GPU is reserved for it"
        )
    elif cfg.generator == "vllm":
        est.assumptions.append("vLLM in its own process: on this GPU, its memory shows as not free")


def _advice(est: Estimate, cfg: TrainConfig) -> list[str]:
    """What to change, biggest saving first (the parts as estimated)."""
    parts = dict(est.parts)
    tips: list[tuple[int, str]] = []
    if not cfg.lora.enabled:
        tips.append(
            (
                parts.get("AdamW moments (2)", 0) + parts.get("reference model (KL)", 0),
                "use LoRA (lora.enabled: true): adapter-only optimiser state, no reference copy",
            )
        )
    act = sum(b for w, b in est.training if w.startswith(("activations", "vision")))
    if cfg.micro_batch_rows > 1:
        tips.append((act - act // cfg.micro_batch_rows, "lower micro_batch_rows (to 1)"))
    if not cfg.gradient_checkpointing:
        tips.append((act * 3 // 4, "turn on gradient_checkpointing"))
    tips.append((act // 2, f"shorten the context (max_model_len, now {cfg.max_model_len})"))
    vis = sum(b for w, b in est.training if w.startswith("vision"))
    tips.append((vis // 2, f"fewer or smaller images (max_images, now {cfg.max_images})"))
    if cfg.lora.enabled and not cfg.lora.qlora:
        tips.append((0, "QLoRA (lora.qlora: true; bitsandbytes) for a 4-bit base"))
    tips.append((0, "or a smaller model"))
    return [text for _, text in sorted(tips, key=lambda x: -x[0])]


def memory_estimate(
    model_dir_or_id: str,
    cfg: TrainConfig,
    gpus: GPUReport | None,
    *,
    config: dict[str, Any] | None = None,
    max_pixels: int | None = None,
) -> Estimate:
    """The estimate for ``cfg`` on this machine (``gpus``: the probe; None: not probed). ``config``
    replaces reading ``config.json`` (a catalogue entry); ``max_pixels`` an image's pixel budget
    (default: the agent's). A GPU too small even when empty sets :attr:`Estimate.refusal`."""
    from vrag_desktop.core.runtime.gpu import GPUReport, count_params

    report = gpus if gpus is not None else GPUReport(error="not probed")
    want_cpu = cfg.device == "cpu" or (cfg.device == "auto" and not report.available)
    device = "cpu" if want_cpu else "cuda"
    est = Estimate(Path(model_dir_or_id).name or "the model", None, device)
    if cfg.device == "cuda" and not report.available:
        est.warnings.append(f"device is cuda but no NVIDIA GPU is visible ({report.error or 'none found'}).")
    if device == "cpu":
        est.warnings.append(
            "Training on the CPU: only for tiny models (well under 1 B parameters, e.g. for trying the "
            "set-up). Each step generates group_size × prompts_per_step rollouts token by token and "
            "back-propagates in fp32, tens to hundreds of times slower than a GPU."
        )
    try:
        data = config if config is not None else _model_config(model_dir_or_id)
        shape = model_shape(data)
        count_params(data)
    except (OSError, KeyError, ValueError, TypeError) as exc:
        est.warnings.append(f"Cannot estimate the memory this model needs: {exc}")
        return est
    est.params = shape.params
    b = 4 if device == "cpu" else 2
    if cfg.dtype != "auto":
        b = {"bf16": 2, "fp16": 2, "fp32": 4}[cfg.dtype]
    n = max(1, min(cfg.gpus or len(report.gpus), len(report.gpus))) if device == "cuda" else 1
    _compute(est, shape, cfg, b, device, max_pixels or _default_pixels(cfg.agent), n)
    if device == "cpu":
        if shape.params > CPU_TINY_PARAMS:
            est.warnings.append(
                f"{est.name} has {shape.params / 1e9:.1f} B parameters: far too big to train on a CPU."
            )
        _check_ram(est)
        return est
    est.kept.append(("CUDA context and buffers", CUDA_CONTEXT))
    _check_gpus(est, cfg, report)
    return est


def _model_config(model: str) -> dict[str, Any]:
    """``config.json`` of a local folder, or of a hub id already in the Hugging Face cache."""
    from vrag_desktop.core.runtime.gpu import load_model_config

    p = Path(model).expanduser()
    if p.exists() or not _HUB_ID.match(model):
        return load_model_config(p)[0]
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json")
    except Exception:  # no hub library, a malformed id: nothing cached
        cached = None
    if not isinstance(cached, str):
        raise FileNotFoundError(f"{model} is not downloaded yet (estimated once it is)")
    data = json.loads(Path(cached).read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def _check_gpus(est: Estimate, cfg: TrainConfig, report: GPUReport) -> None:
    if not report.gpus:
        return
    n = cfg.gpus or len(report.gpus)
    if n > len(report.gpus):
        est.warnings.append(f"gpus is {n} but only {len(report.gpus)} GPU(s) are present.")
    est.devices = min(n, len(report.gpus))
    need = est.per_device_bytes
    colocate = cfg.generator == "vllm" and cfg.vllm_mode == "colocate"
    for gpu in report.gpus[: est.devices]:
        share = int(gpu.total_bytes * cfg.vllm_gpu_memory_utilization) if colocate else 0
        room, total = gpu.free_bytes - share, gpu.total_bytes - share
        after = " after vLLM's colocated share" if share else ""
        if need > total:
            est.advice = _advice(est, cfg)
            est.refusal = (
                f"{est.name} needs ~{gib(need)} GiB per GPU to train (estimate); GPU {gpu.index} "
                f"({gpu.name}, {gib(gpu.total_bytes)} GiB) has {gib(max(total, 0))} GiB for it{after}, "
                f"even with nothing else running. To fit: {'; '.join(est.advice)}. "
                f"(The estimate is an upper bound: {SKIP_CHECK_ENV}=1 starts it anyway.)"
            )
            est.warnings.append(est.refusal)
            return
        if need > room:
            est.warnings.append(
                f"{est.name} needs ~{gib(need)} GiB per GPU to train; GPU {gpu.index} has "
                f"{gib(max(room, 0))} GiB free for it{after}. Close other GPU programs, or: "
                + "; ".join(_advice(est, cfg)[:3])
                + "."
            )


def _check_ram(est: Estimate) -> None:
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")  # total: free RAM misleads (caches)
    except (ValueError, OSError, AttributeError):
        return
    if est.per_device_bytes > total:
        est.warnings.append(
            f"It needs ~{gib(est.per_device_bytes)} GiB of RAM; this machine has {gib(total)} GiB."
        )
