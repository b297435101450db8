"""Whether the current model can answer (core/endpoints/readiness.py), and "no model chosen" as a
state of the profile store: no Qt, no network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keyring
import pytest
from doubles import MemoryKeyring

from vrag_desktop.core.endpoints.profiles import (
    CUSTOM,
    DASHSCOPE,
    LOCAL_VLLM,
    EndpointProfile,
    NoModelChosenError,
    ProfileStore,
)
from vrag_desktop.core.endpoints.readiness import (
    Known,
    LocalServer,
    Readiness,
    check,
    known_for,
    local_servers,
    missing_local_model,
    readiness,
)
from vrag_desktop.core.runtime.settings import runtime_dir
from vrag_desktop.core.runtime.state import identity

URL = "http://127.0.0.1:8011/v1"


@pytest.fixture(autouse=True)
def memory_keyring() -> Iterator[MemoryKeyring]:
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)


def _store(tmp_path: Path, environ: dict[str, str] | None = None) -> ProfileStore:
    return ProfileStore(tmp_path / "config", environ=environ if environ is not None else {})


# ---- the rule --------------------------------------------------------------------------------


def test_no_model_chosen_is_not_ready_and_leads_to_the_chooser() -> None:
    r = readiness(None, Known())
    assert (r.ready, r.fix, r.action) == (False, "choose", "Choose a model…")
    assert r.reason == "No model is chosen yet."


def test_dashscope_needs_a_key_and_nothing_else_known_matters() -> None:
    ds = EndpointProfile(DASHSCOPE, "dashscope", "https://dashscope.example/v1", "qwen3.5-plus")
    r = readiness(ds, Known(has_key=False))
    assert (r.ready, r.fix, r.action, r.profile) == (False, "key", "Add the key…", DASHSCOPE)
    assert r.reason == "DashScope needs an API key."
    assert readiness(ds, Known(has_key=True)) == Readiness(True, profile=DASHSCOPE)


def test_an_untested_or_unreachable_url_is_not_a_reason() -> None:
    """Only trying tells whether a server answers: a URL nobody tested (or a port nothing listens
    on) leaves Ask on; the run then says clearly that it cannot connect."""
    custom = EndpointProfile(CUSTOM, "custom", "http://127.0.0.1:9/v1", "some-model")
    assert readiness(custom, Known()).ready
    keyless = EndpointProfile("LM Studio", "custom", "http://127.0.0.1:1234/v1", "qwen2.5-vl")
    assert readiness(keyless, Known(has_key=False)).ready  # a custom server may take no key


def test_a_profile_without_address_or_model_says_which() -> None:
    r = readiness(EndpointProfile(CUSTOM, "custom"), Known())
    assert (r.ready, r.fix, r.reason) == (False, "endpoint", "Custom has no server address yet.")
    assert r.action == "Edit Custom…"
    r = readiness(EndpointProfile("Lab", "custom", URL), Known())
    assert (r.ready, r.fix, r.reason) == (False, "endpoint", "Lab names no model.")


@pytest.mark.parametrize(
    ("known", "ready", "reason", "action"),
    [
        (Known(), False, "The local vLLM server is not running.", "Start the server…"),
        (Known(app_server="starting"), False, "The local vLLM server is still starting.", "Show the server"),
        (
            Known(servers=(LocalServer(URL, False),)),
            False,
            "The local vLLM server is still starting.",
            "Show the server",
        ),
        (Known(app_server="stopping"), False, "The local vLLM server is stopping.", "Show the server"),
        (
            Known(app_server="crashed"),
            False,
            "The local vLLM server stopped unexpectedly.",
            "Show the server",
        ),
        (Known(servers=(LocalServer(URL + "/", True),)), True, "", ""),
        (
            Known(servers=(LocalServer("http://127.0.0.1:9999/v1", True),)),
            False,
            "The local vLLM server is not running.",
            "Start the server…",
        ),
    ],
    ids=[
        "stopped",
        "app-starting",
        "cli-starting",
        "stopping",
        "crashed",
        "serving-its-address",
        "serving-elsewhere",
    ],
)
def test_the_local_profile_needs_a_supervised_server_at_its_address(
    known: Known, ready: bool, reason: str, action: str
) -> None:
    """The app's Local vLLM profile keeps its last address after the server stopped: only a server
    the app or the command line supervises, serving that address, makes it ready."""
    local = EndpointProfile(LOCAL_VLLM, "local-vllm", URL, "Qwen2.5-VL-7B-VRAG")
    r = readiness(local, known)
    assert (r.ready, r.reason, r.action) == (ready, reason, action)
    if not ready:
        assert r.fix == "server" and r.profile == LOCAL_VLLM
    never_started = readiness(EndpointProfile(LOCAL_VLLM, "local-vllm"), Known())
    assert never_started.reason == "The local vLLM server is not running."


def test_a_local_model_not_downloaded_leads_to_the_models_view() -> None:
    """The model the local server would start is nowhere on this machine: Ask is off until it is
    downloaded (a server that serves it, or is starting, still counts first)."""
    local = EndpointProfile(LOCAL_VLLM, "local-vllm", URL, "")
    r = readiness(local, Known(missing_model="tiny-org/tiny-model"))
    assert r == Readiness(
        False,
        "The local model tiny-org/tiny-model is not downloaded yet.",
        "models",
        "Download it…",
        LOCAL_VLLM,
        "tiny-org/tiny-model",
    )
    assert readiness(local, Known(servers=(LocalServer(URL, True),), missing_model="a/b")).ready
    assert readiness(local, Known(app_server="starting", missing_model="a/b")).fix == "server"


# ---- the facts -------------------------------------------------------------------------------


def _state(folder: Path, name: str, pid: int, **extra: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps({**identity(pid), "name": "vLLM", **extra}))
    return path


def test_local_servers_come_from_live_state_files_and_nothing_is_changed(tmp_path: Path) -> None:
    folder = tmp_path / "runtime"
    me = os.getpid()
    _state(folder, "vllm-desktop.state.json", me, base_url=URL, ready_at=1.0)
    _state(folder, "state.json", me, base_url="http://127.0.0.1:8012/v1", ready_at=None)
    _state(folder, "trainer.state.json", me)  # no address: not a server
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = _state(
        folder, "old.state.json", int(dead.stdout), base_url="http://127.0.0.1:8013/v1", ready_at=1.0
    )
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    found = local_servers(folder)
    assert sorted(found, key=lambda s: s.base_url) == [
        LocalServer(URL, True),
        LocalServer("http://127.0.0.1:8012/v1", False),
    ]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before and stale.exists()
    assert local_servers(tmp_path / "nowhere") == ()


def test_check_reads_the_store_the_keyring_and_the_state_files(tmp_path: Path, memory_keyring: Any) -> None:
    data = tmp_path / "data"
    store = ProfileStore(data / "config", environ={})
    assert check(store, data).fix == "choose"
    store.set_active(DASHSCOPE)
    assert check(store, data).fix == "key"
    store.set_api_key(DASHSCOPE, "sk-test-1")
    assert check(store, data).ready
    store.set_local_server(URL, "vrag")
    assert check(store, data, LOCAL_VLLM).reason == "The local vLLM server is not running."
    _state(runtime_dir(data), "state.json", os.getpid(), base_url=URL, ready_at=2.0)
    assert check(store, data, LOCAL_VLLM).ready
    known = known_for(store, store.get(LOCAL_VLLM), data, "stopped")
    assert known.servers == (LocalServer(URL, True),) and not known.has_key


def test_the_missing_local_model_is_read_from_files_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vLLM settings' hub id, looked for in the models folder and in Hugging Face's cache; a
    folder path or no model is never missing. Nothing is written, nothing goes to the network."""
    from vrag_desktop.core.runtime.settings import settings_path

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    data = tmp_path / "data"
    assert missing_local_model(data) == ""  # no settings yet
    vllm = settings_path(data)
    vllm.parent.mkdir(parents=True)
    vllm.write_text(json.dumps({"model": "tiny-org/tiny-model"}))
    assert missing_local_model(data) == "tiny-org/tiny-model"
    store = ProfileStore(data / "config", environ={})
    store.set_active(LOCAL_VLLM)
    assert check(store, data).fix == "models"
    pulled = data / "models" / "tiny-org" / "tiny-model"
    pulled.mkdir(parents=True)
    assert missing_local_model(data) == "tiny-org/tiny-model"  # a folder without its marker is not a model
    (pulled / ".vrag-model.json").write_text(json.dumps({"repo_id": "tiny-org/tiny-model"}))
    assert missing_local_model(data) == ""
    assert check(store, data).reason == "The local vLLM server is not running."
    vllm.write_text(json.dumps({"model": "other-org/cached"}))
    assert missing_local_model(data) == "other-org/cached"
    snapshot = tmp_path / "hf-home" / "hub" / "models--other-org--cached" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")  # vLLM would load it from Hugging Face's cache
    assert missing_local_model(data) == ""
    folder = tmp_path / "my-model"
    folder.mkdir()
    vllm.write_text(json.dumps({"model": str(folder)}))
    assert missing_local_model(data) == ""
    vllm.write_text("{broken")
    assert missing_local_model(data) == "" and vllm.read_text() == "{broken"


def test_a_key_from_the_environment_counts(tmp_path: Path) -> None:
    store = _store(tmp_path, {"DASHSCOPE_API_KEY": "sk-env"})
    store.set_active(DASHSCOPE)
    assert check(store, tmp_path).ready


# ---- "no model chosen" in the profile store ------------------------------------------------------


def test_a_fresh_data_directory_chooses_no_model(tmp_path: Path) -> None:
    """Never a cloud service by default: the active profile is None until the person chooses."""
    store = _store(tmp_path)
    assert store.active is None
    with pytest.raises(NoModelChosenError, match="--endpoint NAME") as err:
        store.to_model()
    assert "no model is chosen yet" in str(err.value)
    with pytest.raises(NoModelChosenError):
        store.get(None)
    store.save(EndpointProfile("Lab", "custom", URL, "m"))  # saving a profile chooses nothing
    assert _store(tmp_path).active is None
    assert json.loads((tmp_path / "config" / "endpoints.json").read_text())["active"] is None


def test_the_active_profile_is_kept_cleared_and_never_falls_back(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save(EndpointProfile("Lab", "custom", URL, "m"))
    store.set_active("Lab")
    assert _store(tmp_path).active == "Lab"
    store.delete("Lab")
    assert store.active is None and _store(tmp_path).active is None
    store.set_active(CUSTOM)
    store.set_active(None)
    assert _store(tmp_path).active is None


def test_a_file_written_by_an_earlier_version_keeps_its_choice(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "endpoints.json").write_text(
        json.dumps({"version": 1, "active": DASHSCOPE, "profiles": []})
    )
    assert _store(tmp_path).active == DASHSCOPE


def test_the_command_line_says_how_to_choose_a_model(tmp_path: Path) -> None:
    """``vrag-desktop ask`` on a fresh data directory: no request anywhere, one line saying how."""
    env = {**os.environ, "VRAG_DESKTOP_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"}
    env.pop("DASHSCOPE_API_KEY", None)
    proc = subprocess.run(
        [sys.executable, "-m", "vrag_desktop", "ask", "What was the revenue?"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode != 0
    assert "No model is chosen yet" in proc.stderr and "vrag-desktop endpoints use NAME" in proc.stderr
    assert "--base-url URL --model NAME" in proc.stderr and "Traceback" not in proc.stderr


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``vrag-desktop ARGS`` in a child process with ``env`` (generous: a loaded machine)."""
    return subprocess.run(
        [sys.executable, "-m", "vrag_desktop", *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_endpoints_use_chooses_the_current_model_the_app_shows(tmp_path: Path) -> None:
    """``endpoints use`` writes the one current model (the app's Ask box follows it); ``ask`` then says
    what that model lacks before any request (here: DashScope's key), and how to give it."""
    env = {**os.environ, "VRAG_DESKTOP_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"}
    for var in ("DASHSCOPE_API_KEY", "VRAG_DESKTOP_API_KEY_DASHSCOPE"):
        env.pop(var, None)
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return _cli(env, *args)

    listed = run("endpoints", "list")
    assert listed.returncode == 0 and "No model is chosen yet" in listed.stdout
    assert run("endpoints", "use", "Nowhere").returncode != 0
    chosen = run("endpoints", "use", DASHSCOPE)
    assert chosen.returncode == 0 and "DashScope needs an API key" in chosen.stdout
    assert _store(tmp_path / "data").active == DASHSCOPE  # <data>/config/endpoints.json, the app's too
    asked = run("ask", "What was the revenue?")
    assert asked.returncode == 1 and "DashScope needs an API key" in asked.stderr
    assert "DASHSCOPE_API_KEY" in asked.stderr and "Traceback" not in asked.stderr
    marked = run("endpoints", "list", "--json")
    rows = {r["name"]: r for r in json.loads(marked.stdout)}
    assert rows[DASHSCOPE]["current"] and not rows[DASHSCOPE]["ready"]


def test_a_damaged_endpoints_file_is_left_by_readers_and_moved_aside_by_endpoints_use(tmp_path: Path) -> None:
    """``endpoints list`` (its readiness reads ``vllm.json`` too) and ``ask`` choosing its profile
    read a damaged ``endpoints.json`` as the built-ins, say so on stderr, and write nothing; the
    first change (``endpoints use``) moves it, byte for byte, to ``endpoints.json.bad``."""
    data = tmp_path / "data"
    config = data / "config"
    config.mkdir(parents=True)
    damaged = {"endpoints.json": b'{"active": "Custom", "profiles": [', "vllm.json": b"\xff not text"}
    for name, raw in damaged.items():
        (config / name).write_bytes(raw)
    env = {**os.environ, "VRAG_DESKTOP_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1"}
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return _cli(env, *args)

    for args in (("endpoints", "list"), ("endpoints", "list", "--json"), ("ask", "What was the revenue?")):
        done = run(*args)
        assert "Traceback" not in done.stderr and "endpoints.json" in done.stderr, (args, done.stderr)
        assert sorted(p.name for p in config.iterdir()) == sorted(damaged), args
        assert all((config / name).read_bytes() == raw for name, raw in damaged.items()), args
    assert "No model is chosen yet" in run("endpoints", "list").stdout  # the damaged "active" is not used
    chosen = run("endpoints", "use", DASHSCOPE)
    assert chosen.returncode == 0, chosen.stderr
    assert (config / "endpoints.json.bad").read_bytes() == damaged["endpoints.json"]
    assert _store(data).active == DASHSCOPE
    assert (config / "vllm.json").read_bytes() == damaged["vllm.json"]
