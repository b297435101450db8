"""What the New-run form checks before a training run is launched, with no Qt and no training library.

Why here: a run that dies after minutes of model loading because no item matched its corpora, the
model folder was wrong, the trainer env was missing or the GPU was too small wastes the most time of
all; each is answered here in milliseconds (the match in seconds), by the same core code the trainer
and the vLLM pre-flight use, so the form and the trainer never disagree. A run that would start but
could not learn is the worst waste of all (it looks like a run): the matched items' answers are
checked against the judge here too (:func:`learning_warnings`, from ``learnable.py``).
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrag_desktop.core.training.config import ConfigError, TrainConfig
from vrag_desktop.core.training.learnable import AnswerStyle, answer_style, learning_warnings
from vrag_desktop.core.training.memory import CPU_TINY_PARAMS, Estimate, memory_estimate

if TYPE_CHECKING:
    from collections.abc import Sequence

    from vrag_desktop.core.runtime.gpu import GPUReport

__all__ = [
    "CPU_TINY_PARAMS",
    "LAUNCH_CONFIG",
    "AnswerStyle",
    "DatasetCheck",
    "EnvStatus",
    "Estimate",
    "ModelCheck",
    "check_dataset",
    "check_model_dir",
    "command_preview",
    "disk_full",
    "env_status",
    "learning_warnings",
    "load_last_config",
    "match_count",
    "memory_estimate",
    "output_dir_problem",
    "save_last_config",
    "write_error_message",
    "write_launch_config",
]

#: The config file the launcher writes into the run directory and passes with ``--config``.
LAUNCH_CONFIG = "launch-config.json"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_LAST = "training-last.json"


# ---- dataset ↔ corpora --------------------------------------------------------------------------
@dataclass(frozen=True)
class DatasetCheck:
    """The items a run would train on (``matched`` of ``total``, the others named in ``problems``)
    and their answers' :class:`AnswerStyle`, which :func:`learning_warnings` reads with the config."""

    matched: int
    total: int
    problems: list[tuple[str, str]]
    style: AnswerStyle
    what: str = "items match the chosen corpora"  # an SFT export: trajectories, no corpus needed
    validation: tuple[str, ...] = ()  # what the run validates on, as the trainer will say it
    validation_error: str | None = None  # why no validation set can be made (Start is off)

    @property
    def match(self) -> tuple[int, int, list[tuple[str, str]]]:
        return self.matched, self.total, self.problems


def check_dataset(
    dataset_spec: str,
    corpora: Sequence[str],
    data_dir: str | os.PathLike[str],
    config: TrainConfig | None = None,
) -> DatasetCheck:
    """Match the dataset against ``corpora`` (empty: all) by the shared rule of
    :func:`vrag_desktop.core.training.data.training_items`. A dataset or corpus that cannot be
    found raises :class:`ConfigError` naming ``dataset`` or ``corpora``. With ``config`` validating
    (``validation.eval_steps``), its validation set is made as the trainer makes it and said."""
    from vrag_desktop.core.training.data import training_items
    from vrag_desktop.core.training.sft import is_sft_export, read_sft_export

    if is_sft_export(dataset_spec):  # History's SFT export: its trajectories are trained as they are
        export = read_sft_export(dataset_spec)
        what = "trajectories of the SFT export can be trained on"
        return DatasetCheck(len(export.samples), export.total, export.problems, AnswerStyle(), what)
    found = training_items(dataset_spec, corpora, data_dir)
    check = DatasetCheck(len(found.items), found.total, found.problems, answer_style(found.items))
    if config is None or not config.validation.eval_steps or not found.items:
        return check
    from dataclasses import replace

    from vrag_desktop.core.training.validation import validation_split

    try:
        split = validation_split(replace(config, corpora=tuple(corpora)), found, data_dir)
    except ConfigError as exc:
        return replace(check, validation_error=str(exc))
    return replace(check, validation=tuple(split.lines()))


def match_count(
    dataset_spec: str, corpora: Sequence[str], data_dir: str | os.PathLike[str]
) -> tuple[int, int, list[tuple[str, str]]]:
    """``(matched, total, problems)`` of :func:`check_dataset`."""
    return check_dataset(dataset_spec, corpora, data_dir).match


# ---- base model ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelCheck:
    """``kind``: ``local`` (a model folder), ``hub`` (an id, downloaded at start) or ``bad``."""

    ok: bool
    kind: str
    message: str


def check_model_dir(path: str) -> ModelCheck:
    """Is ``path`` a Hugging Face model folder, or a hub id? A folder without ``config.json`` or
    without weights is named as such, so the run is not launched to fail at loading."""
    text = path.strip()
    if not text:
        return ModelCheck(False, "bad", "model: is required (a model folder or a hub id)")
    p = Path(text).expanduser()
    if p.exists():
        if not p.is_dir():
            return ModelCheck(False, "bad", f"model: {p} is a file, not a model folder")
        if not (p / "config.json").is_file():
            return ModelCheck(False, "bad", f"model: {p} is not a Hugging Face model folder (no config.json)")
        if not any(p.glob("*.safetensors")) and not any(p.glob("*.bin")):
            return ModelCheck(False, "bad", f"model: {p} has config.json but no weights (*.safetensors)")
        return ModelCheck(True, "local", f"Local model folder {p.name}")
    if _HUB_ID.match(text) and not text.startswith((".", "~")):
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        tail = " (offline now: it must already be in the Hugging Face cache)" if offline else ""
        return ModelCheck(True, "hub", f"Hub model {text}: downloaded when the run starts{tail}")
    return ModelCheck(False, "bad", f"model: no such folder {p}, and not a hub id (owner/name)")


# ---- trainer environment ------------------------------------------------------------------------
@dataclass(frozen=True)
class EnvStatus:
    """``state``: ``ready``, ``missing`` (create it) or ``broken`` (recreate it)."""

    state: str
    python: Path | None
    message: str

    @property
    def ready(self) -> bool:
        return self.state == "ready"


_PROBE = (
    "import importlib.util as u, sys; "
    "miss = [m for m in ('vrag_trainer', 'trl', 'accelerate') if u.find_spec(m) is None]; "
    "print(' '.join(miss)); sys.exit(1 if miss else 0)"
)


def env_status(env_path: str | os.PathLike[str], *, verify: bool = True, timeout: float = 30.0) -> EnvStatus:
    """Whether the trainer can be launched from the env at ``env_path`` (``DataLayout.trainer_env``),
    ``$VRAG_TRAINER_PYTHON`` or a checkout's ``.venv-trainer``; ``verify`` asks the interpreter
    whether it finds the trainer's packages (a fraction of a second, no import)."""
    from vrag_desktop.core.runtime.trainer_env import PYTHON_ENV, find_trainer_python
    from vrag_desktop.core.runtime.venv import venv_python

    env = Path(env_path).expanduser()
    python = find_trainer_python(env)
    if python is None:
        if env.exists():
            return EnvStatus(
                "broken", None, f"The trainer environment at {env} is broken (incomplete); re-create it."
            )
        return EnvStatus("missing", venv_python(env), f"The trainer environment does not exist yet ({env}).")
    if not python.exists():
        return EnvStatus(
            "broken", python, f"{PYTHON_ENV} names {python}, which does not exist (unset it, or fix it)."
        )
    if verify:
        try:
            proc = subprocess.run(
                [str(python), "-c", _PROBE], capture_output=True, text=True, timeout=timeout, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return EnvStatus(
                "broken",
                python,
                f"The trainer environment is broken: its Python {python} does not run ({exc}).",
            )
        if proc.returncode != 0:
            missing = proc.stdout.strip() or proc.stderr.strip()[-200:]
            return EnvStatus(
                "broken",
                python,
                f"The trainer environment is broken: {python} lacks {missing}; re-create it.",
            )
    return EnvStatus("ready", python, f"Trainer environment ready ({python})")


# ---- the output directory -----------------------------------------------------------------------
def output_dir_problem(run_dir: str | os.PathLike[str]) -> str | None:
    """Why the run directory cannot be created or written (None: it can, as far as can be told
    without writing). The nearest existing folder decides: a regular file there, or a folder this
    user cannot write (``os.access``: also a read-only file system, even for root)."""
    run = Path(run_dir).expanduser().absolute()
    near = run
    while not near.exists() and near != near.parent:
        near = near.parent
    if near.exists() and not near.is_dir():
        if near == run:
            return f"output_dir: {run} is a file, not a folder; choose another output directory"
        return f"output_dir: {near} is a file, so {run} cannot be created; choose another output directory"
    if not os.access(near, os.W_OK | os.X_OK):
        return f"output_dir: {near} is not writable (permission denied); choose another output directory"
    return None


#: Below this much free space where a run failed, the failure is put down to a full disk.
FULL_DISK_BYTES = 1 << 20


def disk_full(exc: BaseException, path: str | os.PathLike[str]) -> bool:
    """Did ``exc`` (raised while the run wrote into ``path``) come from a full disk?

    Why not just its errno: safetensors says "No space left", but ``torch.save`` (the optimiser's
    state) raises a ``RuntimeError`` about a stream position that names nothing, so when nothing in
    the exception's chain says so, the free space left where the run writes decides."""
    seen: BaseException | None = exc
    for _ in range(8):  # the chain of causes and contexts, bounded
        if seen is None:
            break
        if getattr(seen, "errno", None) in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
            return True
        if "No space left" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):  # gone, or no statvfs (Windows)
        return False
    return st.f_bavail * st.f_frsize < FULL_DISK_BYTES


def write_error_message(exc: OSError, path: str | os.PathLike[str]) -> str:
    """A person's words for a failed write of the run directory (a full disk, no permission…)."""
    where = Path(path)
    if exc.errno == errno.ENOSPC or exc.errno == getattr(errno, "EDQUOT", -1):
        return (
            f"The disk is full: no space left to write {where}. Free some space (or choose an output "
            "directory on another disk) and press Start again."
        )
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{where} is not writable ({exc.strerror}); choose another output directory."
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return f"{where} cannot be created ({exc.strerror}: a file is in the way); choose another output directory."
    return f"Could not write {where}: {exc.strerror or exc}"


# ---- the command ---------------------------------------------------------------------------------
def command_preview(
    cfg: TrainConfig,
    run_dir: str | os.PathLike[str],
    python: str | os.PathLike[str] | None = None,
    gpus: GPUReport | None = None,
) -> list[str]:
    """Exactly the argv :func:`vrag_desktop.core.training.plan.new_run` returns (one process:
    ``python -m vrag_trainer <algorithm> --config <run>/launch-config.json --run <run>``; several:
    the same under ``accelerate launch``). ``python`` None: the trainer env's (or where it will
    be); ``gpus`` None: the machine is not probed (one process unless ``gpus`` asks for more)."""
    from vrag_desktop.core.paths import DataLayout
    from vrag_desktop.core.runtime.gpu import GPUReport
    from vrag_desktop.core.runtime.trainer_env import find_trainer_python
    from vrag_desktop.core.runtime.venv import venv_python
    from vrag_desktop.core.training import plan

    run = Path(run_dir).expanduser()
    if python is None:
        layout = DataLayout(Path(cfg.data_dir).expanduser()) if cfg.data_dir else DataLayout.resolve(None)
        python = find_trainer_python(layout.trainer_env) or venv_python(layout.trainer_env)
    try:
        processes = plan.process_count(cfg, gpus or GPUReport(error="not probed"))[0]
    except ConfigError:  # refused at the start, with its reason; the preview shows what was asked
        processes = max(1, cfg.gpus)
    if gpus is None and cfg.gpus == 0:
        processes = 1
    return plan.command(
        python, cfg.algorithm, processes=processes, port=29500, config=run / LAUNCH_CONFIG, run=run
    )


def write_launch_config(cfg: TrainConfig, run_dir: str | os.PathLike[str]) -> Path:
    """Write the file :func:`command_preview` passes with ``--config`` (called by
    :func:`vrag_desktop.core.training.plan.new_run`, the one place a run is set up)."""
    from vrag_desktop.core.fsutil import atomic_write_json

    path = Path(run_dir).expanduser() / LAUNCH_CONFIG
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, cfg.to_dict())
    return path


# ---- the last values used -------------------------------------------------------------------------
def save_last_config(cfg: TrainConfig, config_dir: str | os.PathLike[str]) -> None:
    """Remember the form's values (``<data>/config/training-last.json``, beside the vLLM settings)."""
    from vrag_desktop.core.fsutil import atomic_write_json

    d = Path(config_dir).expanduser()
    d.mkdir(parents=True, exist_ok=True)
    atomic_write_json(d / _LAST, cfg.to_dict())


def load_last_config(config_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The remembered values, or None (none yet, or unreadable: the defaults are used)."""
    try:
        data = json.loads((Path(config_dir).expanduser() / _LAST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
