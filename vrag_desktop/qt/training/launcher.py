"""The trainer processes this app started: launch, watch to the end, stop, leave running.

Why this shape: a training runs for hours under the supervisor (``core.training.launch.start``) on
the private asyncio loop, so the GUI never waits on it; its end comes back on the GUI thread as
``ended(root, outcome, message)`` with the exit classified by the trainer's classifier. A stop is
``launch.stop`` (STOP file and SIGTERM, then the tree after the grace period) in the pool, which
works as well for a run started by an earlier session or a terminal and found again through its
``process.json``. On quit, the person may leave runs going: they are then forgotten by the exit
hook that would kill them, and the next start finds them again.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from vrag_desktop.core.runtime.exits import ExitInfo
from vrag_desktop.core.training import launch
from vrag_desktop.core.training.rundir import TrainRun
from vrag_desktop.qt.infra.alive import if_alive
from vrag_desktop.qt.infra.tasks import Task, run_call, run_coroutine

log = logging.getLogger("vrag_desktop")

STOP_GRACE_S = 300.0  # a CPU step of a small model can take minutes; the tree is killed after this


def stopping_text(grace_s: float) -> str:
    """What a Stop says while it waits: in a person's words, not the process tree's."""
    wait = f"{grace_s / 60:.0f} minutes" if grace_s >= 120 else f"{grace_s:.0f} seconds"
    return (
        f"Stopping after the current step; a checkpoint is kept. If the step is not done within {wait}, "
        "the trainer is ended by force."
    )


def run_trainer_task(run: TrainRun, argv: list[str], pids: dict[Path, int]) -> Any:
    """The coroutine that starts the trainer and waits for its end (on the private loop)."""

    async def supervise() -> tuple[int | None, ExitInfo | None, bool]:
        sup = await launch.start(run, argv)
        if sup.pid is not None:
            pids[run.root] = sup.pid
        try:
            info = await sup.wait()
        finally:
            pids.pop(run.root, None)
        return sup.returncode, info, sup.stopped_elsewhere

    return supervise()


class TrainerProcesses(QObject):
    """Trainers started from this panel; see the module docstring."""

    started = Signal(str)  # run root
    ended = Signal(str, str, str)  # run root, outcome (finished/stopped/bad_input/failed), message
    stopDone = Signal(str, str)  # run root, how (stopped/killed/not_running)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.tasks: dict[Path, Task] = {}
        self.pids: dict[Path, int] = {}  # written on the loop thread, read here: plain dict ops
        self.stopping: set[Path] = set()
        self.grace_s = STOP_GRACE_S

    def is_ours(self, root: Path) -> bool:
        task = self.tasks.get(root)
        return task is not None and not task.done()

    def running(self) -> list[Path]:
        return [r for r in self.tasks if self.is_ours(r)]

    def launch(self, root: Path, argv: list[str], what: str) -> Task:
        """Start ``argv`` (a trainer subcommand) on the run at ``root``."""
        from vrag_desktop.core.runtime.logfile import rotate_log

        if self.is_ours(root):
            raise launch.TrainLaunchError(f"A trainer is already working on {root}.")
        run = TrainRun(root)
        run.root.mkdir(parents=True, exist_ok=True)
        rotate_log(run.log_path)
        task = run_coroutine(
            run_trainer_task(run, argv, self.pids),
            name=what,
            on_done=if_alive(self, lambda result: self._ended(root, result)),
            on_error=if_alive(self, lambda exc: self._failed(root, exc)),
            report=False,
        )
        self.tasks[root] = task
        self.started.emit(str(root))
        return task

    def _ended(self, root: Path, result: tuple[int | None, ExitInfo | None, bool]) -> None:
        rc, info, elsewhere = result
        self.stopping.discard(root)
        kind = launch.outcome(rc, TrainRun(root))
        # The exit code decides: a reader that found the record of an already-ended process removes
        # it, which the supervisor takes for a stop from elsewhere.
        if kind == "stopped":
            message = "Stopped after a complete step; Resume goes on from the last checkpoint."
        elif elsewhere and rc is not None and rc < 0:
            kind, message = "stopped", "Stopped from elsewhere (vrag-desktop train stop); resume goes on."
        elif kind == "finished":
            message = "Finished."
        else:
            message = info.message if info is not None else f"The trainer ended with exit code {rc}."
        self.ended.emit(str(root), kind, message)

    def _failed(self, root: Path, exc: BaseException) -> None:
        self.stopping.discard(root)
        self.ended.emit(str(root), "failed", str(exc) or type(exc).__name__)

    def stop(self, root: Path) -> Task:
        """Clean stop at the next step boundary, the tree killed after ``grace_s``."""
        self.stopping.add(root)
        return run_call(
            launch.stop,
            TrainRun(root),
            self.grace_s,
            name="Stop training",
            on_done=if_alive(self, lambda how: self._stopped(root, str(how))),
            on_error=if_alive(self, lambda _exc: self.stopping.discard(root)),
            error_title="Could not stop the training",
        )

    def _stopped(self, root: Path, how: str) -> None:
        if not self.is_ours(root):
            self.stopping.discard(root)
        self.stopDone.emit(str(root), how)

    def leave_running(self) -> list[Path]:
        """Let this session's trainers outlive the app (the exit hook would kill them)."""
        from vrag_desktop.core.runtime.proctree import forget

        left = []
        for root, pid in list(self.pids.items()):
            forget(pid)
            left.append(root)
        return left

    def stop_all(self, timeout_s: float, roots: list[Path]) -> None:
        """Stop the trainers of ``roots`` (quitting), at most ``timeout_s`` in all; blocks."""
        import time

        deadline = time.monotonic() + timeout_s
        for root in roots:
            try:
                launch.stop(TrainRun(root), grace=max(1.0, min(self.grace_s, deadline - time.monotonic())))
            except Exception as exc:  # quitting: say so in the log, never hang
                log.warning("could not stop the trainer of %s: %s", root, exc)
