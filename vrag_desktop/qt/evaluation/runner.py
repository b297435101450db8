"""Runs one evaluation at a time for the app: the core job (:mod:`vrag_desktop.core.eval.jobs`,
the same assembly the CLI uses) built and driven in a generator task, so loading the corpora and
the embedder, searching and asking never touch the GUI thread. Cancel keeps every finished item;
starting the same request again resumes the same folder."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from vrag_desktop.core.eval.jobs import EvalRequest, open_job
from vrag_desktop.core.progress import CancelToken, Progress
from vrag_desktop.qt.infra.controllers import SlotController
from vrag_desktop.qt.infra.tasks import run_generator

if TYPE_CHECKING:
    from vrag_desktop.qt.context import AppContext

__all__ = ["EvalRequest", "EvalRunner", "evaluation_work"]


def evaluation_work(
    ctx: AppContext, request: EvalRequest, token: CancelToken
) -> Generator[object, None, dict[str, Any]]:
    """On the worker thread: assemble the job (a ``Path`` is yielded first: the folder it writes),
    then drive it to its summary."""
    job = open_job(request, ctx.library, ctx.data_dir, ctx.profiles, reuse=ctx.embedder())
    try:
        yield job.folder
        return (yield from job.run(token))
    finally:
        job.close()


class EvalRunner(SlotController):
    """One evaluation at a time. Signals (GUI thread): ``started(folder)``, ``progress(Progress)``,
    ``ended(outcome, folder)`` with outcome ``done`` / ``cancelled`` / ``failed``."""

    started = Signal(str)
    progress = Signal(object)
    ended = Signal(str, str)

    def __init__(self, ctx: AppContext, parent: QObject | None = None) -> None:
        super().__init__(ctx, parent)
        self.folder = ""
        self.last: Progress | None = None

    def start(self, request: EvalRequest) -> None:
        if self.running:
            raise RuntimeError("an evaluation is already running; cancel it first")
        self.folder, self.last = request.out or "", None
        outcome = ["failed"]

        def news(value: object) -> None:
            if isinstance(value, Path):
                self.folder = str(value)
                self.started.emit(self.folder)
            elif isinstance(value, Progress):
                self.last = value
                self.progress.emit(value)

        def done(summary: Any) -> None:
            outcome[0] = "done" if summary and summary.get("complete") else "cancelled"

        def cancelled() -> None:
            outcome[0] = "cancelled"

        def end() -> None:
            self.ended.emit(outcome[0], self.folder)

        self.slot.start(
            run_generator,
            lambda token: evaluation_work(self.ctx, request, token),
            "evaluation",
            nice=5,
            on_progress=news,
            on_done=done,
            on_cancelled=cancelled,
            on_end=end,
            error_title="The evaluation failed",
        )

    def cancel(self) -> None:
        self.slot.cancel()

    def wait(self, timeout_s: float = 10.0) -> bool:
        return self.slot.wait(timeout_s)
