"""Where a run's policy loads its weights from when it starts from another run (``init_from``).

The app checked the architecture before launching (:mod:`vrag_desktop.core.training.warmstart`)
when it could read both configs; here it is checked again once the base model is local (a hub id is
downloaded by now). The folder used is recorded in ``state.json`` (``init_weights``) at the run's
first start and reused by every resume and by the export, so a warm-start run that goes on saving
checkpoints cannot move the base of a run that already started from it. A LoRA adapter is merged
into its base once, into ``<run>/init-model`` (written aside, then renamed: a kill mid-merge leaves
nothing that looks whole).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from vrag_desktop.core.training.config import ConfigError, TrainConfig
from vrag_desktop.core.training.rundir import TrainRun
from vrag_desktop.core.training.warmstart import (
    InitSource,
    architecture,
    check_init_from,
    init_model_dir,
    model_config,
)

__all__ = ["base_model_dir", "init_weights", "load_start", "resume_weights"]

log = logging.getLogger("vrag_trainer")
MERGE_WAIT_S = 1800.0  # other processes wait this long for rank 0's merge
_DONE = "COMPLETE"


def _refused(message: str) -> Exception:
    from vrag_trainer.runner import RunRefused

    return RunRefused(message)


def _local(model: str) -> Path:
    from vrag_desktop.core.embedders.base import EmbedderError
    from vrag_desktop.core.embedders.qwen_vl_loading import resolve_model_dir

    try:
        return resolve_model_dir(model)
    except EmbedderError as exc:
        raise _refused(f"model: {exc}") from exc


def _same_architecture(cfg: TrainConfig, base: Path, weights_config: dict[str, Any] | None) -> None:
    mine = model_config(str(base))
    if mine is None or weights_config is None:
        return
    a, b = architecture(weights_config), architecture(mine)
    if a != b:
        raise _refused(
            f"init_from: {cfg.init_from} is a {a[0]} ({a[1]}), but model {cfg.model} is a {b[0]} "
            f"({b[1]}); a run starts from weights of its own model's architecture"
        )


def _merge(src: InitSource, target: Path, dtype: Any) -> None:
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText

    from vrag_desktop.core.embedders.qwen_vl_loading import load_processor
    from vrag_trainer.runner import save_processor

    base = _local(src.base)
    tmp = target.with_name(f".{target.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    log.info("merging the LoRA warm start %s into its base %s (once, into %s)", src.describe(), base, target)
    model = AutoModelForImageTextToText.from_pretrained(str(base), dtype=dtype)
    merged = PeftModel.from_pretrained(model, str(src.path)).merge_and_unload()
    merged.save_pretrained(str(tmp))
    save_processor(load_processor(base, merged.config.model_type), tmp)
    (tmp / _DONE).write_text(str(src.path), encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)


def _wait_for(target: Path) -> None:
    deadline = time.monotonic() + MERGE_WAIT_S
    while not (target / _DONE).is_file():
        if time.monotonic() > deadline:
            raise _refused(f"init_from: the merged warm start {target} did not appear in time")
        time.sleep(1.0)


def init_weights(run: TrainRun, cfg: TrainConfig, dtype: Any) -> Path | None:
    """The folder the policy's weights load from (None: ``cfg.model`` itself); refuses, naming
    ``init_from``, weights that cannot be used."""
    if not cfg.init_from:
        return None
    from vrag_trainer import distributed

    recorded = run.state().get("init_weights")
    if isinstance(recorded, str) and recorded:
        path = Path(recorded)
        if not (path / "config.json").is_file():
            raise _refused(
                f"init_from: this run started from {path}, which is gone; it cannot resume without it"
            )
        return path
    try:
        src = check_init_from(cfg)
    except ConfigError as exc:
        raise _refused(str(exc)) from exc
    assert src is not None
    base = _local(cfg.model)
    _same_architecture(cfg, base, model_config(src.base if src.adapter else str(src.path)))
    if src.adapter:
        path = init_model_dir(run.root)
        if not (path / _DONE).is_file():
            if distributed.is_main():
                _merge(src, path, dtype)
            else:
                _wait_for(path)
    else:
        path = src.path
    log.info("the policy starts from the %s (init_from %s)", src.describe(), cfg.init_from)
    run.write_state(init_weights=str(path))
    return path


def base_model_dir(run: TrainRun, cfg: TrainConfig) -> Path:
    """The base a LoRA checkpoint of ``run`` was trained on: the weights it started from
    (``init_weights`` in its state), else its model."""
    recorded = run.state().get("init_weights")
    if cfg.init_from and isinstance(recorded, str) and recorded:
        return Path(recorded)
    return _local(cfg.model)


def resume_weights(ckpt: Any) -> Path | None:
    """The full-weights checkpoint a resumed run's policy loads from (None: a new run, or a LoRA
    checkpoint, whose adapter the ``Trainer`` loads itself).

    Why not the ``Trainer``'s own resume: it reads ``model.safetensors`` with
    ``load_state_dict(strict=False)``, while transformers 5 saves Qwen-VL models under their legacy
    key names (``model.layers.…``, ``visual.…``) and maps them back only in ``from_pretrained``; so
    on resume nothing but ``lm_head`` loaded (a warning, no error) and the run went on from its
    starting weights with the checkpoint's optimiser state."""
    if ckpt is None:
        return None
    path = Path(ckpt.path)
    return None if (path / "adapter_config.json").is_file() else path


def load_start(cfg: TrainConfig, run: TrainRun, dtype: Any, resume: Path | None) -> tuple[Any, Any]:
    """The policy and processor a run trains: its starting weights (``init_from``, else the model),
    or on resume its checkpoint's, through ``from_pretrained`` (which maps the saved names). The
    model's ``name_or_path`` stays the starting weights': TRL builds the KL reference model from it."""
    from vrag_trainer.runner import load_policy

    start = init_weights(run, cfg, dtype)
    if resume is None:
        return load_policy(cfg, weights=start)
    model, processor = load_policy(cfg, weights=resume)
    model.config._name_or_path = str(start or _local(cfg.model))
    log.info("the policy's weights come from the checkpoint %s", resume)
    return model, processor


def skip_trainer_load(trainer: Any) -> None:
    """The policy already holds the checkpoint's weights (:func:`load_start`): the ``Trainer``'s
    own load would only warn that no name matched; it still restores the optimiser, scheduler,
    random state and step."""
    trainer._load_from_checkpoint = lambda *_a, **_k: None
