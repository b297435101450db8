"""Export a run's last complete checkpoint as a folder a serving engine loads: the full model's
weights and processor files, or — for a LoRA run — the merged model with its adapter beside it
(:mod:`vrag_trainer.lora`). Written to a hidden ``.partial`` folder first, then renamed, so a
failed export never leaves a half folder where the app looks for a model."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.rundir import TrainRun
from vrag_trainer.lora import PROCESSOR_FILES
from vrag_trainer.runner import RunRefused

__all__ = ["best_source", "export"]

log = logging.getLogger("vrag_trainer")


def export(run_dir: str, out: str | None = None, *, merged: bool = True, best: bool = False) -> Path:
    """The last complete checkpoint (``best``: what core's :func:`best_choice` names, the best
    validation's checkpoint or, when none beat the starting weights, the warm start's weights) as a
    Hugging Face model directory a vLLM server can load. A LoRA run's export is the merged model with
    its adapter in ``adapter/`` (``merged=False``: the adapter alone, in ``adapter/``)."""
    run = TrainRun.open(run_dir)
    if best:
        source, step = best_source(run)
    else:
        last = run.last_checkpoint()
        if last is None:
            raise RunRefused(f"{run.root} has no complete checkpoint to export yet")
        source, step = last.path, last.step
    target = Path(out).expanduser() if out else run.export_dir
    if target.exists() and any(target.iterdir()):
        raise RunRefused(f"{target} is not empty; choose another --out")
    tmp = target.with_name(f".{target.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    from vrag_trainer.lora import is_adapter_checkpoint

    if is_adapter_checkpoint(source):
        _export_adapter(run, source, tmp, merged)
        return _publish(tmp, target, step)
    weights = (
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "model.safetensors.index.json",
        "pytorch_model.bin",
    )
    keep = (*weights, *PROCESSOR_FILES)
    for f in source.iterdir():
        if f.name in keep or (f.name.startswith("model-") and f.suffix == ".safetensors"):
            shutil.copy2(f, tmp / f.name)
    if not (tmp / "config.json").is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        raise RunRefused(f"{source} holds no model weights (config.json missing)")
    return _publish(tmp, target, step)


def best_source(run: TrainRun) -> tuple[Path, int]:
    """The folder ``--best`` exports and its step (0: the warm start), said in the log;
    :class:`RunRefused` with core's reason when there is none."""
    from vrag_desktop.core.training.validation import best_choice

    choice = best_choice(run)
    if choice.path is None or choice.step is None:
        raise RunRefused(choice.reason)
    if choice.source == "warm_start":
        log.info("exporting the warm start's weights %s: %s", choice.path, choice.reason)
    else:
        log.info("exporting %s", choice.what())
    return choice.path, choice.step


def _export_adapter(run: TrainRun, ckpt: Path, tmp: Path, merged: bool) -> None:
    from vrag_trainer.lora import export_lora
    from vrag_trainer.warmstart import base_model_dir

    cfg = run.config()
    try:
        base = base_model_dir(run, cfg)  # a warm-started run's adapter sits on the weights it started from
    except RunRefused as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RunRefused(f"the base model of this LoRA run is not available: {exc}") from exc
    try:
        export_lora(ckpt, base, tmp, merged=merged, dtype=_export_dtype(cfg))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _export_dtype(cfg: TrainConfig) -> Any:
    """The merge's dtype: the run's, else the base's own (``auto``)."""
    if cfg.dtype == "auto":
        return "auto"
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[cfg.dtype]


def _publish(tmp: Path, target: Path, step: int) -> Path:
    if target.exists():
        target.rmdir()
    os.replace(tmp, target)
    log.info("exported %s to %s", f"step {step}" if step else "the warm start's weights", target)
    return target
