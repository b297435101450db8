"""``vrag-desktop train grpo`` with ``vllm_mode: app_server`` checks its rollout server before any
trainer starts (core/training/rollout_server.py ``check_app_server``): the background server a
state file records is probed and judged from its recorded flags, in the New-run dialog's words,
with the ``runtime start`` line that fixes it; a hand-started one is a warning. Real servers:
tests/fake_vllm_server.py on loopback, started through the real code paths (``VLLMServer``'s
detached spec, or ``vrag-desktop runtime start`` itself) that write the real state files."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from test_training_launch import make_fake_trainer

from vrag_desktop.cli.main import main
from vrag_desktop.core.runtime.detached import DetachedProcess
from vrag_desktop.core.runtime.settings import app_log_path, app_state_path, cli_log_path, cli_state_path
from vrag_desktop.core.runtime.state import StateFile
from vrag_desktop.core.runtime.vllm import (
    VLLMConfig,
    VLLMServer,
    config_from_state,
    pick_free_port,
    server_info,
)
from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.rollout_server import check_app_server, start_command
from vrag_desktop.core.training.rundir import TrainRun

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups and signals are POSIX here")

ROOT = Path(__file__).resolve().parents[1]
FAKE = Path(__file__).with_name("fake_vllm_server.py")
FIX = "vrag-desktop runtime start fake-model --enable-lora --max-lora-rank 16 --enable-scale-out"


def wait_for(cond: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def answers(url: str) -> bool:
    return server_info(url, timeout=2.0)["health"] == 200


class Servers:
    """Fake vLLM servers started for one test; all killed (whole process group) at its end."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.pids: list[int] = []

    def recorded(self, *, app: bool = False, ready: bool = True, fake: str = "", **kw: object) -> VLLMServer:
        """A server started in the background as ``runtime start`` does (``app``: as the app's,
        in its state file): ``VLLMServer``'s own spec writes the state file."""
        cfg = VLLMConfig(
            model=str(kw.pop("model", "fake-model")),
            python=sys.executable,
            port=pick_free_port(),
            entrypoint=(str(FAKE), "--fake-delay", "0.1", *fake.split()),
            **kw,  # type: ignore[arg-type]
        )
        server = VLLMServer(cfg)
        log, state = (app_log_path, app_state_path) if app else (cli_log_path, cli_state_path)
        spec = server.detached_spec(log(self.data_dir), state(self.data_dir))
        proc = DetachedProcess.spawn(spec, mode="app" if app else "background")
        self.pids.append(proc.pid)
        if ready:
            wait_for(lambda: answers(server.base_url))
        return server

    def by_hand(self, port: int) -> None:
        """A server someone started in a terminal: no state file records it."""
        proc = subprocess.Popen(
            [sys.executable, str(FAKE), "--model", "fake-model", "--port", str(port), "--fake-delay", "0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pids.append(proc.pid)
        wait_for(lambda: answers(f"http://127.0.0.1:{port}/v1"))

    def kill(self) -> None:
        for pid in self.pids:
            with contextlib.suppress(OSError):
                os.killpg(pid, 9)
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).wait(10)


@pytest.fixture
def servers(data_dir: Path) -> Iterator[Servers]:
    s = Servers(data_dir)
    yield s
    s.kill()


@pytest.fixture
def trainer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    python = make_fake_trainer(tmp_path / "fake")
    monkeypatch.setenv("VRAG_TRAINER_PYTHON", str(python))
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    return python


def runtime(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``vrag-desktop runtime …`` as a real command (the data dir from ``$VRAG_DESKTOP_DATA_DIR``)."""
    env = {
        **os.environ,
        "VRAG_DESKTOP_VLLM_ENTRYPOINT": f"{FAKE} --fake-delay 0.1",
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",  # 'start' reads the profile's key
    }
    return subprocess.run(
        [sys.executable, "-m", "vrag_desktop", "runtime", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def run_config(url: str, **kw: object) -> TrainConfig:
    base: dict[str, object] = {
        "model": "fake-model",
        "dataset": "d.json",
        "generator": "vllm",
        "vllm_mode": "app_server",
        "vllm_url": url,
        "lora": {"enabled": True, "rank": 16},
        "max_model_len": 4096,
        "max_images": 4,
    }
    return TrainConfig.from_mapping({**base, **kw})


def fit(**kw: object) -> dict[str, object]:
    """The flags a run of :func:`run_config` needs, changed by ``kw``."""
    return {
        "runtime_lora": True,
        "max_lora_rank": 16,
        "scale_out": True,
        "max_model_len": 4096,
        "limit_mm_per_prompt": {"image": 4},
        **kw,
    }


def train(capsys: pytest.CaptureFixture[str], tmp_path: Path, cfg: TrainConfig) -> tuple[int, str, str]:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(cfg.to_dict()))
    rc = main(["train", "grpo", "--config", str(path), "--run", str(tmp_path / "run")])
    out, err = capsys.readouterr()
    return rc, out, err


# ---------------------------------------------------------------- refused before a trainer starts


def test_no_server_is_refused_with_the_command_that_starts_one(
    tmp_path: Path, data_dir: Path, trainer: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = pick_free_port()
    url = f"http://127.0.0.1:{port}/v1"
    rc, _out, err = train(capsys, tmp_path, run_config(url))
    lines = [ln for ln in err.splitlines() if ln.startswith("vrag-desktop: error:")]
    assert rc == 2 and len(lines) == 1, err
    assert "the rollout server (the app's vLLM server) is not running" in lines[0]
    assert f"nothing answers at {url}" in lines[0]
    assert f"{FIX} --max-model-len 4096 --limit-images 4 --port {port}" in lines[0]
    assert not (tmp_path / "run").exists()  # nothing launched, nothing written


def test_resuming_an_app_server_run_checks_its_server_too(
    tmp_path: Path, data_dir: Path, trainer: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = TrainRun.create(tmp_path / "run", run_config(f"http://127.0.0.1:{pick_free_port()}/v1"))
    rc = main(["train", "resume", str(run.root)])
    err = capsys.readouterr().err
    assert rc == 2 and "the rollout server (the app's vLLM server) is not running" in err, err
    assert run.state()["status"] == "created" and not run.log_path.exists()  # no trainer ran


def test_a_server_without_lora_is_refused_naming_the_flag_and_the_fix(
    tmp_path: Path, data_dir: Path, servers: Servers, trainer: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = servers.recorded(scale_out=True, max_model_len=4096)
    rc, _out, err = train(capsys, tmp_path, run_config(server.base_url))
    assert rc == 2, err
    assert "the running vLLM server cannot serve this run's rollouts: it cannot load adapters" in err
    assert "(--enable-lora, runtime LoRA updating)" in err and "--enable-scale-out" not in err.split(";")[0]
    assert f"stop it (vrag-desktop runtime stop) and run: {FIX}" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (fit(max_lora_rank=8), "its --max-lora-rank 8 is below the run's LoRA rank 16"),
        (fit(model="other-model"), "it serves other-model, the run starts from fake-model"),
        (fit(scale_out=False), "it was started without --enable-scale-out"),
        (fit(max_model_len=2048), "its context 2048 is shorter than max_model_len 4096"),
        (fit(limit_mm_per_prompt={"image": 2}), "it takes 2 images a prompt, the run up to 4"),
    ],
)
def test_each_recorded_flag_the_run_lacks_is_named(
    data_dir: Path, servers: Servers, flags: dict[str, object], said: str
) -> None:
    server = servers.recorded(**flags)
    found = check_app_server(run_config(server.base_url), data_dir)
    assert found.problem is not None and said in found.problem, found
    assert found.problem.startswith("the running vLLM server cannot serve this run's rollouts: ")


def test_a_state_file_naming_another_address_is_said(data_dir: Path, servers: Servers) -> None:
    server = servers.recorded(**fit())
    url = f"http://localhost:{pick_free_port()}/v1"
    found = check_app_server(run_config(url), data_dir)
    assert found.problem is not None and found.problem.startswith(f"nothing answers at vllm_url {url}")
    assert f"serves at {server.base_url}: set vllm_url to that (--set vllm_url={server.base_url})" in (
        found.problem
    )
    # the same server under another loopback name is the one the state file records
    same = server.base_url.replace("127.0.0.1", "localhost")
    assert check_app_server(run_config(same), data_dir).problem is None


def test_a_server_still_loading_or_wanting_another_key_does_not_serve_yet(
    data_dir: Path, servers: Servers
) -> None:
    loading = servers.recorded(ready=False, fake="--fake-mode hang", **fit())
    wait_for(lambda: StateFile(cli_state_path(data_dir)).peek() is not None)
    found = check_app_server(run_config(loading.base_url), data_dir, timeout=2.0)
    assert found.problem is not None and "is not running: vLLM (fake-model) at " in found.problem
    assert "does not serve yet" in found.problem and "'vrag-desktop runtime status' says it is ready" in (
        found.problem
    )
    servers.kill()
    keyed = servers.recorded(app=True, api_key="sk-server-key", **fit())
    found = check_app_server(run_config(keyed.base_url), data_dir)  # the trainer would send no key
    assert found.problem is not None and "401: the server wants an API key and none was sent" in found.problem
    assert "the trainer sends $VLLM_API_KEY as its key: set it to the server's" in found.problem
    assert check_app_server(run_config(keyed.base_url), data_dir, api_key="sk-server-key").problem is None


def test_an_old_state_file_without_the_flags_still_reads_and_is_refused(
    data_dir: Path, servers: Servers
) -> None:
    server = servers.recorded(**fit())
    state_file = StateFile(cli_state_path(data_dir))
    old = {k: v for k, v in (state_file.peek() or {}).items() if k not in fit()}
    state_file.write(old)  # as a version before these facts wrote it
    got = config_from_state(old)
    assert (got.model, got.runtime_lora, got.scale_out) == ("fake-model", False, False)
    assert (got.max_lora_rank, got.max_model_len, got.limit_mm_per_prompt) == (None, None, None)
    found = check_app_server(run_config(server.base_url), data_dir)
    assert found.problem is not None and "it cannot load adapters while it runs" in found.problem
    assert "(its state file, from an older version, does not record its flags)" in found.problem
    status = runtime("status", "--json")
    assert status.returncode == 0, status.stderr  # the old file still reads
    doc = json.loads(status.stdout)
    assert doc["ready"] and doc["runtime_lora"] is None and doc["max_lora_rank"] is None
    assert StateFile(cli_state_path(data_dir)).peek() == old  # the check wrote nothing


# ---------------------------------------------------------------- launched


def test_a_hand_started_server_is_a_warning_and_the_run_starts(
    tmp_path: Path, data_dir: Path, servers: Servers, trainer: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = pick_free_port()
    servers.by_hand(port)
    rc, out, err = train(capsys, tmp_path, run_config(f"http://127.0.0.1:{port}/v1"))
    assert rc == 0, err
    warnings = [ln for ln in err.splitlines() if "was not started by vrag-desktop" in ln]
    assert len(warnings) == 1 and warnings[0].startswith("warning: the vLLM server at http://127.0.0.1:")
    assert "(serving fake-model)" in warnings[0] and "its flags cannot be checked" in warnings[0]
    assert f"{FIX} --max-model-len 4096 --limit-images 4 --port {port}" in warnings[0]
    assert "Training finished at step 3" in out


def test_runtime_start_flags_reach_vllm_the_state_file_and_the_run_starts(
    tmp_path: Path, data_dir: Path, trainer: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = pick_free_port()
    flags = ["--enable-lora", "--max-lora-rank", "16", "--enable-scale-out", "--max-model-len", "4096"]
    done = runtime(
        "start", "fake-model", "--python", sys.executable, "--port", str(port), *flags, "--limit-images", "4"
    )
    state_file = StateFile(cli_state_path(data_dir))
    try:
        assert done.returncode == 0, done.stderr
        state = state_file.peek() or {}
        command = state["command"]
        lora = command.index("--enable-lora")
        assert command[lora : lora + 4] == ["--enable-lora", "--max-lora-rank", "16", "--enable-scale-out"]
        assert command[command.index("--max-model-len") + 1] == "4096"
        assert json.loads(command[command.index("--limit-mm-per-prompt") + 1]) == {"image": 4}
        assert psutil.Process(state["pid"]).environ()["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
        assert {k: state[k] for k in fit()} == fit()
        status = runtime("status")
        assert "flags:    --enable-lora (adapters loaded at run time) --max-lora-rank 16" in status.stdout

        cfg = run_config(f"http://127.0.0.1:{port}/v1")
        assert start_command(cfg) == f"{FIX} --max-model-len 4096 --limit-images 4 --port {port}"
        rc, out, err = train(capsys, tmp_path, cfg)
        assert rc == 0 and "warning: the vLLM server" not in err, err
        assert "Training finished at step 3" in out
    finally:
        stop = runtime("stop", "--grace", "5")
        assert stop.returncode == 0 and not state_file.path.exists(), stop.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--enable-lora", "--max-lora-rank", "12"],
            "--max-lora-rank must be one vLLM accepts: 1, 8, 16, 32",
        ),
        (["--max-lora-rank", "16"], "--max-lora-rank needs --enable-lora"),
    ],
)
def test_runtime_start_refuses_a_rank_vllm_would_not_take(
    data_dir: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    rc = main(["runtime", "start", "fake-model", "--python", sys.executable, *args])
    err = capsys.readouterr().err
    assert rc == 1 and said in err, err
    assert not cli_state_path(data_dir).exists()
