"""LoRA and QLoRA through PEFT: which layers get adapters, the 4-bit base, and the two exports.

Why LoRA: full fine-tuning of a 7B model keeps Adam's two moments for every weight plus a second,
frozen copy as the reference policy — several times a 24 GB card. With LoRA only the adapters
train (the optimiser holds their state alone) and the reference policy is the same model with its
adapter disabled (TRL hands no ``ref_model`` for a PEFT model; :meth:`AgentGRPOTrainer._ref_logps`
disables the adapter), so no second copy exists.

Which layers: ``target_modules`` are matched by name in the *language model only* and turned into
full module paths, because the same names live in the vision tower too (Qwen2.5-VL's vision MLP has
``gate_proj``/``up_proj``/``down_proj``): a bare name would silently adapt the vision encoder.
``vision: true`` adds every linear layer of the vision tower (blocks and merger). A requested name
that the language model lacks refuses the run before it starts, naming it and the names it has.

Exports: a LoRA checkpoint holds the adapter only; :func:`export_lora` writes the merged model
(base + adapter, a plain Hugging Face folder any server loads) with the adapter beside it in
``adapter/`` (for vLLM's ``--enable-lora --lora-modules name=<export>/adapter`` on the base model).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.lora import LoraConfig

__all__ = [
    "ADAPTER_DIR",
    "LoraRefused",
    "adapter_names",
    "export_lora",
    "is_adapter_checkpoint",
    "peft_config",
    "quantization",
    "target_names",
]

#: Attribute names under which Qwen-style VLMs (and most others) keep their vision encoder.
VISION_TOWERS = ("visual", "vision_tower", "vision_model")
ADAPTER_DIR = "adapter"
_ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")
#: What a serving engine needs beside the weights (written into every checkpoint by the callback).
PROCESSOR_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "preprocessor_config.json",
    "chat_template.jinja",
    "chat_template.json",
)


class LoraRefused(ValueError):
    """LoRA cannot be set up as configured (message starts with the field's dotted name)."""


def _linear_names(model: Any) -> list[str]:
    import torch

    return [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]


def _vision_prefixes(model: Any) -> list[str]:
    found = [n for n, _ in model.named_modules() if n and n.rsplit(".", 1)[-1] in VISION_TOWERS]
    return [n for n in found if not any(n.startswith(f"{p}.") for p in found if p != n)]


def target_names(model: Any, lora: LoraConfig) -> list[str]:
    """Full module paths to adapt: the language model's linear layers named in ``target_modules``
    (never ``lm_head``), plus every vision-tower linear layer when ``vision``. Raises
    :class:`LoraRefused` naming what the model lacks."""
    vision = _vision_prefixes(model)

    def in_vision(name: str) -> bool:
        return any(name == p or name.startswith(f"{p}.") for p in vision)

    linears = _linear_names(model)
    language = [n for n in linears if not in_vision(n) and n.rsplit(".", 1)[-1] != "lm_head"]
    wanted = set(lora.target_modules)
    names = [n for n in language if n.rsplit(".", 1)[-1] in wanted]
    present = {n.rsplit(".", 1)[-1] for n in names}
    missing = [t for t in lora.target_modules if t not in present]
    kind = type(model).__name__
    if missing:
        have = sorted({n.rsplit(".", 1)[-1] for n in language})
        raise LoraRefused(
            f"lora.target_modules: {kind} has no {', '.join(missing)} in its language model; its "
            f"linear layers there are named {', '.join(have) or '(none)'}"
        )
    if lora.vision:
        tower = [n for n in linears if in_vision(n)]
        if not tower:
            raise LoraRefused(f"lora.vision: {kind} has no vision tower with linear layers to adapt")
        names += tower
    return names


def peft_config(model: Any, lora: LoraConfig) -> Any:
    """PEFT's ``LoraConfig`` for ``model`` (explicit module paths, see :func:`target_names`)."""
    try:
        from peft import LoraConfig as PeftLoraConfig
    except ImportError as exc:
        raise LoraRefused(
            "lora.enabled: the trainer environment has no peft; recreate it "
            "(vrag-desktop train env --force, or scripts/setup.sh in a checkout)"
        ) from exc
    return PeftLoraConfig(
        r=int(lora.rank),
        lora_alpha=lora.alpha,  # type: ignore[arg-type]  # typed int; any number scales alpha/r
        lora_dropout=float(lora.dropout),
        target_modules=target_names(model, lora),
        bias="none",
        task_type="CAUSAL_LM",
    )


def adapter_names(model: Any) -> list[str]:
    """Names of the trainable parameters (the adapters, for a PEFT model)."""
    return [n for n, p in model.named_parameters() if p.requires_grad]


def quantization(cfg: TrainConfig, device: str, dtype: Any) -> dict[str, Any]:
    """``from_pretrained`` arguments for a QLoRA base (4-bit NF4, double quantisation, compute in
    the run's dtype, vision tower and ``lm_head`` kept in full precision); {} without QLoRA."""
    if not (cfg.lora.enabled and cfg.lora.qlora):
        return {}
    if device != "cuda":
        raise LoraRefused("lora.qlora: a 4-bit base needs a CUDA GPU and none is visible here")
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is None:
        raise LoraRefused(
            "lora.qlora: bitsandbytes is not installed in the trainer environment "
            "(pip install bitsandbytes there, or use plain LoRA)"
        )
    import torch
    from transformers import BitsAndBytesConfig

    return {
        "quantization_config": BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=dtype,
            llm_int8_skip_modules=[*VISION_TOWERS, "lm_head"],
        ),
        "device_map": {"": torch.cuda.current_device()},
    }


def is_adapter_checkpoint(path: Path) -> bool:
    return (path / "adapter_config.json").is_file()


def _copy_processor(src: Path, out: Path) -> None:
    for name in PROCESSOR_FILES:
        if (src / name).is_file():
            shutil.copy2(src / name, out / name)


def export_lora(ckpt: Path, base_model: Path, out: Path, *, merged: bool = True, dtype: Any = "auto") -> None:
    """Write the adapter of ``ckpt`` to ``out/adapter`` (pointing at ``base_model``) and, when
    ``merged``, the merged model (in ``dtype``) to ``out`` itself; processor files go with each."""
    adapter = out / ADAPTER_DIR
    adapter.mkdir(parents=True, exist_ok=True)
    for name in _ADAPTER_FILES:
        if (ckpt / name).is_file():
            shutil.copy2(ckpt / name, adapter / name)
    config_path = adapter / "adapter_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["base_model_name_or_path"] = str(base_model)
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    _copy_processor(ckpt, adapter)
    if not merged:
        return
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText

    base = AutoModelForImageTextToText.from_pretrained(str(base_model), dtype=dtype)
    model = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()
    model.save_pretrained(str(out))
    _copy_processor(ckpt, out)
