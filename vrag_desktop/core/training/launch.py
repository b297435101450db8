"""Launch the trainer as a supervised child process in its own environment, stop it, find it again.

Why a child process: the trainer needs TRL, accelerate and (on a GPU) a vLLM whose pins clash with
the app's, so it runs ``python -m vrag_trainer`` with the trainer env's interpreter
(:mod:`vrag_desktop.core.runtime.trainer_env`), under the same
:class:`~vrag_desktop.core.runtime.supervisor.ProcessSupervisor` as vLLM: own process group, output
streamed to ``<run>/train.log``, recorded in ``<run>/process.json`` while it lives (the trainer owns
``state.json``), so ``train status``/``train stop`` from another terminal, or the app after a
restart, find it. A stop is clean first: the ``STOP`` file plus SIGTERM to the trainer alone (it
ends at the next step boundary and exits 3), then the whole tree is killed after a grace period.

The trainer's module CLI: ``grpo|ggpo|sft --config FILE [--run DIR]``, ``resume RUN [--config FILE]``,
``export RUN [--out DIR]``; exit 0 finished, 3 stopped on request, 2 bad config or input.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vrag_desktop.core.runtime.spec import ProcessSpec
from vrag_desktop.core.runtime.state import RecordedProcess, StateFile, check_state, recorded_process
from vrag_desktop.core.training.rundir import TrainRun

if TYPE_CHECKING:
    from vrag_desktop.core.runtime.supervisor import ProcessSupervisor

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_OK",
    "EXIT_STOPPED",
    "PROCESS_STATE",
    "TrainLaunchError",
    "TrainerEnvMissing",
    "argv_processes",
    "ask_to_stop",
    "classify_trainer_exit",
    "find_running",
    "outcome",
    "process_state",
    "resolve_trainer_python",
    "signal_trainer",
    "start",
    "stop",
    "train_spec",
    "trainer_argv",
]

EXIT_OK, EXIT_BAD_INPUT, EXIT_STOPPED = 0, 2, 3
PROCESS_STATE = "process.json"
COMMANDS = ("grpo", "ggpo", "sft", "resume", "export")
ENV_COMMAND = "vrag-desktop train env"


class TrainLaunchError(RuntimeError):
    """The trainer cannot be launched (already running, no interpreter…); the message says why."""


class TrainerEnvMissing(TrainLaunchError):
    """No trainer environment yet; the message names the command that makes one."""


def process_state(run: TrainRun) -> StateFile:
    """The supervisor's record of the trainer process (not the run's ``state.json``)."""
    return StateFile(run.root / PROCESS_STATE)


def resolve_trainer_python(default_env: str | os.PathLike[str] | None = None) -> Path:
    """The trainer env's interpreter (``$VRAG_TRAINER_PYTHON``, the env at ``default_env``, a
    checkout's ``.venv-trainer``), or :class:`TrainerEnvMissing` saying how to make one."""
    from vrag_desktop.core.runtime.trainer_env import PYTHON_ENV, find_trainer_python

    python = find_trainer_python(default_env)
    if python is None:
        where = f" at {default_env}" if default_env else ""
        raise TrainerEnvMissing(
            f"The trainer environment does not exist{where}. Create it with: {ENV_COMMAND} "
            f"(or set {PYTHON_ENV} to a Python that has vrag_trainer installed)."
        )
    if not python.exists():
        raise TrainerEnvMissing(f"{PYTHON_ENV} names {python}, which does not exist.")
    return python


def trainer_argv(
    python: str | os.PathLike[str],
    command: str,
    *,
    run: str | os.PathLike[str] | None = None,
    config: str | os.PathLike[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    best: bool = False,
) -> list[str]:
    """``[python, -m, vrag_trainer, ...]`` for one of the trainer's subcommands (``best``: export
    the best validation's checkpoint)."""
    if command not in COMMANDS:
        raise ValueError(f"unknown trainer command {command!r}")
    argv = [str(python), "-m", "vrag_trainer", command]
    if command in ("grpo", "ggpo", "sft"):
        if config is None:
            raise ValueError(f"{command} needs a config file")
        argv += ["--config", str(config)]
        if run is not None:
            argv += ["--run", str(run)]
        return argv
    if run is None:
        raise ValueError(f"{command} needs the run directory")
    argv.append(str(run))
    if command == "resume" and config is not None:
        argv += ["--config", str(config)]
    if command == "export" and out is not None:
        argv += ["--out", str(out)]
    if command == "export" and best:
        argv.append("--best")
    return argv


def classify_trainer_exit(lines: Sequence[str], returncode: int | None) -> tuple[str, str]:
    """The trainer's exit codes in words (3 and 2 are answers, not crashes)."""
    from vrag_desktop.core.runtime.exits import default_classifier, tail_text

    root = _root_cause(lines) if returncode not in (None, EXIT_OK) else None
    if root is not None:  # several processes: the launcher exits 1, its report names the first exit
        rank, code = root
        if code == EXIT_STOPPED:
            return "stopped", "stopped on request at a step boundary (every process)"
        if code < 0:
            return "killed", (
                f"trainer process {rank} was killed (signal {-code}); the others were stopped. "
                "Resume goes on from the last complete checkpoint"
            )
        returncode = code
    if returncode == EXIT_STOPPED:
        return "stopped", "stopped on request at a step boundary"
    if returncode == EXIT_BAD_INPUT:
        last = [ln for ln in lines if ln.strip()]
        return "bad_input", "refused its config or input" + (f": {last[-1].strip()}" if last else "")
    text = "\n".join(lines[-200:])
    if "CUDA out of memory" in text or "OutOfMemoryError" in text:
        return "oom", "ran out of GPU memory (lower micro_batch_rows or the lengths)" + tail_text(lines)
    if "No module named vrag_trainer" in text or "No module named 'trl'" in text:
        return "broken_env", f"its environment lacks the trainer; recreate it: {ENV_COMMAND} --force"
    return default_classifier(lines, returncode)


_ROOT_CAUSE = re.compile(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.S)


def _root_cause(lines: Sequence[str]) -> tuple[int, int] | None:
    """``(rank, exit code)`` of the first process to end, from ``accelerate launch``'s report."""
    m = _ROOT_CAUSE.search("\n".join(lines[-80:]))
    return (int(m.group(1)), int(m.group(2))) if m else None


def outcome(returncode: int | None, run: TrainRun | None = None) -> str:
    """``finished``, ``stopped``, ``bad_input`` or ``failed`` for a trainer's exit code. With
    ``run``: a multi-process run's launcher (``accelerate launch``) turns any process's non-zero
    exit (3 too) into 1, so the status rank 0 recorded in ``state.json`` decides whether it stopped."""
    if run is not None and returncode not in (None, EXIT_OK, EXIT_STOPPED, EXIT_BAD_INPUT):
        state = run.state()
        if int(state.get("processes") or 1) > 1 and state.get("status") == "stopped":
            return "stopped"
    return {EXIT_OK: "finished", EXIT_STOPPED: "stopped", EXIT_BAD_INPUT: "bad_input"}.get(
        returncode if returncode is not None else -1, "failed"
    )


def argv_processes(argv: Sequence[str]) -> int:
    """How many trainer processes ``argv`` starts (``--num_processes`` of ``accelerate launch``)."""
    args = [str(a) for a in argv]
    if "accelerate.commands.launch" not in args:
        return 1
    for i, a in enumerate(args[:-1]):
        if a == "--num_processes":
            return int(args[i + 1])
    return 1


#: The trainer's CPU niceness (it lowers its own priority at start; a spawn option would make
#: Python fork the app instead of vfork, pausing it for as long as copying its page tables takes).
TRAINER_NICE_ENV = "VRAG_TRAINER_NICE"
TRAINER_NICE = 10


def train_spec(
    run: TrainRun,
    argv: Sequence[str],
    *,
    env: Mapping[str, str | None] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    redact: Sequence[str] = (),
) -> ProcessSpec:
    """The supervised trainer: a job (exit 0 is a normal end), logged to ``train.log``, recorded
    in ``process.json``. ``env`` adds to the sanitised environment (e.g. ``CUDA_VISIBLE_DEVICES``)."""
    child_env: dict[str, str | None] = {
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "VRAG_TRAINER_LOG_CAPTURED": "1",  # the supervisor writes train.log: the trainer logs to stderr only
        # below the desktop's priority, as indexing is: the window stays responsive on a busy CPU
        # (set VRAG_TRAINER_NICE=0 in the app's environment for full priority)
        TRAINER_NICE_ENV: os.environ.get(TRAINER_NICE_ENV, str(TRAINER_NICE)),
        "VIRTUAL_ENV": None,
        "PYTHONHOME": None,
        "PYTHONPATH": None,
        **(env or {}),
    }
    return ProcessSpec(
        argv=[str(a) for a in argv],
        name="trainer",
        env=child_env,
        cwd=cwd,
        log_path=run.log_path,
        state_path=run.root / PROCESS_STATE,
        state_extra={
            "run": str(run.root),
            "subcommand": _subcommand(argv),
            "processes": argv_processes(argv),
        },
        kind="training",
        long_running=False,
        classifier=classify_trainer_exit,
        redact=redact,
    )


def find_running(run: TrainRun) -> RecordedProcess | None:
    """The trainer process working on ``run``, if one is alive (a stale record is removed)."""
    if not (run.root / PROCESS_STATE).exists():
        return None
    rec, _notes = check_state(process_state(run), name="trainer")
    return rec


async def start(
    run: TrainRun, argv: Sequence[str], *, mode: str = "app", **spec_kw: object
) -> ProcessSupervisor:
    """Start the trainer on ``run`` under a :class:`ProcessSupervisor` (bound to the running loop)
    and return it; refuses if a trainer already works on this run. The caller awaits
    ``supervisor.wait()`` and reads ``returncode`` (see :func:`outcome`)."""
    from vrag_desktop.core.runtime.supervisor import ProcessSupervisor

    run.root.mkdir(parents=True, exist_ok=True)
    with process_state(run).lock(timeout=10):
        live = find_running(run)
        if live is not None:
            raise TrainLaunchError(f"A trainer is already working on {run.root} (pid {live.pid}).")
        run.clear_stop()  # a STOP left by an earlier run must not end this one at its first step
        sup = ProcessSupervisor(train_spec(run, argv, **spec_kw), mode=mode)  # type: ignore[arg-type]
        await sup.start()
    return sup


def ask_to_stop(run: TrainRun, pid: int | None, processes: int = 1) -> None:
    """A clean stop at the next step boundary: the ``STOP`` file, and SIGTERM to a single trainer.
    Several processes read the file and agree on the step; a SIGTERM to their launcher would make
    it kill them after 30 s, mid-step."""
    run.request_stop()
    if pid is not None and processes <= 1:
        signal_trainer(pid)


def signal_trainer(pid: int, sig: int = signal.SIGTERM) -> bool:
    """Send ``sig`` to the trainer process alone (not its group: its data workers must not die
    mid-step); False if it is gone."""
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop(run: TrainRun, grace: float = 60.0, kill_timeout: float = 5.0) -> str:
    """Stop the trainer working on ``run`` from anywhere: write ``STOP``, SIGTERM the trainer,
    wait ``grace`` s for it to end at a step boundary, then kill its whole tree. Returns
    ``not_running``, ``stopped`` (it ended by itself) or ``killed``."""
    rec = find_running(run)
    if rec is None:
        return "not_running"
    alive = recorded_process(rec.state) is not None
    ask_to_stop(run, rec.pid if alive else None, int(rec.state.get("processes") or 1))
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and recorded_process(rec.state) is not None:
        time.sleep(0.1)
    if recorded_process(rec.state) is None:
        with contextlib.suppress(OSError):
            rec.stop(grace=1.0, kill_timeout=kill_timeout)  # workers it left; removes the record
        return "stopped"
    rec.stop(grace=0.0, kill_timeout=kill_timeout, reason=f"killed {grace:g} s after a stop request")
    return "killed"


def _subcommand(argv: Sequence[str]) -> str:
    args = [str(a) for a in argv]
    for i, a in enumerate(args[:-1]):
        if a == "vrag_trainer":
            return args[i + 1]
    return ""
