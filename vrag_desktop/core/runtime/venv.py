"""Build a separate virtualenv as a list of commands, run as a cancellable generator of progress lines.

Why shared: vLLM and the trainer each need their own environment (their pins clash with the app's),
and both must create it the same way: every step streamed line by line to a terminal or a panel,
cancellable (the running pip is killed with its process group), bounded by a timeout, a failure
reported with pip's last lines, and a marker file written only after the final check passed, so a
later call reuses a finished environment and never trusts a half-made one.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrag_desktop.core.progress import Cancelled, CancelToken
from vrag_desktop.core.runtime.proctree import sanitized_env

__all__ = [
    "EnvCreateError",
    "Step",
    "build_venv",
    "marker_ready",
    "pip_env",
    "run_step",
    "run_streaming",
    "venv_python",
    "venv_uv",
]


class EnvCreateError(RuntimeError):
    """A step of the environment creation failed; the message ends with pip's last lines."""


@dataclass(frozen=True)
class Step:
    """One command of an environment build: ``title`` is the progress line shown before it runs,
    ``failure`` the first line of the error if it exits non-zero."""

    title: str
    argv: tuple[str, ...]
    failure: str
    timeout: float = 3600.0

    @classmethod
    def new_venv(cls, path: Path, base: str, uv: str | None = None) -> Step:
        """Every build's first step: ``uv venv --seed`` with ``base`` when ``uv`` is given (faster;
        pip is seeded from uv's cache or PyPI), else ``base -m venv path``."""
        if uv:
            return cls(
                f"Creating virtualenv {path} (uv)",
                (uv, "venv", "--seed", "--python", base, str(path)),
                "Could not create the virtualenv with uv",
                300.0,
            )
        return cls(
            f"Creating virtualenv {path}",
            (base, "-m", "venv", str(path)),
            "Could not create the virtualenv (on Debian/Ubuntu install python3-venv)",
            300.0,
        )

    @classmethod
    def import_check(cls, what: str, python: str, code: str, *argv: str) -> Step:
        """Every build's last step: the new interpreter runs ``code`` (imports what was installed),
        so the marker is written only for an environment that works."""
        return cls(
            f"Checking that {what} imports",
            (python, "-c", code, *argv),
            f"The environment was made but {what} does not import",
            900.0,
        )


def venv_python(path: str | os.PathLike[str]) -> Path:
    path = Path(path).expanduser()
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def marker_ready(path: str | os.PathLike[str], marker: str) -> bool:
    """True if a build finished at ``path`` (its marker is written last) and the interpreter is there."""
    return (Path(path).expanduser() / marker).is_file() and venv_python(path).exists()


def venv_uv() -> str | None:
    """uv to create environments with, where it is here (the bundle ships it) and the person set no
    pip index of their own (``uv venv --seed`` fetches pip from PyPI, not from pip's settings);
    None: ``python -m venv``. ``VRAG_VENV_UV=0`` turns it off."""
    if os.environ.get("VRAG_VENV_UV") == "0":
        return None
    from vrag_desktop.core.runtime.base_python import uv_binary
    from vrag_desktop.core.runtime.lockfile import user_index_settings

    uv = uv_binary()
    return str(uv) if uv is not None and not user_index_settings() else None


def pip_env() -> dict[str, str]:
    """The environment pip runs in: quiet, non-interactive, and blind to the caller's venv."""
    return sanitized_env(
        {
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "VIRTUAL_ENV": None,
            "PYTHONHOME": None,
            "PYTHONPATH": None,
        }
    )


def build_venv(
    path: str | os.PathLike[str],
    steps: Sequence[Step],
    *,
    marker: str,
    record: Mapping[str, Any] | Callable[[], Mapping[str, Any]],
    label: str,
    cancel: CancelToken | None = None,
    force: bool = False,
    env: dict[str, str] | None = None,
) -> Generator[str, None, Path]:
    """Run ``steps`` in order, yielding ``[i/n] title`` and each command's output lines; then
    write ``marker`` (JSON: ``record``, or what it returns after the steps, plus the time taken).
    A ready environment is reused unless ``force``. Returns the venv's interpreter. Raises
    :class:`EnvCreateError`, ``Cancelled`` or ``TimeoutError``; closing the generator kills the
    running command."""
    path = Path(path).expanduser()
    python = venv_python(path)
    if marker_ready(path, marker) and not force:
        yield f"{label} already present at {path}"
        return python
    (path / marker).unlink(missing_ok=True)
    env = pip_env() if env is None else env
    started = time.monotonic()
    for i, step in enumerate(steps, 1):
        yield f"[{i}/{len(steps)}] {step.title}"
        yield from run_step(step.argv, env, cancel, step.timeout, step.failure)
    seconds = round(time.monotonic() - started, 1)
    data = {
        **(record() if callable(record) else record),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "seconds": seconds,
    }
    (path / marker).write_text(json.dumps(data, indent=1), encoding="utf-8")
    yield f"{label} ready at {path} ({seconds:.0f} s)"
    return python


def run_step(
    argv: Sequence[str], env: dict[str, str], cancel: CancelToken | None, timeout: float, failure: str
) -> Generator[str, None, None]:
    """Run one command, yielding its lines; a non-zero exit raises :class:`EnvCreateError` with
    the last 20 lines (pip's reason is at the end)."""
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
    """Stop pip and whatever it started with the project's one process-tree stop."""
    from vrag_desktop.core.runtime.proctree import stop_tree

    stop_tree(proc.pid, pgid=proc.pid if os.name == "posix" else None, grace=5.0, reap=proc.poll)
