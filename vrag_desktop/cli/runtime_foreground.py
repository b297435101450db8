"""``vrag-desktop runtime start --foreground``: supervise vLLM in this terminal until Ctrl-C.

Why apart from the background start: here the server is this process's child, under the core's
:class:`~vrag_desktop.core.runtime.supervisor.ProcessSupervisor` (it records the state file, so
``status`` and ``stop`` from another terminal work the same); this module only says what happens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vrag_desktop.cli.runtime import EXIT_INTERRUPTED, EXIT_OK, Paths, RuntimeCLIError, err
from vrag_desktop.cli.runtime_start import Interrupt, record_profile

if TYPE_CHECKING:
    import asyncio

    from vrag_desktop.core.runtime.vllm import VLLMServer


def run_foreground(paths: Paths, server: VLLMServer, lock: Any, *, save_key: bool = False) -> int:
    """Run until Ctrl-C or until it exits. Holds the start ``lock`` only until the server is
    recorded in its state file. The supervisor guards the server (``mode="foreground"``): if this
    command is killed outright, its watchdog stops the server's whole tree. ``save_key``: the
    server's key was given to this command and becomes the 'Local vLLM' profile's key."""
    import asyncio

    from vrag_desktop.core.runtime.exits import ProcessCrashed, ProcessStatus, ReadyTimeout
    from vrag_desktop.core.runtime.logfile import rotate_log
    from vrag_desktop.core.runtime.state import StateFile

    rotate_log(paths.log)
    cfg, sup = server.config, server.supervisor
    sup.on_line(err)
    result: dict[str, Any] = {"ready": False}
    err(f"Starting vLLM in the foreground (Ctrl-C stops it): {cfg.shell_command(server.port)}")
    err(f"Log: {paths.log}")

    async def release_when_recorded() -> None:
        while sup.pid is None and sup.status not in (ProcessStatus.CRASHED, ProcessStatus.EXITED):
            await asyncio.sleep(0.02)  # (STOPPED: start() has not spawned it yet)
        lock.release()

    async def serve(recorded: asyncio.Future[None]) -> int:
        try:
            await server.start()
            await recorded
            result["ready"] = True
            record_profile(paths, server.base_url, cfg.model_name, cfg.api_key if save_key else None)
            print(
                f"vLLM is ready at {server.base_url} (model '{cfg.model_name}', pid {sup.pid}). "
                "Press Ctrl-C to stop it.",
                flush=True,
            )
            info = await sup.wait()
        except (ProcessCrashed, ReadyTimeout) as exc:
            if isinstance(exc, ProcessCrashed) and sup.stopped_elsewhere:
                raise RuntimeCLIError(
                    "vLLM was stopped (vrag-desktop runtime stop) before it became ready."
                ) from None
            raise RuntimeCLIError(f"{str(exc).splitlines()[0]}\nFull log: {paths.log}") from None
        except asyncio.CancelledError:
            await server.stop(grace=10.0)
            raise
        if sup.stopped_elsewhere:
            err("vLLM was stopped (vrag-desktop runtime stop).")
            return EXIT_OK
        raise RuntimeCLIError(info.message if info else "vLLM exited")

    async def main() -> int:
        interrupted = Interrupt()
        recorded = asyncio.ensure_future(release_when_recorded())
        work = asyncio.ensure_future(serve(recorded))
        try:
            if interrupted.event is None:
                return await work
            if await interrupted.wait_or(work):
                return work.result()
            # Ctrl-C. Stop the server directly: even if the cancellation is lost, the supervisor
            # then ends the start (or the wait) on its own.
            err("\nStopping vLLM…")
            work.cancel()
            await server.stop(grace=10.0)
            await asyncio.wait({work}, timeout=15.0)
            if work.done() and not work.cancelled():
                work.exception()  # retrieved: the server was stopped as asked
            err("vLLM was stopped.")
            return EXIT_OK if result["ready"] else interrupted.exit_code
        finally:
            recorded.cancel()
            lock.release()

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:  # where the loop cannot take signal handlers
        if sup.pid is not None:
            StateFile(paths.state).remove(sup.pid)
        err("vLLM was stopped.")
        return EXIT_OK if result["ready"] else EXIT_INTERRUPTED
