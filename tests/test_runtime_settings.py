"""The app's local vLLM settings file: round trip, damage recovery, defaults and the config they make."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from vrag_desktop.core.runtime.logfile import rotate_log
from vrag_desktop.core.runtime.settings import (
    ENTRYPOINT_ENV,
    VLLMSettings,
    app_log_path,
    default_venv,
    env_is_cpu,
    load_vllm_settings,
    save_vllm_settings,
    settings_path,
)
from vrag_desktop.core.runtime.vllm_env import MARKER


def test_round_trip_and_location(tmp_path: Path) -> None:
    s = VLLMSettings(
        model="/models/qwen",
        served_model_name="qwen",
        port=8123,
        max_model_len=8192,
        gpu_memory_utilization=0.85,
        tensor_parallel_size=2,
        dtype="bfloat16",
        limit_images=4,
        extra_args="--enforce-eager --seed 'a b'",
    )
    path = save_vllm_settings(s, tmp_path)
    assert path == tmp_path / "config" / "vllm.json" == settings_path(tmp_path)
    loaded, message = load_vllm_settings(tmp_path)
    assert message is None and loaded == s
    assert loaded.extra_argv() == ["--enforce-eager", "--seed", "a b"]


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    s, message = load_vllm_settings(tmp_path)
    assert s == VLLMSettings() and message is None
    assert s.problems() == {"model": "Choose a model folder or a Hugging Face model id."}


@pytest.mark.parametrize("damaged", [b"{not json", b"\xff\xfe not text", b"[1, 2]"])
def test_a_damaged_file_is_left_by_a_read_and_moved_aside_by_a_save(tmp_path: Path, damaged: bytes) -> None:
    """Loading uses the defaults and says so, but writes nothing: the file stays byte for byte, no
    sibling. Saving moves it to ``vllm.json.bad`` first, so what the person wrote is not lost."""
    path = settings_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(damaged)
    s, message = load_vllm_settings(tmp_path)
    assert s == VLLMSettings()
    assert message is not None and "unreadable" in message and "vllm.json.bad" in message
    assert [p.name for p in path.parent.iterdir()] == ["vllm.json"] and path.read_bytes() == damaged
    save_vllm_settings(VLLMSettings(model="m", port=8123), tmp_path)
    assert (path.parent / "vllm.json.bad").read_bytes() == damaged
    assert load_vllm_settings(tmp_path) == (VLLMSettings(model="m", port=8123), None)


def test_invalid_fields_are_reset_one_by_one(tmp_path: Path) -> None:
    path = settings_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "model": "m",
                "port": 70000,
                "gpu_memory_utilization": 1.5,
                "host": 5,
                "extra_args": "--x 'open",
                "dtype": "float16",
                "unknown": 1,
            }
        )
    )
    s, message = load_vllm_settings(tmp_path)
    assert (s.model, s.dtype) == ("m", "float16")  # the valid ones are kept
    assert (s.port, s.gpu_memory_utilization, s.host, s.extra_args) == (None, None, "127.0.0.1", "")
    assert message is not None
    for field in ("port", "gpu_memory_utilization", "host", "extra_args"):
        assert field in message


def test_problems_name_each_bad_field() -> None:
    bad = VLLMSettings(
        model=" ",
        port=0,
        max_model_len=0,
        tensor_parallel_size=0,
        limit_images=0,
        extra_args='"unclosed',
        ready_timeout=0,
    ).problems()
    assert set(bad) == {
        "model",
        "port",
        "max_model_len",
        "tensor_parallel_size",
        "limit_images",
        "extra_args",
        "ready_timeout",
    }
    assert "quotation" in bad["extra_args"].lower()


def test_to_config_uses_setup_venv_and_entrypoint_override(tmp_path: Path) -> None:
    s = VLLMSettings(model="fake-model", served_model_name="fake", limit_images=2, extra_args="--a 1")
    cfg = s.to_config(tmp_path, environ={})
    assert cfg.python is None and cfg.entrypoint == ("-m", "vllm.entrypoints.openai.api_server")
    assert cfg.limit_mm_per_prompt == {"image": 2} and cfg.extra_args == ["--a", "1"]
    assert cfg.model_name == "fake"
    venv = default_venv(tmp_path)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    assert s.to_config(tmp_path, environ={}).python is None  # incomplete: no marker yet
    (venv / MARKER).write_text(json.dumps({"cpu": True}))
    cfg = s.to_config(tmp_path, environ={ENTRYPOINT_ENV: "/x/fake.py --fake-delay 0.1"})
    assert cfg.python == str(venv) and cfg.entrypoint == ("/x/fake.py", "--fake-delay", "0.1")
    assert env_is_cpu(cfg.python) is True and env_is_cpu(venv / "bin" / "python") is True
    assert env_is_cpu(tmp_path) is None and env_is_cpu(None) is None
    chosen = VLLMSettings(model="m", python=str(tmp_path / "other")).to_config(tmp_path, environ={})
    assert chosen.python == str(tmp_path / "other")
    with pytest.raises(ValueError, match="Choose a model"):
        VLLMSettings().to_config(tmp_path)


def test_log_rotation(tmp_path: Path) -> None:
    log = app_log_path(tmp_path)
    assert log == tmp_path / "runtime" / "vllm-desktop.log"
    assert not rotate_log(log)  # missing: nothing to do
    log.parent.mkdir(parents=True)
    log.write_text("x" * 100)
    assert not rotate_log(log, limit=1000) and log.exists()
    assert rotate_log(log, limit=10)
    assert not log.exists() and (log.parent / "vllm-desktop.log.1").read_text() == "x" * 100
