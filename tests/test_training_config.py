"""The training config (every bad input refused with the field named) and the run directory (create,
state, metrics read while they grow, checkpoints that count only once COMPLETE, the STOP file)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from vrag_desktop.core.training.config import (
    RESUME_SAFE,
    ConfigError,
    JudgeConfig,
    TrainConfig,
    changed_fields,
    load_config,
    merge_overrides,
)
from vrag_desktop.core.training.rundir import TrainRun, TrainRunError

BASE = {"model": "tiny", "dataset": "d.json"}


def write(tmp_path: Path, data: Any, name: str = "c.json") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def test_defaults_are_the_originals() -> None:
    c = TrainConfig(**BASE)  # type: ignore[arg-type]
    assert (c.group_size, c.learning_rate, c.kl_coef, c.clip_ratio, c.max_turns) == (5, 1e-6, 0.01, 0.2, 4)
    assert (c.reward.judge, c.reward.format, c.reward.ndcg) == (0.7, 0.1, 0.2)
    assert TrainConfig.from_mapping(c.to_dict()) == c


@pytest.mark.parametrize(
    ("extra", "field", "needle"),
    [
        ({"modle": "x"}, "modle", "unknown field (did you mean 'model'?)"),
        ({"judge": {"knd": "exact"}}, "judge.knd", "did you mean 'kind'?"),
        ({"completely_unknown": 1}, "completely_unknown", "unknown field"),
        ({"group_size": "5"}, "group_size", "must be a number"),
        ({"group_size": 2.5}, "group_size", "must be a whole number"),
        ({"group_size": True}, "group_size", "must be a number"),
        ({"learning_rate": float("nan")}, "learning_rate", "must be finite"),
        ({"group_size": 1}, "group_size", "must be >= 2"),
        ({"clip_ratio": 0}, "clip_ratio", "must be > 0.0"),
        ({"clip_ratio": 1.5}, "clip_ratio", "must be <= 1.0"),
        ({"temperature": 11}, "temperature", "must be <= 10.0"),
        ({"max_response_length": 20000}, "max_response_length", "must be below max_model_len"),
        ({"vllm_gpu_memory_utilization": 0.99}, "vllm_gpu_memory_utilization", "must be <= 0.95"),
        ({"algorithm": "ppo"}, "algorithm", "must be one of grpo, ggpo"),
        ({"agent": "x"}, "agent", "must be one of vrag, vimrag"),
        ({"tensorboard": "yes"}, "tensorboard", "must be true or false"),
        ({"search_url": "localhost:1"}, "search_url", "http(s) URL"),
        ({"corpora": [1]}, "corpora", "list of corpus names"),
        ({"model": ""}, "model", "is required"),
        ({"dataset": "  "}, "dataset", "is required"),
        ({"judge": {"kind": "oracle"}}, "judge.kind", "must be one of profile, url, exact, anls"),
        ({"judge": {"kind": "url", "model": "m"}}, "judge.base_url", "http(s) base URL"),
        ({"judge": {"kind": "url", "base_url": "http://x"}}, "judge.model", "served model name"),
        ({"judge": {"retries": 50}}, "judge.retries", "must be <= 20"),
        ({"judge": "exact"}, "judge", "must be a table"),
        ({"reward": {"judge": -1}}, "reward.judge", "must be >= 0.0"),
        ({"reward": {"judge": 0, "format": 0, "ndcg": 0}}, "reward", "must not all be 0"),
        ({"generator": "vllm", "device": "cpu"}, "generator", "vllm generates on a GPU"),
    ],
)
def test_bad_values_name_the_field(extra: dict[str, Any], field: str, needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        TrainConfig.from_mapping({**BASE, **extra})
    assert exc.value.field == field and needle in str(exc.value), str(exc.value)
    assert str(exc.value).startswith(f"{field}: ")


def test_missing_model_and_dataset() -> None:
    with pytest.raises(ConfigError, match=r"^model: is required"):
        TrainConfig.from_mapping({"dataset": "d"})
    with pytest.raises(ConfigError, match=r"^dataset: is required"):
        TrainConfig.from_mapping({"model": "m"})
    with pytest.raises(ConfigError, match=r"^config: must be a mapping"):
        TrainConfig.from_mapping([1, 2])  # type: ignore[arg-type]


def test_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^config: no such file"):
        load_config(tmp_path / "none.json")
    with pytest.raises(ConfigError, match=r"^config: c.json is not valid JSON"):
        load_config(write(tmp_path, "{model: "))
    with pytest.raises(ConfigError, match=r"^config: must be a mapping"):
        load_config(write(tmp_path, "[1]"))
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(ConfigError, match=r"^config: cannot read"):
        load_config(tmp_path / "dir.json")
    c = load_config(write(tmp_path, {**BASE, "corpora": "docs"}), group_size=8, **{"judge.kind": "exact"})
    assert c.group_size == 8 and c.corpora == ("docs",) and c.judge == JudgeConfig(kind="exact")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="TOML needs tomllib")
def test_toml_files(tmp_path: Path) -> None:
    p = write(tmp_path, 'model = "m"\ndataset = "d"\n[judge]\nkind = "anls"\n', "c.toml")
    assert load_config(p).judge.kind == "anls"
    with pytest.raises(ConfigError, match=r"^config: c.toml is not valid TOML"):
        load_config(write(tmp_path, "model = ", "c.toml"))


def test_dotted_overrides_keep_the_other_fields_of_a_table() -> None:
    merged = merge_overrides(
        {"judge": {"kind": "url", "model": "m"}}, {"judge.base_url": "http://j", "seed": 1}
    )
    assert merged == {"judge": {"kind": "url", "model": "m", "base_url": "http://j"}, "seed": 1}
    with pytest.raises(ConfigError, match=r"^judge: must be a table"):
        merge_overrides({"judge": "x"}, {"judge.kind": "exact"})


def test_resume_changes() -> None:
    old = TrainConfig(**BASE)  # type: ignore[arg-type]
    new = old.with_changes(learning_rate=1e-5, group_size=8, reward=old.reward.__class__(judge=1.0))
    assert changed_fields(old, new) == ["group_size", "learning_rate", "reward.judge"]
    safe = old.with_changes(max_steps=100, save_steps=5, name="x", judge=JudgeConfig(kind="exact"))
    assert changed_fields(old, safe) == []
    assert {"max_steps", "judge", "tensorboard"} <= RESUME_SAFE


# ---------------------------------------------------------------- the run directory


def cfg() -> TrainConfig:
    return TrainConfig(**BASE)  # type: ignore[arg-type]


def test_create_refuses_a_run_or_a_non_empty_directory(tmp_path: Path) -> None:
    run = TrainRun.create(tmp_path / "run", cfg())
    assert run.config() == cfg() and run.state()["status"] == "created"
    with pytest.raises(TrainRunError, match="already holds a training run"):
        TrainRun.create(tmp_path / "run", cfg())
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(TrainRunError, match="not empty"):
        TrainRun.create(tmp_path / "other", cfg())
    with pytest.raises(TrainRunError, match="not a training run"):
        TrainRun.open(tmp_path / "other")
    launched = tmp_path / "launched"  # the app's launcher wrote its files first: the trainer may create
    launched.mkdir()
    for name in ("train.log", "process.json", "launch-config.json"):
        (launched / name).write_text("{}")
    TrainRun.check_free(launched)
    assert TrainRun.create(launched, cfg()).config() == cfg()
    with pytest.raises(TrainRunError, match="already holds"):
        TrainRun.check_free(launched)
    assert TrainRun.open(tmp_path / "run").root == run.root


def test_state_is_merged_and_checked(tmp_path: Path) -> None:
    run = TrainRun.create(tmp_path / "run", cfg())
    run.write_state(status="running", step=3)
    run.write_state(error="x")
    assert run.state()["step"] == 3 and run.state()["error"] == "x"
    with pytest.raises(ValueError, match="unknown run status"):
        run.write_state(status="dancing")
    run.state_path.write_text("{half")
    assert run.state()["status"] == "unknown"


def test_metrics_are_read_while_they_grow(tmp_path: Path) -> None:
    run = TrainRun.create(tmp_path / "run", cfg())
    assert run.read_metrics() == ([], 0)
    run.append_metrics({"step": 1, "reward": 0.1})
    run.append_metrics({"step": 2, "reward": float("nan")})
    with open(run.metrics_path, "a") as fh:
        fh.write('{"step": 3, "rew')  # a line still being written
    rows, offset = run.read_metrics()
    assert [r["step"] for r in rows] == [1, 2] and rows[1]["reward"] != rows[1]["reward"]
    with open(run.metrics_path, "a") as fh:
        fh.write('ard": 0.3}\nnot json\n')
    more, offset2 = run.read_metrics(offset)
    assert [r["step"] for r in more] == [3] and offset2 == run.metrics_path.stat().st_size  # junk skipped
    run.truncate_metrics(after_step=1)
    assert [r["step"] for r in run.metrics()] == [1]


def test_checkpoints_count_once_complete(tmp_path: Path) -> None:
    run = TrainRun.create(tmp_path / "run", cfg())
    assert run.last_checkpoint() is None and run.remove_incomplete_checkpoints() == []
    for step in (5, 10, 15):
        d = run.checkpoint_dir(step)
        d.mkdir(parents=True)
        (d / "model.safetensors").write_text("w")
        if step != 15:  # 15: the disk filled up (or a kill) before the marker
            run.mark_complete(d, step)
    (run.checkpoints / "notes").mkdir()
    assert [c.step for c in run.complete_checkpoints()] == [5, 10]
    assert run.last_checkpoint().step == 10  # type: ignore[union-attr]
    assert run.remove_incomplete_checkpoints() == [run.checkpoint_dir(15)]
    assert not run.checkpoint_dir(15).exists() and (run.checkpoints / "notes").exists()
    run.prune_checkpoints(keep=1)
    assert [c.step for c in run.complete_checkpoints()] == [10]


def test_stop_file(tmp_path: Path) -> None:
    run = TrainRun.create(tmp_path / "run", cfg())
    assert not run.stop_requested()
    run.request_stop()
    assert run.stop_requested() and run.stop_path.name == "STOP"
    run.clear_stop()
    run.clear_stop()  # twice is fine
    assert not run.stop_requested()


def test_replace_config_for_a_resume(tmp_path: Path) -> None:
    run = TrainRun.create(tmp_path / "run", cfg())
    run.replace_config(cfg().with_changes(max_steps=9))
    assert run.config().max_steps == 9
    run.config_path.write_text("{")
    with pytest.raises(TrainRunError, match="cannot read"):
        run.config()
    assert os.path.basename(run.log_path) == "train.log"
