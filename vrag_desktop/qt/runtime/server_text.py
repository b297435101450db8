"""Words for the local server and the GPU: pure functions of the core's state, no widgets.

Why apart from the widgets: the status bar, the runtime panel and the tests all need the same
sentences, and pure functions are testable without a window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM
from vrag_desktop.core.runtime.exits import ProcessStatus  # not the supervisor: psutil & co. (cold start)
from vrag_desktop.qt.runtime.style import BAD, MUTED, OK, WARN

if TYPE_CHECKING:
    from vrag_desktop.core.runtime.gpu import GPUReport
    from vrag_desktop.core.runtime.supervisor import ExitInfo

KIND_WORDS = {
    "oom": "out of GPU memory",
    "unsupported_arch": "unsupported model",
    "port_in_use": "port in use",
    "model_not_found": "model not found",
    "vllm_missing": "vLLM not installed",
    "broken_env": "broken vLLM environment",
    "killed": "killed",
    "timeout": "not ready in time",
    "spawn_failed": "could not launch",
    "already_running": "already running",
    "other": "error",
}
S = ProcessStatus


def _short_gpu_name(name: str) -> str:
    return name.removeprefix("NVIDIA ").strip() or name


def gpu_badge(report: GPUReport | None) -> str:
    """Status-bar text: ``CPU only``, ``GPU: H100 80GB HBM3 (80 GiB)`` or ``2× GPU: …``."""
    if report is None:
        return "GPU: checking…"
    if not report.gpus:
        return "CPU only"
    g = report.gpus[0]
    count = f"{len(report.gpus)}× " if len(report.gpus) > 1 else ""
    return f"{count}GPU: {_short_gpu_name(g.name)} ({g.total_gib:.0f} GiB)"


def gpu_lines(report: GPUReport) -> list[str]:
    """One line per GPU, or why there is none."""
    if not report.gpus:
        return [f"CPU only — no NVIDIA GPU detected ({report.error or 'none found'})"]
    return [f"GPU {g.index}: {g.name}, {g.total_gib:.0f} GiB, {g.free_gib:.1f} GiB free" for g in report.gpus]


def _first_paragraph(message: str) -> str:
    return message.split("\nLast output:")[0].strip()


NONE_CHOSEN = "none chosen"  # the status bar's words while no model is chosen


def model_status(active: str | None, state: str = "stopped", server_shown: bool = False) -> str:
    """The status bar's words after ``Model:``: ``Local vLLM · ready`` when the local profile is
    active, else the current model's name, or that none is chosen, with the local server's ``state``
    when ``server_shown`` (it runs, or crashed). The window says it before the Runtime panel is made
    (no server started yet), the panel once it is."""
    active = active or NONE_CHOSEN
    if active == LOCAL_VLLM:
        return f"{LOCAL_VLLM} · {state}"
    return active + (f" · vLLM: {state}" if server_shown else "")


#: The titles of the messages that say the app's vLLM server is not serving: true until it starts
#: or the person picks another model, then withdrawn (the notification bar takes them down).
NOT_SERVING_TITLES = ("vLLM could not start", "vLLM failed to start", "vLLM stopped unexpectedly")


def server_state_text(
    status: ProcessStatus,
    exit_info: ExitInfo | None,
    base_url: str | None,
    launch_error: tuple[str, str] | None = None,
    *,
    stopping: bool = False,
) -> tuple[str, str, str]:
    """(headline, detail, tone) for the server's state (the tone: a theme role)."""
    if launch_error is not None and not status.running:
        kind, message = launch_error
        return f"Could not start: {KIND_WORDS.get(kind, kind)}", message, BAD
    if stopping and status in (S.STARTING, S.READY, S.STOPPING, S.STOPPED):
        return "Stopping…", "", WARN
    if status is S.STARTING:
        return "Starting…", "Loading the model; large models take minutes.", WARN
    if status is S.READY:
        return "Ready", f"Serving at {base_url}", OK
    if status is S.STOPPING:
        return "Stopping…", "", WARN
    if status is S.CRASHED and exit_info is not None:
        return (
            f"Crashed: {KIND_WORDS.get(exit_info.kind, exit_info.kind)}",
            _first_paragraph(exit_info.message),
            BAD,
        )
    if status is S.EXITED and exit_info is not None and exit_info.kind != "stopped":
        return f"Exited (code {exit_info.returncode})", _first_paragraph(exit_info.message), MUTED
    if status is S.EXITED:
        return "Stopped", "", MUTED
    return "Stopped", "Not running.", MUTED
