"""The Models view's words: a model's state, its sizes, a download's progress line, a fit's tooltip.

Why apart from the widgets: these are the sentences a person reads, tested without a window, and
the same for every row (no Qt here).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from vrag_desktop.core.models.catalogue import human_bytes

if TYPE_CHECKING:
    from vrag_desktop.core.models import DownloadProgress, Fit, Machine, ModelRow

KIND_TEXT = {"answer": "Answer model", "embedder": "Embedder", "reranker": "Reranker", "unknown": "Model"}
#: The theme colour name (``QLabel[chip=…]``) of each verdict.
VERDICT_CHIP = {"fits": "ok", "tight": "warn", "does not fit": "error"}
VERDICT_TEXT = {"fits": "Fits this machine", "tight": "Tight fit", "does not fit": "Does not fit"}


def rate_text(bytes_per_s: float) -> str:
    return f"{human_bytes(bytes_per_s)}/s" if bytes_per_s > 0 else ""


def eta_text(seconds: float | None) -> str:
    """``40 s left``, ``5 min left``, ``1 h 20 min left`` ("" when unknown)."""
    if seconds is None or seconds < 0 or seconds != seconds:  # NaN
        return ""
    s = int(seconds + 0.5)
    if s < 60:
        return f"{s} s left"
    if s < 3600:
        return f"{(s + 30) // 60} min left"
    h, m = divmod((s + 30) // 60, 60)
    return f"{h} h {m} min left" if m else f"{h} h left"


def progress_text(p: DownloadProgress) -> str:
    """One line under a row's bar: bytes, speed, time left, current file (or what it waits for)."""
    if p.phase in ("resolve", "wait"):
        return p.message
    if p.phase == "done":
        return p.message or "Done"
    parts = [f"{human_bytes(p.done)} of {human_bytes(p.total)}"]
    if p.phase == "verify":
        parts.append(f"checking {p.file}")
    else:
        parts += [t for t in (rate_text(p.rate), eta_text(p.eta)) if t]
        if p.file:
            parts.append(p.file)
    if p.files_total > 1:
        parts.append(f"file {min(p.files_done + 1, p.files_total)} of {p.files_total}")
    return " · ".join(parts)


def size_text(row: ModelRow) -> str:
    """The download size, ``~`` when the catalogue estimated it (sizes from the hub are exact)."""
    if not row.download_bytes:
        return "size unknown until the download starts"
    return ("~" if row.approximate else "") + human_bytes(row.download_bytes) + " download"


def state_text(row: ModelRow) -> str:
    """Where the model stands on this machine, in a few words."""
    if row.state == "builtin":
        return "Built in"
    if row.state == "downloaded":
        return f"Downloaded · {human_bytes(row.size_on_disk)} on disk"
    if row.state == "local":
        return f"Your folder · {human_bytes(row.size_on_disk)}"
    if row.state == "partial" and row.partial is not None:
        have, total = row.partial.have_bytes, row.partial.total_bytes
        of = f" of {human_bytes(total)}" if total else ""
        return f"Paused · {human_bytes(have)}{of} kept"
    if row.state == "missing":
        return "Folder missing"
    return "Not downloaded"


def fit_tooltip(fit: Fit) -> str:
    """The verdict's reasons, one a line (HTML, so long reasons wrap)."""
    where = {"gpu": "on the GPU (vLLM)", "cpu": "on the CPU", "none": ""}.get(fit.device, "")
    head = VERDICT_TEXT.get(fit.verdict.value, fit.verdict.value) + (f" — runs {where}" if where else "")
    lines = [f"<b>{html.escape(head)}</b>"] + [f"• {html.escape(r)}" for r in fit.reasons]
    if fit.max_model_len:
        lines.append(f"• longest context here: {fit.max_model_len:,} tokens")
    return "<br>".join(lines)


def machine_text(machine: Machine) -> str:
    """``This machine: …; 23.5 GiB RAM; 76.3 GB free for models``."""
    gpus = machine.gpus.gpus
    gpu = ", ".join(f"{g.name} ({g.total_bytes / 1024**3:.0f} GiB)" for g in gpus) or "no NVIDIA GPU"
    return (
        f"This machine: {gpu}; {machine.ram_total / 1024**3:.1f} GiB RAM; "
        f"{human_bytes(machine.disk_free)} free for models"
    )


__all__ = [
    "KIND_TEXT",
    "VERDICT_CHIP",
    "VERDICT_TEXT",
    "eta_text",
    "fit_tooltip",
    "machine_text",
    "progress_text",
    "rate_text",
    "size_text",
    "state_text",
]
