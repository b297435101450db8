"""A real app process that starts a supervised (fake) vLLM server and is then killed: what a
crash or ``kill -9`` of VRAG Desktop leaves behind."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from vrag_desktop.core.runtime.settings import app_state_path, runtime_dir
from vrag_desktop.core.runtime.vllm import pick_free_port

FAKE = Path(__file__).with_name("fake_vllm_server.py")
ROOT = Path(__file__).resolve().parents[1]

APP = """
import asyncio, sys, time
from vrag_desktop.core.runtime.vllm import VLLMConfig, VLLMServer

async def main():
    cfg = VLLMConfig(model="fake-model", served_model_name="fake", python=sys.executable,
                     port={port}, entrypoint=({fake!r}, "--fake-delay", "0.3", "--fake-grandchild"))
    server = VLLMServer(cfg, log_path={log!r}, state_path={state!r}, probe_interval=0.2)
    await server.start()
    print("READY", server.supervisor.pid, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def start_app_then_kill_it(data_dir: Path) -> tuple[int, int]:
    """A real app process starts a supervised server and is killed (no atexit, no cleanup).
    Returns the server's pid and its worker's."""
    state = app_state_path(data_dir)
    log = runtime_dir(data_dir) / "vllm-desktop.log"
    script = APP.format(port=pick_free_port(), fake=str(FAKE), log=str(log), state=str(state))
    app = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert app.stdout is not None
        line = app.stdout.readline().split()
        assert line[:1] == ["READY"], line
        pid = int(line[1])
        deadline = time.monotonic() + 10
        while not (m := re.search(r"EngineCore pid=(\d+)", log.read_text())):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        app.send_signal(signal.SIGKILL)  # "the app is killed"
        app.wait(10)
    return pid, int(m.group(1))
