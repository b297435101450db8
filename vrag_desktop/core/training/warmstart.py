"""``init_from``: a run that starts from another run's weights (a GRPO/GGPO run from its SFT warm
start), and the check that refuses a checkpoint of another architecture before anything loads.

Why a field rather than pointing ``model`` at the checkpoint: the run keeps its base model (its
processor, and for LoRA the weights its adapter was trained on), records where it started, and
the architecture is compared here, by name, instead of failing deep inside ``from_pretrained``
with a shape mismatch minutes later. What ``init_from`` may name:

* a training run's folder (or its name under ``<data>/training``): its ``export/`` when it has
  one, else its last complete checkpoint;
* one checkpoint folder (``<run>/checkpoints/checkpoint-N``), full weights or a LoRA adapter;
* a Hugging Face model folder.

A LoRA adapter is merged into its base once, in the new run's ``init-model/`` (the trainer does
it: it needs torch); the new run then trains (full or with a fresh adapter) on those weights, and
its reference policy is the warm-started model, as in the original (RL after SFT).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrag_desktop.core.training.config import ConfigError, TrainConfig

__all__ = [
    "INIT_MODEL",
    "InitSource",
    "WarmStartRun",
    "architecture",
    "check_init_from",
    "init_model_dir",
    "model_config",
    "resolve_init",
    "warm_start_runs",
]

#: Where a run keeps the merged weights it starts from when ``init_from`` is a LoRA adapter.
INIT_MODEL = "init-model"
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


@dataclass(frozen=True)
class InitSource:
    """The weights ``init_from`` names: ``path`` holds a full model, or (``adapter``) a LoRA adapter
    trained on ``base``; ``run`` / ``step``: the training run and checkpoint it came from."""

    path: Path
    adapter: bool = False
    base: str = ""
    run: Path | None = None
    step: int | None = None

    def describe(self) -> str:
        what = "LoRA adapter" if self.adapter else "weights"
        where = (
            f"step {self.step} of run {self.run}" if self.run is not None and self.step else str(self.path)
        )
        return f"{what} at {where}"


def _has_weights(p: Path) -> bool:
    return (p / "config.json").is_file() and (
        any((p / w).is_file() for w in _WEIGHTS) or any(p.glob("model-*.safetensors"))
    )


def _is_run(p: Path) -> bool:
    return (p / "state.json").is_file() or (p / "checkpoints").is_dir()


def _run_model(run: Path) -> str:
    try:
        data = json.loads((run / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    return str(data.get("model") or "") if isinstance(data, dict) else ""


def _checkpoint(p: Path, run: Path | None, step: int | None) -> InitSource:
    if (p / "adapter_config.json").is_file():
        base = _run_model(run) if run is not None else ""
        if not base:
            try:
                base = str(json.loads((p / "adapter_config.json").read_text(encoding="utf-8")).get(
                    "base_model_name_or_path") or "")  # fmt: skip
            except (OSError, ValueError):
                base = ""
        if not base:
            raise ConfigError("init_from", f"{p} is a LoRA adapter whose base model is not recorded")
        return InitSource(p, adapter=True, base=base, run=run, step=step)
    if _has_weights(p):
        return InitSource(p, run=run, step=step)
    raise ConfigError("init_from", f"{p} holds no model weights (config.json and *.safetensors)")


def resolve_init(spec: str, data_dir: str = "") -> InitSource:
    """What ``init_from`` names (see the module docstring); a bare name that is no folder here is a
    run under ``<data>/training`` (as ``train status NAME``). ``ConfigError`` naming ``init_from``
    when it names nothing that can be started from."""
    from vrag_desktop.core.paths import DataLayout, resolve_data_dir
    from vrag_desktop.core.training.rundir import TrainRun

    p = Path(spec).expanduser()
    if not p.exists() and len(p.parts) == 1:
        named = DataLayout(resolve_data_dir(data_dir or None)).training / spec
        p = named if named.exists() else p
    if not p.exists():
        raise ConfigError("init_from", f"no such folder {p}, and no training run of that name")
    if not p.is_dir():
        raise ConfigError("init_from", f"{p} is a file; name a training run, a checkpoint or a model folder")
    if _is_run(p):
        run = TrainRun(p)
        if _has_weights(run.export_dir):
            return InitSource(run.export_dir, run=p)
        last = run.last_checkpoint()
        if last is None:
            status = run.state().get("status", "unknown")
            raise ConfigError(
                "init_from",
                f"the run {p} has no complete checkpoint yet (status {status}); wait until it saves "
                "one, or name a checkpoint or model folder",
            )
        return _checkpoint(last.path, p, last.step)
    if p.name.startswith("checkpoint-") and p.parent.name == "checkpoints":
        run_root = p.parent.parent
        step = int(p.name.split("-", 1)[1]) if p.name.split("-", 1)[1].isdigit() else None
        return _checkpoint(p, run_root if _is_run(run_root) else None, step)
    return _checkpoint(p, None, None)


def model_config(model: str) -> dict[str, Any] | None:
    """A model's ``config.json`` (a local folder, or a hub id already in the Hugging Face cache);
    None when it cannot be read without downloading."""
    p = Path(model).expanduser()
    path: Path | None = p / "config.json" if p.is_dir() else None
    if path is None and "/" in model and not p.exists():
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(model, "config.json")
        except Exception:  # no hub library, a malformed id: unknown, checked after the download
            found = None
        path = Path(found) if isinstance(found, str) else None
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def architecture(config: dict[str, Any]) -> tuple[str, str, tuple[int, int, int]]:
    """(class, model_type, (hidden size, layers, vocabulary)) from a ``config.json``; the shapes are
    read from ``text_config`` when the top level does not have them (Qwen-VL configs nest them)."""
    arch = config.get("architectures") or ["?"]
    nested = config.get("text_config")
    text: dict[str, Any] = nested if isinstance(nested, dict) else {}

    def dim(name: str) -> int:
        value = config.get(name, text.get(name, 0))
        return int(value) if isinstance(value, int) else 0

    shape = (dim("hidden_size"), dim("num_hidden_layers"), dim("vocab_size"))
    return str(arch[0]), str(config.get("model_type", "?")), shape


def _words(arch: tuple[str, str, tuple[int, int, int]]) -> str:
    cls, kind, (hidden, layers, vocab) = arch
    return f"a {cls} ({kind}, hidden size {hidden}, {layers} layers, vocabulary {vocab})"


def check_init_from(cfg: TrainConfig) -> InitSource | None:
    """Resolve ``cfg.init_from`` and refuse (``ConfigError`` naming ``init_from``, with both
    architectures) weights of another architecture than ``cfg.model``. A model that cannot be read
    yet (a hub id not downloaded) is not refused here; the trainer checks again once it has it."""
    if not cfg.init_from:
        return None
    src = resolve_init(cfg.init_from, cfg.data_dir)
    mine = model_config(cfg.model)
    theirs = model_config(src.base if src.adapter else str(src.path))
    if mine is None or theirs is None:
        return src
    a, b = architecture(theirs), architecture(mine)
    if a != b:
        raise ConfigError(
            "init_from",
            f"{cfg.init_from} is {_words(a)}, but model {cfg.model} is {_words(b)}: a run starts "
            "from weights of its own model's architecture; set model to the one the warm start "
            "trained, or choose a checkpoint of this model",
        )
    return src


def init_model_dir(run_root: Path) -> Path:
    """Where a run keeps a merged LoRA warm start (see :data:`INIT_MODEL`)."""
    return Path(run_root) / INIT_MODEL


@dataclass(frozen=True)
class WarmStartRun:
    """An SFT run a GRPO/GGPO run can start from (the New-run dialog lists them)."""

    name: str
    path: Path
    model: str
    agent: str
    step: int | None  # its last complete checkpoint (None: only its export)
    exported: bool


def warm_start_runs(training_root: Path) -> list[WarmStartRun]:
    """The SFT runs under ``training_root`` that have weights to start from (a complete checkpoint
    or an export), newest first."""
    from vrag_desktop.core.training.rundir import TrainRun, TrainRunError

    found: list[tuple[float, WarmStartRun]] = []
    root = Path(training_root)
    for child in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            run = TrainRun.open(child)
            cfg = run.config()
        except (TrainRunError, ConfigError, OSError):
            continue
        last = run.last_checkpoint()
        exported = _has_weights(run.export_dir)
        if cfg.algorithm != "sft" or (last is None and not exported):
            continue
        when = run.state().get("updated_at")
        stamp = float(when) if isinstance(when, (int, float)) else 0.0
        found.append(
            (
                stamp,
                WarmStartRun(child.name, child, cfg.model, cfg.agent, last.step if last else None, exported),
            )
        )
    return [w for _t, w in sorted(found, key=lambda t: -t[0])]
