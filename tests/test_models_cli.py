"""``vrag-desktop models`` as a person runs it, against the fake hub: a pull killed with ``kill -9``
(and one stopped with Ctrl-C) finishes with the same checksum when run again; every failure is
one line, never a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import cli
from fake_hub import FakeHub, sha256
from models_support import BIG, cli_env, online, sha256_file, tiny_files

__all__ = ["online"]

REPO = "tiny-org/tiny-model"
PARTIAL = Path("models/.partial/tiny-org--tiny-model/model.safetensors.incomplete")


def _start_pull(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vrag_desktop", "models", "pull", REPO],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_partial(proc: subprocess.Popen[str], path: Path, size: int, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        have = path.stat().st_size if path.exists() else 0
        if have >= size:
            return have
        time.sleep(0.05)
    raise AssertionError(f"{path} never reached {size} bytes")


def _one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("vrag-desktop: error:")]
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_pull_killed_with_sigkill_resumes_with_the_same_checksum(online: FakeHub, tmp_path: Path) -> None:
    files = tiny_files(weights=BIG)
    online.repo(REPO).commit(files)
    online.throttle["model.safetensors"] = 4 * 1024 * 1024  # long enough to be killed half-way
    data = tmp_path / "data"
    env = cli_env(online, data, tmp_path)
    proc = _start_pull(env)
    try:
        have = _wait_for_partial(proc, data / PARTIAL, 10 * 1024 * 1024)
        proc.kill()  # SIGKILL: no handler, no cleanup
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    kept = (data / PARTIAL).stat().st_size
    assert have <= kept < BIG and not (data / "models" / "tiny-org" / "tiny-model").exists()
    online.throttle.clear()
    done = cli("models", "pull", REPO, data_dir=data, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    folder = Path(done.stdout.strip())
    assert folder == data / "models" / "tiny-org" / "tiny-model"
    assert f"bytes={kept}-" in online.ranges("model.safetensors")  # continued from the kept bytes
    for name, blob in files.items():
        if name != "logo.png":
            assert sha256_file(folder / name) == sha256(blob), name
    listed = json.loads(cli("models", "list", "--json", data_dir=data, env=env, check=True).stdout)
    (row,) = [r for r in listed if r["id"] == REPO]
    assert row["state"] == "downloaded" and row["size_on_disk"] >= BIG and row["commit"]
    minilm = next(r for r in listed if r["id"] == "sentence-transformers/all-MiniLM-L6-v2")
    assert minilm["state"] == "builtin" and minilm["fit"]["verdict"] == "fits"


def test_ctrl_c_stops_cleanly_and_the_same_command_resumes(online: FakeHub, tmp_path: Path) -> None:
    files = tiny_files(weights=BIG)
    online.repo(REPO).commit(files)
    online.throttle["model.safetensors"] = 4 * 1024 * 1024
    data = tmp_path / "data"
    env = cli_env(online, data, tmp_path)
    proc = _start_pull(env)
    try:
        _wait_for_partial(proc, data / PARTIAL, 10 * 1024 * 1024)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "Interrupted" in stderr and "run the same command again to resume" in stderr.lower()
    assert "Traceback" not in stderr
    listed = json.loads(cli("models", "list", "--json", data_dir=data, env=env, check=True).stdout)
    (row,) = [r for r in listed if r["id"] == REPO]
    assert row["state"] == "partial" and row["partial"]["have_bytes"] >= 10 * 1024 * 1024
    online.throttle.clear()
    done = cli("models", "pull", REPO, data_dir=data, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sha256_file(Path(done.stdout.strip()) / "model.safetensors") == sha256(files["model.safetensors"])
    gone = cli("models", "rm", REPO, data_dir=data, env=env)
    assert gone.returncode == 0 and "Removed tiny-org/tiny-model" in gone.stderr
    assert not (data / "models" / "tiny-org" / "tiny-model").exists()


def test_every_failure_is_one_line(online: FakeHub, tmp_path: Path) -> None:
    online.repo(REPO, gated=True, token="hf_x").commit(tiny_files())
    data = tmp_path / "data"
    env = cli_env(online, data, tmp_path)
    _one_line_error(
        cli("models", "pull", "tiny-org/missing", data_dir=data, env=env), "no model", "check the id"
    )
    _one_line_error(cli("models", "pull", REPO, data_dir=data, env=env), "is gated", "token")
    not_model = tmp_path / "just-a-folder"
    not_model.mkdir()
    _one_line_error(cli("models", "add", str(not_model), data_dir=data, env=env), "no config.json")
    _one_line_error(cli("models", "rm", "tiny-org/missing", data_dir=data, env=env), "no downloaded model")
    token = subprocess.run(
        [sys.executable, "-m", "vrag_desktop", "models", "settings", "--token-stdin"],
        input="hf_x\n", capture_output=True, text=True, timeout=120, env={**os.environ, **env},
    )  # fmt: skip
    _one_line_error(token, "no system keyring")
    _one_line_error(
        cli("models", "settings", "--endpoint", "ftp://mirror", data_dir=data, env=env), "http(s) URL"
    )
    shown = cli(
        "models", "settings", "--endpoint", "https://hf-mirror.example", "--offline", data_dir=data, env=env
    )
    assert (
        shown.returncode == 0
        and "endpoint: https://hf-mirror.example" in shown.stdout
        and "offline:  on" in shown.stdout
    )
    saved = json.loads((data / "config" / "models.json").read_text())
    assert saved["endpoint"] == "https://hf-mirror.example" and saved["offline"] is True
    before = len(online.requests)
    _one_line_error(cli("models", "pull", REPO, data_dir=data, env=env), "offline mode is on")
    assert len(online.requests) == before  # the offline pull asked nothing
    listed = cli("models", "list", data_dir=data, env=env)
    assert listed.returncode == 0 and "offline mode is on" in listed.stdout and "Embedders:" in listed.stdout
    assert len(online.requests) == before


def test_a_damaged_settings_file_is_left_by_readers_and_moved_aside_by_a_save(tmp_path: Path) -> None:
    """``models list`` and ``models settings`` (showing) read it as the defaults and never write;
    the first change saves over it only after moving it to ``models.json.bad``: nothing is lost."""
    data = tmp_path / "data"
    config = data / "config"
    config.mkdir(parents=True)
    damaged = b'{"offline": true, "endpoint": '
    (config / "models.json").write_bytes(damaged)
    for args in (("models", "list"), ("models", "settings")):
        shown = cli(*args, data_dir=data, timeout=300)
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
        assert [p.name for p in config.iterdir()] == ["models.json"], args
        assert (config / "models.json").read_bytes() == damaged, args
    assert shown.stdout.splitlines()[0].endswith("(default)")  # the damaged file's endpoint is not used
    changed = cli("models", "settings", "--offline", data_dir=data, timeout=300)
    assert changed.returncode == 0 and "offline:  on" in changed.stdout, changed.stderr
    assert (config / "models.json.bad").read_bytes() == damaged
    assert json.loads((config / "models.json").read_text())["offline"] is True
