"""The verl bundle: settings mapped from our config, overrides, YAML, data and launch scripts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml  # type: ignore[import-untyped]
from vrag_trainer.verl import config as vc

from vrag_desktop.core.training.config import TrainConfig


def _cfg(**kw: object) -> TrainConfig:
    return TrainConfig(model="/models/qwen", dataset="d.json", search_url="http://h:8001", **kw)  # type: ignore[arg-type]


def test_settings_map_our_fields(tmp_path: Path) -> None:
    cfg = _cfg(
        group_size=6,
        prompts_per_step=16,
        learning_rate=2e-6,
        kl_coef=0.02,
        clip_ratio=0.25,
        max_images=7,
        ppo_epochs=3,
    )
    s = vc.verl_settings(cfg, tmp_path, train_file=tmp_path / "t.parquet", nodes=2, gpus_per_node=8)
    a, r = s["actor_rollout_ref"]["actor"], s["actor_rollout_ref"]["rollout"]
    assert s["algorithm"]["adv_estimator"] == "grpo" and r["n"] == 6 and s["data"]["train_batch_size"] == 16
    assert a["optim"]["lr"] == 2e-6 and a["optim"]["lr_warmup_steps"] == 5
    assert a["use_kl_loss"] and a["kl_loss_coef"] == 0.02 and a["kl_loss_type"] == "low_var_kl"
    assert (
        a["clip_ratio"] == 0.25 and a["entropy_coeff"] == 0.0 and a["policy_loss"]["loss_mode"] == "vanilla"
    )
    assert a["ppo_epochs"] == 3 and a["ppo_mini_batch_size"] == 16  # three passes over each batch
    assert vc.verl_settings(_cfg(), tmp_path, train_file="t")["actor_rollout_ref"]["actor"]["ppo_epochs"] == 1
    assert s["data"]["max_prompt_length"] == 8192 and r["max_model_len"] == 10240
    assert r["limit_images"] == 7 and r["gpu_memory_utilization"] == 0.6 and r["name"] == "vllm"
    assert r["multi_turn"]["max_user_turns"] == 4 and r["agent"]["default_agent_loop"] == "vrag_agent"
    t = s["trainer"]
    assert (t["nnodes"], t["n_gpus_per_node"], t["save_freq"], t["resume_mode"]) == (2, 8, 25, "auto")
    assert t["logger"] == ["console", "file", "tensorboard"]
    assert Path(t["default_local_dir"]).is_relative_to(tmp_path)
    assert s["actor_rollout_ref"]["model"]["external_lib"] == "vrag_trainer.verl.agent_loop"
    assert s["vrag"]["train_config"] == cfg.to_dict()


def test_ggpo_selects_the_ggpo_loss_and_vimrag_the_segment_estimator(tmp_path: Path) -> None:
    s = vc.verl_settings(_cfg(algorithm="ggpo", agent="vimrag"), tmp_path, train_file="t")
    a = s["actor_rollout_ref"]["actor"]
    assert a["policy_loss"]["loss_mode"] == "ggpo" and a["loss_agg_mode"] == "seq-mean-token-mean"
    assert s["algorithm"]["adv_estimator"] == "segment_grpo"
    assert s["actor_rollout_ref"]["rollout"]["agent"]["default_agent_loop"] == "vimrag_agent"


def test_overrides_and_yaml_agree(tmp_path: Path) -> None:
    s = vc.verl_settings(_cfg(), tmp_path, train_file="/d/t.parquet", config_file="/r/config.json")
    ov = vc.hydra_overrides(s)
    assert "actor_rollout_ref.rollout.n=5" in ov and "algorithm.adv_estimator=grpo" in ov
    assert "+actor_rollout_ref.rollout.limit_images=25" in ov and "+vrag.config_file=/r/config.json" in ov
    assert "trainer.logger=[console,file,tensorboard]" in ov
    assert not any(o.startswith(("vrag.", "+vrag.train_config")) for o in ov)
    doc = yaml.safe_load(vc.yaml_text(s))
    assert doc["defaults"] == ["ppo_trainer", "_self_"]
    assert doc["actor_rollout_ref"]["actor"]["optim"]["lr"] == 1e-6
    assert doc["vrag"]["train_config"]["judge"]["kind"] == "profile"


def test_file_logger_path_is_new_per_launch(tmp_path: Path) -> None:
    assert vc.file_logger_path(tmp_path, "a") != vc.file_logger_path(tmp_path, "b")
    script = vc.launch_script(tmp_path, tmp_path / "verl")
    assert 'VERL_FILE_LOGGER_PATH="$RUN/verl/metrics-$LAUNCH_ID.jsonl"' in script and "date -u" in script
    (tmp_path / "launch.sh").write_text(script)
    assert subprocess.run(["bash", "-n", str(tmp_path / "launch.sh")]).returncode == 0
    recipe = vc.ray_recipe(tmp_path, 3, 4)
    assert "ray start --head" in recipe and "--address=<head-ip>:6379" in recipe and "12 GPUs" in recipe


def test_bundle_writes_parquet_config_and_scripts(toy_data: Path, dataset_file: Path, tmp_path: Path) -> None:
    from vrag_trainer.__main__ import main

    cfg_file = tmp_path / "cfg.json"
    cfg = _cfg().with_changes(dataset=str(dataset_file), corpora=("toy",), data_dir=str(toy_data))
    cfg = cfg.with_changes(judge=cfg.judge.__class__(kind="exact"))
    import json

    cfg_file.write_text(json.dumps(cfg.to_dict()))
    out = tmp_path / "run"
    assert (
        main(["verl", "--config", str(cfg_file), "--out", str(out), "--nodes", "2", "--gpus-per-node", "4"])
        == 0
    )
    rows = pq.read_table(out / "verl" / "train.parquet").to_pylist()
    assert [r["extra_info"]["question"] for r in rows][:1] == ["What was the revenue of Alpha Corp in 2023?"]
    assert rows[0]["file_name"] == "alpha.pdf" and rows[0]["reference_page"] == [1]
    doc = yaml.safe_load((out / "verl" / "verl_ppo.yaml").read_text())
    assert doc["trainer"]["nnodes"] == 2 and doc["data"]["train_files"] == str(
        (out / "verl" / "train.parquet").resolve()
    )
    assert yaml.safe_load((out / "verl" / "agent_loops.yaml").read_text())[0]["_target_"].endswith(
        "VragAgentLoop"
    )
    assert (out / "config.json").is_file() and (out / "verl" / "launch.sh").stat().st_mode & 0o100
    # the same config again regenerates; a different one is refused, naming why
    assert main(["verl", "--config", str(cfg_file), "--out", str(out)]) == 0
    cfg_file.write_text(json.dumps({**cfg.to_dict(), "group_size": 3}))
    assert main(["verl", "--config", str(cfg_file), "--out", str(out)]) == 2


def test_cluster_refusals_name_the_field(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from vrag_trainer.__main__ import main

    f = tmp_path / "c.json"
    f.write_text(json.dumps({"model": "m", "dataset": "d.json"}))
    assert main(["verl", "--config", str(f), "--out", str(tmp_path / "r")]) == 2
    assert "search_url" in capsys.readouterr().err
    f.write_text(json.dumps({"model": "m", "dataset": "d.json", "search_url": "http://h:1"}))
    assert main(["verl", "--config", str(f), "--out", str(tmp_path / "r")]) == 2
    assert "judge.kind" in capsys.readouterr().err


def test_a_bundle_verl_cannot_run_is_refused_naming_why(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """VimRAG (one output per graph node) and GGPO need the multi-output agent-loop manager that is
    not written: ``vrag_trainer verl`` refuses them (exit 2) before writing anything."""
    import json

    from vrag_trainer.__main__ import main

    base = {"model": "m", "dataset": "d.json", "search_url": "http://h:1", "judge": {"kind": "exact"}}
    for extra, field in (({"agent": "vimrag"}, "agent:"), ({"algorithm": "ggpo"}, "algorithm:")):
        f = tmp_path / "c.json"
        f.write_text(json.dumps({**base, **extra}))
        out = tmp_path / f"run-{field[:-1]}"
        assert main(["verl", "--config", str(f), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert field in err and "multi-output agent-loop manager" in err and "not written yet" in err
        assert not out.exists()
    with pytest.raises(ValueError, match="agent: VimRAG gives one verl output per graph node"):
        vc.write_bundle(_cfg(agent="vimrag"), tmp_path / "direct", [])
    assert not (tmp_path / "direct").exists()
    assert vc.unsupported(_cfg()) is None
