"""THE one place a training run is set up: the New-run dialog, the panel's *Resume*/*Export* and
``vrag-desktop train`` all call these functions, then hand the returned command to
:func:`vrag_desktop.core.training.launch.start` (the supervisor).

Why one place: the checks that refuse a run (a field that would do nothing, more GPUs than the
machine has, an output folder that cannot be written or already holds a run), the file the trainer
reads (``<run>/launch-config.json``: the form or the file plus ``--set``) and the command (one
process, or ``accelerate launch --num_processes N`` for several GPUs) must be the same whichever
door the person came through; two copies drifted before (the CLI wrote the file its own way).

Processes: ``gpus: 0`` is every visible GPU (one process when there is none, or ``device: cpu``),
``gpus: N`` is N processes, one per GPU, under ``accelerate launch`` (DDP). More GPUs than the
machine has is refused, naming both counts. Without a GPU, several processes are refused unless
``VRAG_TRAINER_CPU_PROCESSES=1`` is set: then N CPU processes talk over gloo, which is how the
multi-process path is tested on a machine without GPUs (slow; never useful for real training).
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vrag_desktop.core.training.config import ConfigError, TrainConfig
from vrag_desktop.core.training.launch import TrainLaunchError, trainer_argv
from vrag_desktop.core.training.preflight import (
    LAUNCH_CONFIG,
    output_dir_problem,
    write_error_message,
    write_launch_config,
)
from vrag_desktop.core.training.rundir import TrainRun, TrainRunError

if TYPE_CHECKING:
    from vrag_desktop.core.runtime.gpu import GPUReport
    from vrag_desktop.core.training.warmstart import InitSource

__all__ = [
    "CPU_PROCESSES_ENV",
    "LAUNCH_CONFIG",
    "LaunchPlan",
    "LaunchRefused",
    "check_fields",
    "check_memory",
    "check_rollout_server",
    "check_warm_start",
    "command",
    "export_run",
    "new_run",
    "process_count",
    "resume_run",
    "verl_command",
]

#: The explicit switch that lets ``gpus: N > 1`` run N CPU processes (gloo) on a machine without
#: the GPUs: for testing the multi-process path, never for real training.
CPU_PROCESSES_ENV = "VRAG_TRAINER_CPU_PROCESSES"


class LaunchRefused(TrainLaunchError):
    """The run cannot start as asked (its folder, the machine): bad input, nothing was started."""


@dataclass(frozen=True)
class LaunchPlan:
    """What to run under the supervisor: ``argv`` on ``run`` (``what`` names it for a person)."""

    run: TrainRun
    argv: list[str]
    what: str
    processes: int = 1
    config_path: Path | None = None


# ---- the fields that decide the command ---------------------------------------------------------
def verl_command(config: str | os.PathLike[str] = "CONFIG", out: str | os.PathLike[str] = "RUN") -> str:
    """The command that prepares a verl (Ray) run: what ``engine: verl`` asks for."""
    return f"python -m vrag_trainer verl --config {config} --out {out} (in the trainer environment)"


def _cpu_processes_allowed() -> bool:
    return os.environ.get(CPU_PROCESSES_ENV, "") not in ("", "0")


def _visible_gpus(report: GPUReport) -> int:
    """GPUs the trainer may use: NVML's list, narrowed by ``CUDA_VISIBLE_DEVICES`` when set."""
    n = len(report.gpus)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        n = min(n, len([v for v in visible.split(",") if v.strip() and v.strip() != "-1"]))
    return n


def process_count(cfg: TrainConfig, report: GPUReport) -> tuple[int, bool]:
    """``(processes, on_cpu)`` the run takes on this machine; :class:`ConfigError` naming ``gpus``
    (with both counts) when the machine cannot give what it asks."""
    n_gpus = _visible_gpus(report)
    cpu = cfg.device == "cpu" or (cfg.device == "auto" and n_gpus == 0)
    if cfg.device == "cuda" and n_gpus == 0:
        raise ConfigError(
            "device", f"cuda was asked for but no GPU is visible ({report.error or 'none found'})"
        )
    if cfg.gpus <= 1:
        return (1 if cpu or cfg.gpus == 1 else max(1, n_gpus)), cpu
    if cpu:
        if _cpu_processes_allowed():
            return cfg.gpus, True
        where = "device is cpu" if cfg.device == "cpu" else "this machine has no GPU (0 found)"
        raise ConfigError(
            "gpus",
            f"{cfg.gpus} processes were asked for but {where}; set gpus to 0 or 1 "
            f"(several CPU processes only for testing, with {CPU_PROCESSES_ENV}=1)",
        )
    if cfg.gpus > n_gpus:
        raise ConfigError(
            "gpus",
            f"{cfg.gpus} GPUs were asked for but this machine has {n_gpus}; set gpus to {n_gpus} or fewer",
        )
    return cfg.gpus, False


def check_fields(cfg: TrainConfig, report: GPUReport | None = None) -> None:
    """Refuse, by name, a field this command would not act on (:class:`ConfigError`).
    ``report`` None: the machine is not checked (the form, before the GPUs are probed)."""
    if cfg.engine == "verl":
        raise ConfigError(
            "engine",
            f"verl runs on a Ray cluster, not from 'train {cfg.algorithm}'; prepare its bundle with: "
            f"{verl_command()}, or set engine to trl",
        )
    if report is not None:
        process_count(cfg, report)


def check_warm_start(cfg: TrainConfig) -> InitSource | None:
    """Refuse (:class:`ConfigError`) a warm start that cannot work, before anything is written:
    ``init_from`` naming weights of another architecture than ``model`` (both named), or an SFT
    run with nothing to train on (an export without an assistant turn, a dataset without answers).
    Returns what ``init_from`` names (None: the base model itself)."""
    from vrag_desktop.core.paths import resolve_data_dir
    from vrag_desktop.core.training.sft import sft_source_problem
    from vrag_desktop.core.training.warmstart import check_init_from

    start = check_init_from(cfg)
    problem = sft_source_problem(cfg, resolve_data_dir(cfg.data_dir or None))
    if problem is not None:
        field, _, why = problem.partition(": ")
        raise ConfigError(field if why else "dataset", why or problem)
    return start


def check_memory(cfg: TrainConfig, report: GPUReport) -> None:
    """Refuse (:class:`LaunchRefused`) a run whose estimated peak does not fit the GPU even when
    nothing else runs on it, with the estimate, the GPU and what to change
    (:mod:`vrag_desktop.core.training.memory`). A model that cannot be estimated (a hub id not yet
    downloaded) is not refused; ``VRAG_TRAINER_SKIP_MEMORY_CHECK=1`` skips the check."""
    from vrag_desktop.core.training.memory import SKIP_CHECK_ENV, memory_estimate

    if os.environ.get(SKIP_CHECK_ENV, "") not in ("", "0") or not report.gpus or cfg.device == "cpu":
        return
    est = memory_estimate(cfg.model, cfg, report)
    if est.refusal is not None:
        raise LaunchRefused(est.refusal)


def check_rollout_server(
    cfg: TrainConfig, data_dir: str | os.PathLike[str], *, api_key: str | None = None
) -> str | None:
    """Refuse (:class:`LaunchRefused`) a ``vllm_mode: app_server`` run whose rollout server at
    ``vllm_url`` is not there or lacks a flag the run needs, in the New-run dialog's words plus the
    command that fixes it; returns a warning to say once (a server started by hand: its flags
    cannot be checked), None otherwise. ``api_key``: the one the trainer will send (default
    ``$VLLM_API_KEY``, as the trainer reads it). For the command line: the app's dialog checks
    its own server (:mod:`vrag_desktop.core.training.rollout_server`)."""
    from vrag_desktop.core.training.rollout_server import check_app_server

    key = api_key if api_key is not None else os.environ.get("VLLM_API_KEY") or None
    found = check_app_server(cfg, data_dir, api_key=key)
    if found.problem is not None:
        raise LaunchRefused(found.problem)
    return found.warning


def _free_port() -> int:
    """A loopback port for the processes' rendezvous (29500, accelerate's default, may be taken by
    another run)."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command(
    python: str | os.PathLike[str],
    subcommand: str,
    *,
    processes: int = 1,
    port: int | None = None,
    **kw: str | os.PathLike[str] | None,
) -> list[str]:
    """The trainer's argv: ``python -m vrag_trainer …`` for one process, else the same module
    under ``python -m accelerate.commands.launch --multi_gpu --num_processes N`` (DDP; on the CPU
    the trainer picks gloo). ``kw``: ``config``, ``run``, ``out`` as :func:`trainer_argv` takes."""
    argv = trainer_argv(python, subcommand, **kw)  # type: ignore[arg-type]
    if processes <= 1:
        return argv
    head = [
        str(python), "-m", "accelerate.commands.launch",
        "--multi_gpu", "--num_processes", str(processes), "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(port if port is not None else _free_port()),
    ]  # fmt: skip
    return [*head, *argv[1:]]  # argv[1:] = -m vrag_trainer <subcommand> …


def _report(report: GPUReport | None) -> GPUReport:
    if report is not None:
        return report
    from vrag_desktop.core.runtime.gpu import detect_gpus

    return detect_gpus()


# ---- the three ways a trainer starts --------------------------------------------------------------
def new_run(
    cfg: TrainConfig,
    run_dir: str | os.PathLike[str],
    python: str | os.PathLike[str],
    *,
    gpus: GPUReport | None = None,
) -> LaunchPlan:
    """Validate ``cfg`` for a new run in ``run_dir``, write ``<run>/launch-config.json`` and return
    the command. Refusals: :class:`ConfigError` (a field, by name) or :class:`LaunchRefused` (the
    folder); nothing is left behind — a folder made here is removed if the write fails."""
    check_fields(cfg)
    check_warm_start(cfg)
    report = _report(gpus)
    processes, _on_cpu = process_count(cfg, report)
    check_memory(cfg, report)
    root = Path(run_dir).expanduser()
    problem = output_dir_problem(root)
    if problem is not None:
        raise LaunchRefused(problem)
    try:
        TrainRun.check_free(root)
    except TrainRunError as exc:
        raise LaunchRefused(str(exc)) from exc
    made = [p for p in (root, *root.parents) if not p.exists()]
    effective = root / LAUNCH_CONFIG
    try:
        effective = write_launch_config(cfg, root)
    except OSError as exc:
        for p in made:  # deepest first; only the empty folders made here
            with contextlib.suppress(OSError):
                p.rmdir()
        raise LaunchRefused(write_error_message(exc, exc.filename or effective)) from exc
    argv = command(python, cfg.algorithm, processes=processes, config=effective, run=root)
    what = f"{cfg.algorithm.upper()} training" + (f" ({processes} processes)" if processes > 1 else "")
    return LaunchPlan(TrainRun(root), argv, what, processes, effective)


def resume_run(
    run: TrainRun,
    python: str | os.PathLike[str],
    *,
    config: str | os.PathLike[str] | None = None,
    gpus: GPUReport | None = None,
) -> LaunchPlan:
    """Resume ``run`` with as many processes as it was started with (its config's ``gpus``);
    ``config``: a changed config, which only resume-safe fields may change (the trainer checks)."""
    try:
        cfg = run.config()
    except TrainRunError as exc:
        raise LaunchRefused(str(exc)) from exc
    processes, _on_cpu = process_count(cfg, _report(gpus))
    argv = command(python, "resume", processes=processes, run=run.root, config=config)
    what = "Training (resumed)" + (f" ({processes} processes)" if processes > 1 else "")
    return LaunchPlan(run, argv, what, processes)


def export_run(
    run: TrainRun,
    python: str | os.PathLike[str],
    *,
    out: str | os.PathLike[str] | None = None,
    best: bool = False,
) -> LaunchPlan:
    """Export the last complete checkpoint (one process: it only copies files); ``best``: what
    :func:`~vrag_desktop.core.training.validation.best_choice` names (the best checkpoint, or the
    warm start's weights when no checkpoint beat them), refused (:class:`LaunchRefused`, saying why)
    only when that is nothing."""
    what = "Export"
    if best:
        from vrag_desktop.core.training.validation import best_choice

        choice = best_choice(run)
        if not choice.exportable:
            raise LaunchRefused(choice.reason)
        what = (
            "Export (warm start's weights)" if choice.source == "warm_start" else "Export (best checkpoint)"
        )
    argv = trainer_argv(python, "export", run=run.root, out=out, best=best)
    return LaunchPlan(run, argv, what)
