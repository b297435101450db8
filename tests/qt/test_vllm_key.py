"""The app's local vLLM server and its API key: typed into the Local vLLM tab's key box (kept in the
keyring as the Local vLLM profile's key), handed to vLLM in its environment, never on its command
line nor in what the app shows or writes; the app's own client sends it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from doubles import MemoryKeyring

from vrag_desktop.core.endpoints.profiles import KEYRING_SERVICE, LOCAL_VLLM
from vrag_desktop.core.runtime.settings import ENTRYPOINT_ENV, app_log_path, app_state_path
from vrag_desktop.core.runtime.supervisor import ProcessStatus
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.runtime.runtime_panel import RuntimePanel

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads the server's /proc entries")

FAKE = Path(__file__).resolve().parents[1] / "fake_vllm_server.py"
KEY = "sk-app-vllm-key-0123456789"


@pytest.fixture
def panel(qtbot: Any, ctx: AppContext) -> Iterator[RuntimePanel]:
    p = RuntimePanel(ctx)
    qtbot.addWidget(p)
    yield p
    assert p.shutdown(10.0)


def test_the_key_box_key_reaches_vllm_by_environment_only(
    qtbot: Any,
    ctx: AppContext,
    panel: RuntimePanel,
    qt_isolation: MemoryKeyring,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.setenv(ENTRYPOINT_ENV, f"{FAKE} --fake-delay 0.2 --fake-echo-key")
    v = panel.vllm
    box = v.key_box
    box.key_edit.setText(KEY)
    box.save_key_button.click()
    qtbot.waitUntil(lambda: qt_isolation.store.get((KEYRING_SERVICE, LOCAL_VLLM)) == KEY, timeout=3000)
    qtbot.waitUntil(lambda: box.source_text() == "Key stored in the system keyring", timeout=3000)
    assert box.key_edit.text() == ""  # write-only: the key is never shown again

    v.model_edit.setText("fake-model")
    v.served_edit.setText("fake")
    v.python_edit.setText(sys.executable)
    assert v.start()
    qtbot.waitUntil(lambda: v.status is ProcessStatus.READY, timeout=20000)  # its probe sent the key
    # the Local vLLM profile is pointed at it when the (queued) status signal arrives
    qtbot.waitUntil(lambda: bool(ctx.profiles.get(LOCAL_VLLM).base_url), timeout=5000)
    server = v.server
    assert server is not None and server.supervisor.pid is not None
    proc = psutil.Process(server.supervisor.pid)
    assert not any(KEY in a for a in proc.cmdline()) and proc.environ().get("VLLM_API_KEY") == KEY
    assert KEY not in app_state_path(ctx.data_dir).read_text()
    qtbot.waitUntil(lambda: "the key is ***" in panel.log.text(), timeout=5000)
    assert KEY not in panel.log.text()

    # the app's client to that server (the Local vLLM profile) sends the key: a chat answers
    async def ask() -> str:
        model = ctx.profiles.to_model(LOCAL_VLLM)
        try:
            reply = await model.chat([{"role": "user", "content": "hi"}], stream=False)
        finally:
            await model.aclose()
        return str(reply.content)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # its own loop, off the GUI's
        assert pool.submit(asyncio.run, ask()).result(30) == "fake answer"
    v.stop()
    qtbot.waitUntil(lambda: not v.busy, timeout=15000)
    assert KEY not in app_log_path(ctx.data_dir).read_text()
    assert os.environ.get("VLLM_API_KEY") is None


def test_a_key_in_extra_args_is_refused_inline(panel: RuntimePanel) -> None:
    v = panel.vllm
    v.model_edit.setText("fake-model")
    v.extra_edit.setText(f"--enforce-eager --api-key {KEY}")
    assert not v.start()
    assert v.extra_error.isVisibleTo(v) and "Server API key box" in v.extra_error.text()
    assert v.server is None
