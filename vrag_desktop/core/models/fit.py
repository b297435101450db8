"""Does a model fit this machine? A verdict (fits / tight / does not fit) with its reasons, before
anything is downloaded or loaded.

Why here and in this shape: LM Studio's load guardrails and Jan's hardware page show that people
want the answer up front, with numbers; VRAG's own issue #8 (7B on 24 GB) is the failure to avoid.
The GPU probe and the vLLM memory estimate are the Runtime panel's (:mod:`core.runtime.gpu`); RAM
comes from psutil and disk from the models folder's file system.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from vrag_desktop.core.models.catalogue import (
    EMBEDDER_WORKSPACE,
    MIN_CONTEXT,
    SERVE_CONTEXT,
    CatalogueEntry,
    human_bytes,
)
from vrag_desktop.core.runtime.gpu import GiB, GPUInfo, GPUReport, MemoryEstimate

#: vLLM's default share of a GPU; a need above TIGHT_SHARE of what is available is "tight".
VLLM_GPU_SHARE = 0.9
TIGHT_SHARE = 0.85
#: Space kept free on top of a download (the file system's own needs, logs, an index being written).
DISK_MARGIN = 64 * 1024**2
#: Above this many parameters an answer model is too slow to run in-process on a CPU.
CPU_ANSWER_MAX_PARAMS = 5_000_000_000


class Verdict(str, Enum):
    FITS = "fits"
    TIGHT = "tight"
    NO = "does not fit"


_ORDER = {Verdict.FITS: 0, Verdict.TIGHT: 1, Verdict.NO: 2}


@dataclass(frozen=True)
class Machine:
    """What the verdicts are measured against; :func:`probe_machine` fills it in."""

    gpus: GPUReport
    ram_total: int
    ram_available: int
    disk_free: int
    disk_path: Path


@dataclass(frozen=True)
class Fit:
    """A verdict and why; ``device`` is where the model would run (``gpu``, ``cpu``, or ``none``);
    ``max_model_len`` the largest context vLLM could give an answer model here (None: not sized)."""

    verdict: Verdict
    reasons: tuple[str, ...]
    device: str = "none"
    max_model_len: int | None = None

    @property
    def summary(self) -> str:
        return f"{self.verdict.value}: {'; '.join(self.reasons)}" if self.reasons else self.verdict.value


def free_bytes(path: Path) -> int:
    """Free space on the file system that holds ``path`` (its nearest existing folder): the one
    place downloads ask, so a test can point it at a small real file system."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free


def probe_machine(models_dir: Path, gpus: GPUReport | None = None) -> Machine:
    """GPUs (NVML, never raises), RAM (psutil) and free disk under ``models_dir``."""
    import psutil

    from vrag_desktop.core.runtime.gpu import detect_gpus

    mem = psutil.virtual_memory()
    return Machine(
        gpus=detect_gpus() if gpus is None else gpus,
        ram_total=int(mem.total),
        ram_available=int(mem.available),
        disk_free=free_bytes(models_dir),
        disk_path=Path(models_dir),
    )


def _gib(n: float) -> str:
    return f"{n / GiB:.1f} GiB"


def _worst(a: Verdict, b: Verdict) -> Verdict:
    return a if _ORDER[a] >= _ORDER[b] else b


def fits(entry: CatalogueEntry, machine: Machine, *, downloaded: bool = False, have_bytes: int = 0) -> Fit:
    """The verdict for ``entry`` on ``machine``. ``downloaded``: the files are already here (no disk
    needed); ``have_bytes``: part of them is (a paused download)."""
    if entry.builtin:
        return Fit(Verdict.FITS, ("ships with the app; runs on the CPU",), "cpu")
    if entry.kind == "answer":
        run = _answer_fit(entry, machine)
    else:
        run = _reranker_fit(entry, machine) if entry.kind == "reranker" else _embedder_fit(entry, machine)
    if downloaded:
        return run
    disk_verdict, disk_reason = disk_fit(entry, machine, have_bytes)
    verdict = _worst(run.verdict, disk_verdict)
    reasons = (disk_reason, *run.reasons) if disk_verdict is not Verdict.FITS else (*run.reasons, disk_reason)
    return Fit(verdict, reasons, run.device, run.max_model_len)


def disk_fit(entry: CatalogueEntry, machine: Machine, have_bytes: int = 0) -> tuple[Verdict, str]:
    """The disk part of :func:`fits` alone: whether what is left to fetch fits the models folder's
    disk (the Models view refuses a download on NO before fetching anything)."""
    need = max(0, entry.download_bytes - have_bytes)
    where = f"{human_bytes(machine.disk_free)} free at {machine.disk_path}"
    if machine.disk_free < need + DISK_MARGIN:
        return Verdict.NO, f"the download needs {entry.size_text}; only {where}"
    if machine.disk_free < need * 1.1 + 4 * DISK_MARGIN:
        return Verdict.TIGHT, f"the download ({entry.size_text}) almost fills the disk: {where}"
    return Verdict.FITS, f"download {entry.size_text} ({human_bytes(machine.disk_free)} free)"


def _estimate(entry: CatalogueEntry, max_len: int | None, tp: int) -> MemoryEstimate | None:
    from vrag_desktop.core.runtime.gpu import estimate_vllm_memory

    source = entry.folder if entry.folder is not None else entry.config
    if source is None:
        return None
    try:
        return estimate_vllm_memory(source, max_len, "auto", tp, name=entry.id)
    except (OSError, KeyError, ValueError, TypeError):
        return None


def _answer_fit(entry: CatalogueEntry, machine: Machine) -> Fit:
    gpus = sorted(machine.gpus.gpus, key=lambda g: g.total_bytes, reverse=True)
    if not gpus:
        return _cpu_answer_fit(entry, machine)
    if _estimate(entry, SERVE_CONTEXT, 1) is None:
        return Fit(Verdict.TIGHT, ("its size is unknown until its config.json is read",), "gpu")
    best: Fit | None = None
    for tp in (n for n in (1, 2, 4, 8) if n <= len(gpus)):
        fit = _vllm_fit(entry, gpus[:tp], tp)
        if best is None or _ORDER[fit.verdict] < _ORDER[best.verdict]:
            best = fit
        if fit.verdict is Verdict.FITS:
            break
    assert best is not None
    return best


def _vllm_fit(entry: CatalogueEntry, gpus: list[GPUInfo], tp: int) -> Fit:
    est = _estimate(entry, None, tp)  # the model's own longest context
    assert est is not None
    context = min(SERVE_CONTEXT, est.max_model_len)
    budget = int(min(g.total_bytes for g in gpus) * VLLM_GPU_SHARE)
    need = (est.weight_bytes + est.kv_bytes_per_token * context) // tp + est.overhead_bytes
    where = (
        f"GPU {gpus[0].index} ({gpus[0].name}) has {_gib(gpus[0].total_bytes)}"
        if tp == 1
        else (f"over {tp} GPUs (tensor parallel), the smallest has {_gib(min(g.total_bytes for g in gpus))}")
    )
    per = " per GPU" if tp > 1 else ""
    longest = min(est.max_len_fitting(budget), est.max_model_len)
    reasons = [f"vLLM needs ~{_gib(need)}{per} at a {context // 1024}k context; {where}"]
    busy = min(g.free_bytes for g in gpus)
    if busy < min(budget, need):
        reasons.append(f"only {_gib(busy)} is free right now (other programs hold the rest)")
    if need <= budget * TIGHT_SHARE:
        return Fit(Verdict.FITS, tuple(reasons), "gpu", longest)
    if need <= budget:
        return Fit(Verdict.TIGHT, tuple(reasons), "gpu", longest)
    if longest >= MIN_CONTEXT:
        reasons.append(f"fits with a shorter context: max_model_len up to {longest}")
        return Fit(Verdict.TIGHT, tuple(reasons), "gpu", longest)
    weights = est.weight_bytes // tp + est.overhead_bytes
    if weights >= budget:
        reasons.append(f"the weights alone need ~{_gib(weights)}{per}: a quantised model or more GPUs")
    return Fit(Verdict.NO, tuple(reasons), "gpu", longest)


def _cpu_answer_fit(entry: CatalogueEntry, machine: Machine) -> Fit:
    need = entry.params * 4 + EMBEDDER_WORKSPACE  # float32 on the CPU
    head = "no NVIDIA GPU, so vLLM cannot serve it"
    if entry.params and entry.params <= CPU_ANSWER_MAX_PARAMS and need <= machine.ram_total:
        return Fit(
            Verdict.TIGHT,
            (
                f"{head}; it can run in-process on the CPU (slow): ~{_gib(need)} of {_gib(machine.ram_total)} RAM",
            ),
            "cpu",
        )
    extra = (
        f"; on the CPU it would need ~{_gib(need)} RAM ({_gib(machine.ram_total)} here)"
        if entry.params
        else ""
    )
    return Fit(Verdict.NO, (f"{head}{extra}: use a cloud or remote endpoint",), "none")


def _embedder_fit(entry: CatalogueEntry, machine: Machine) -> Fit:
    gpus = sorted(machine.gpus.gpus, key=lambda g: g.total_bytes, reverse=True)
    if gpus and entry.params:
        need = entry.params * 2 + EMBEDDER_WORKSPACE  # bf16 on a GPU
        gpu = gpus[0]
        text = f"~{_gib(need)} of GPU memory; GPU {gpu.index} ({gpu.name}) has {_gib(gpu.total_bytes)}"
        if need <= gpu.total_bytes * TIGHT_SHARE:
            return Fit(Verdict.FITS, (text,), "gpu")
        if need <= gpu.total_bytes:
            return Fit(Verdict.TIGHT, (text,), "gpu")
    if not entry.params:
        return Fit(Verdict.TIGHT, ("its size is unknown until its files are read",), "none")
    need = entry.params * 4 + EMBEDDER_WORKSPACE  # float32 on the CPU
    text = f"on the CPU (slower indexing): ~{_gib(need)} of {_gib(machine.ram_total)} RAM"
    if need <= machine.ram_total * 0.6:
        return Fit(Verdict.FITS, (text,), "cpu")
    if need <= machine.ram_total:
        return Fit(Verdict.TIGHT, (text,), "cpu")
    return Fit(Verdict.NO, (text,), "none")


def _reranker_fit(entry: CatalogueEntry, machine: Machine) -> Fit:
    """A reranker runs on the CPU beside search (core/search/rerank.py): its float32 weights in RAM."""
    if not entry.params:
        return Fit(Verdict.TIGHT, ("its size is unknown until its files are read",), "cpu")
    need = entry.params * 4
    text = f"runs on the CPU during search: ~{_gib(need)} of {_gib(machine.ram_total)} RAM"
    return Fit(Verdict.FITS if need <= machine.ram_total * 0.25 else Verdict.TIGHT, (text,), "cpu")
