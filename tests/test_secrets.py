"""Secrets stay secret: the local vLLM server's API key never on a command line (``ps``), in its
state file, log or the command's output; URLs written down without their credentials.

Real processes: ``vrag-desktop runtime start`` with tests/fake_vllm_server.py (which, like vLLM,
requires the key on ``/v1`` when ``--api-key`` or ``$VLLM_API_KEY`` gives one), read back through
``/proc`` (psutil). No keyring is touched: the commands run with keyring's *fail* backend.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from scripted_openai import ScriptedOpenAI
from test_cli_runtime import FAKE, Reader

from vrag_desktop import VRAG
from vrag_desktop.core.endpoints.content import redact, redact_url, redact_urls
from vrag_desktop.core.run.store import RunStore
from vrag_desktop.core.runtime.settings import VLLMSettings, load_vllm_settings, settings_path
from vrag_desktop.core.runtime.vllm import VLLMConfig, pick_free_port
from vrag_desktop.core.runtime.vllm_key import split_api_key

ROOT = Path(__file__).resolve().parents[1]
START = (sys.executable, "-m", "vrag_desktop", "runtime", "start", "fake-model", "--python", sys.executable)
KEY = "sk-local-vllm-0123456789"
posix = pytest.mark.skipif(os.name != "posix", reason="process groups and /proc here")


# ---------------------------------------------------------------- the vLLM key, end to end


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    """A private data dir; any server a failing test left behind is killed."""
    d = tmp_path / "data"
    yield d
    with contextlib.suppress(Exception):
        state = json.loads((d / "runtime" / "state.json").read_text())
        os.killpg(int(state["pgid"]), signal.SIGKILL)


def cli_env(data: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("VLLM_API_KEY", "VRAG_DESKTOP_API_KEY_LOCAL_VLLM")
    }
    env.update(
        {
            "VRAG_DESKTOP_DATA_DIR": str(data),
            "PYTHONUNBUFFERED": "1",
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",  # never the user's keyring
            "VRAG_DESKTOP_VLLM_ENTRYPOINT": f"{FAKE} --fake-delay 0.2",
            **extra,
        }
    )
    return env


def runtime(data: Path, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vrag_desktop", "runtime", *args],
        cwd=ROOT,
        env=cli_env(data, **env),
        capture_output=True,
        text=True,
        timeout=90,
        input=stdin if stdin is not None else "",
    )


def assert_key_nowhere(data: Path, pid: int, *texts: str) -> None:
    """Not in the server's argv (what ``ps`` shows anyone), its state file, its log, nor ``texts``;
    but in its environment (readable by its owner only), where vLLM reads it."""
    proc = psutil.Process(pid)
    assert not any(KEY in a for a in proc.cmdline()), proc.cmdline()
    assert KEY.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert proc.environ().get("VLLM_API_KEY") == KEY
    assert KEY not in (data / "runtime" / "state.json").read_text()
    assert KEY not in (data / "runtime" / "vllm.log").read_text()
    for text in texts:
        assert KEY not in text


def models_status(port: int, key: str | None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.get(f"http://127.0.0.1:{port}/v1/models", headers=headers, trust_env=False).status_code


@posix
@pytest.mark.parametrize("how", ["env", "stdin"])
def test_runtime_start_takes_the_key_by_option_and_passes_it_by_environment(data: Path, how: str) -> None:
    port = pick_free_port()
    args = ["start", "fake-model", "--python", sys.executable, "--port", str(port)]
    if how == "env":
        started = runtime(data, *args, "--api-key-env", "MY_VLLM_KEY", MY_VLLM_KEY=KEY)
    else:
        started = runtime(data, *args, "--api-key-stdin", stdin=KEY + "\n")
    out = started.stdout + started.stderr
    assert started.returncode == 0, out
    state = json.loads((data / "runtime" / "state.json").read_text())
    assert_key_nowhere(data, int(state["pid"]), out)
    assert "VLLM_API_KEY=***" in out  # the command shown says where the key went
    assert "$VRAG_DESKTOP_API_KEY_LOCAL_VLLM" in out  # no keyring here: where clients find it
    # the server requires it, and 'status' (with the profile's key) sees it ready
    assert models_status(port, None) == 401 and models_status(port, KEY) == 200
    status = runtime(data, "status", "--json", VRAG_DESKTOP_API_KEY_LOCAL_VLLM=KEY)
    assert json.loads(status.stdout)["status"] == "ready", status.stdout + status.stderr
    unkeyed = json.loads(runtime(data, "status", "--json").stdout)
    assert unkeyed["ready"] is False and "401" in unkeyed["error"] and KEY not in json.dumps(unkeyed)
    assert runtime(data, "stop").returncode == 0


@posix
@pytest.mark.parametrize("form", [["--api-key", KEY], [f"--api-key={KEY}"]])
def test_a_key_inside_vllm_args_is_moved_to_the_environment_and_masked(data: Path, form: list[str]) -> None:
    """The old way still works, but the key leaves vLLM's argv; a server that prints its key
    (``--fake-echo-key``) has it masked in the log, the output and the app's log view alike."""
    port = pick_free_port()
    vllm_args = " ".join([*form, "--fake-echo-key"])
    proc = subprocess.Popen(
        [*START, "--port", str(port), "--foreground", f"--vllm-args={vllm_args}"],
        cwd=ROOT,
        env=cli_env(data),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    cmd = Reader(proc)
    try:
        cmd.until("Press Ctrl-C", timeout=60)
        state = json.loads((data / "runtime" / "state.json").read_text())
        assert_key_nowhere(data, int(state["pid"]))
        assert not any(KEY in str(a) for a in state["command"])
        assert models_status(port, None) == 401 and models_status(port, KEY) == 200
    finally:
        proc.send_signal(signal.SIGINT)
    rc, out = cmd.finish()
    assert rc == 0, out
    assert "passed to vLLM in its environment (VLLM_API_KEY)" in out and "the key is ***" in out
    assert KEY not in out and KEY not in (data / "runtime" / "vllm.log").read_text()


@posix
def test_contradicting_key_options_are_refused_clearly(data: Path) -> None:
    done = runtime(data, "start", "fake-model", "--no-api-key", f"--vllm-args=--api-key {KEY}")
    assert done.returncode == 1 and "drop one of them" in done.stderr and KEY not in done.stderr
    done = runtime(data, "start", "fake-model", "--api-key-env", "UNSET_VAR_FOR_TEST")
    assert done.returncode == 1 and "UNSET_VAR_FOR_TEST is empty or unset" in done.stderr


def test_vllm_config_never_puts_the_key_in_argv() -> None:
    for cfg in (
        VLLMConfig(model="m", python=sys.executable, port=1, api_key=KEY),
        VLLMConfig(model="m", python=sys.executable, port=1, extra_args=["--api-key", KEY, "--x"]),
        VLLMConfig(model="m", python=sys.executable, port=1, extra_args=[f"--api-key={KEY}"]),
    ):
        argv = cfg.build_command()
        assert KEY not in " ".join(argv) and "--api-key" not in argv and KEY not in cfg.shell_command()
        assert cfg.child_env()["VLLM_API_KEY"] == KEY and cfg.server_key() == KEY
    assert split_api_key(["--a", "--api-key", "k1", "--api-key=k2", "--b"]) == (["--a", "--b"], "k2")


def test_the_apps_settings_refuse_a_key_in_extra_args_and_scrub_an_old_file(tmp_path: Path) -> None:
    bad = VLLMSettings(model="m", extra_args=f"--enforce-eager --api-key {KEY}").problems()
    assert "Server API key box" in bad["extra_args"] and KEY not in bad["extra_args"]
    path = settings_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"model": "m", "extra_args": f"--enforce-eager --api-key={KEY} --seed 1"}))
    settings, note = load_vllm_settings(tmp_path)
    assert settings.extra_args == "--enforce-eager --seed 1" and note and "--api-key was removed" in note
    assert KEY not in path.read_text()  # not left on disk in plain text


# ---------------------------------------------------------------- URLs without credentials


def test_redact_url() -> None:
    url = "https://alice:pw-SECRET@api.example.com:8443/v1?model=m&api_key=sk-1&X-Amz-Signature=s2&monkey=ok"
    assert redact_url(url) == (
        "https://REDACTED@api.example.com:8443/v1?model=m&api_key=REDACTED&X-Amz-Signature=REDACTED&monkey=ok"
    )
    for name in ("key", "APIKEY", "Token", "access_token", "secret", "password", "sig", "signature"):
        assert redact_url(f"http://h/p?{name}=v4lue&a=1") == f"http://h/p?{name}=REDACTED&a=1"
    assert redact_url("http://h/cb#access_token=t0k&state=1") == "http://h/cb#access_token=REDACTED&state=1"
    plain = "http://127.0.0.1:8000/v1?model=a%20b"
    assert redact_url(plain) == plain and redact_url("not a url") == "not a url"
    assert redact_urls({"u": [f"see {url} now"], "n": 3}) == {"u": [f"see {redact_url(url)} now"], "n": 3}
    assert "sk-1" not in redact(f"error at {url}", []) and "pw-SECRET" not in redact(url, [])


def test_saved_runs_keep_no_url_credentials(tmp_path: Path) -> None:
    """Through the Python API against a real server: the request goes to the real URL (the
    server receives the credentials), run.json and events.jsonl keep them redacted."""
    data = tmp_path / "data"
    with ScriptedOpenAI([{"content": "<answer>42</answer>"}]) as srv:
        base = srv.base_url.replace("http://", "http://alice:pw-SECRET1@")
        agent = VRAG(
            base_url=base,
            search_url="http://127.0.0.1:9/search?api_key=sk-SECRET2&k=3",
            model_name="m",
            api_key=None,
            data_dir=data,
            searcher_factory=lambda: object(),  # the scripted model answers at once: no search
        )
        events = list(agent.run("What is the answer?"))
        auth = [r.headers.get("authorization", "") for r in srv.requests]
    assert events[-1]["content"] == "42"
    assert any(a.startswith("Basic ") for a in auth)  # the live request carried the credentials
    (run,) = RunStore(data / "runs").list()
    folder = data / "runs" / run.id
    saved = (folder / "run.json").read_text() + (folder / "events.jsonl").read_text()
    assert "pw-SECRET1" not in saved and "sk-SECRET2" not in saved
    assert run.settings["base_url"] == redact_url(base) and run.settings["base_url"].startswith(
        "http://REDACTED@"
    )
    assert run.settings["search_url"] == "http://127.0.0.1:9/search?api_key=REDACTED&k=3"


def test_an_error_naming_the_url_is_saved_redacted() -> None:
    with tempfile.TemporaryDirectory() as d:
        store = RunStore(Path(d))
        with store.recorder("vrag", "q", {"base_url": "http://h/v1?token=t-SECRET3"}) as rec:
            from vrag_desktop.core.agents.events import AgentError

            rec.record(AgentError(step=1, content="cannot reach http://u:p-SECRET4@h/v1?token=t-SECRET3"))
        saved = (rec.dir / "run.json").read_text() + (rec.dir / "events.jsonl").read_text()
    assert "SECRET" not in saved and "token=REDACTED" in saved
