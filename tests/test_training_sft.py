"""The supervised warm start on the app's side (no training library): ``algorithm: sft`` and its
table, History's SFT export read and refused by name, a dataset without answers, ``init_from``
resolved from a run, a checkpoint or a model folder and refused for another architecture (both
named), and ``vrag-desktop train sft`` / the plan launching ``python -m vrag_trainer sft``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_cli_train import train
from test_training_launch import make_fake_trainer

from vrag_desktop.core.training import plan
from vrag_desktop.core.training.config import ConfigError, TrainConfig, load_config
from vrag_desktop.core.training.rundir import TrainRun
from vrag_desktop.core.training.sft import is_sft_export, read_sft_export, sft_source_problem
from vrag_desktop.core.training.warmstart import check_init_from, resolve_init

QWEN2 = {"architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl", "hidden_size": 64,
         "num_hidden_layers": 2, "vocab_size": 1000}  # fmt: skip
QWEN25 = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
          "text_config": {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 1000}}  # fmt: skip


def model_dir(path: Path, config: dict[str, Any], weights: str = "model.safetensors") -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    (path / weights).write_bytes(b"\0" * 8)
    return path


def export_file(tmp_path: Path, samples: list[dict[str, Any]], images: tuple[str, ...] = ()) -> Path:
    for name in images:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"img")
    path = tmp_path / "sft.json"
    path.write_text(json.dumps(samples))
    return path


GOOD = {
    "id": "run1",
    "messages": [
        {"role": "user", "content": "Question: where?"},
        {"role": "assistant", "content": "<search>where</search>"},
        {"role": "user", "content": "<image>"},
        {"role": "assistant", "content": "<answer>Oslo</answer>"},
    ],
    "images": ["sft_images/run1-a.jpg"],
}


# ---- config ---------------------------------------------------------------------------------------
def test_sft_is_an_algorithm_with_its_own_table() -> None:
    cfg = TrainConfig.from_mapping(
        {"algorithm": "sft", "model": "m", "dataset": "d", "sft": {"batch_size": 8}}
    )
    assert cfg.agent == "vrag" and cfg.sft.batch_size == 8 and cfg.init_from == ""
    assert cfg.resolved_output_dir(Path("/data")).name == "sft-vrag"
    assert TrainConfig.from_mapping(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match=r"sft\.batchsize: unknown field \(did you mean 'batch_size'\?\)"):
        TrainConfig.from_mapping({"model": "m", "dataset": "d", "sft": {"batchsize": 8}})
    with pytest.raises(ConfigError, match=r"sft\.batch_size: must be >= 1"):
        TrainConfig.from_mapping({"model": "m", "dataset": "d", "sft": {"batch_size": 0}})


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"generator": "vllm"}, "generator: an SFT run samples nothing"),
        ({"dynamic_sampling": {"enabled": True}}, "dynamic_sampling.enabled: is a GRPO/GGPO option"),
        ({"overlong": {"enabled": True}}, "overlong.enabled: is a GRPO/GGPO option"),
        ({"validation": {"eval_steps": 5}}, "validation.eval_steps: an SFT run draws no validation curve"),
    ],
)
def test_rl_only_switches_are_refused_for_sft_by_name(fields: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        TrainConfig.from_mapping({"algorithm": "sft", "model": "m", "dataset": "d", **fields})
    TrainConfig.from_mapping({"algorithm": "grpo", "model": "m", "dataset": "d", "generator": "vllm"})


# ---- History's SFT export --------------------------------------------------------------------------
def test_an_export_is_told_from_a_dataset_and_read_with_its_images(tmp_path: Path) -> None:
    path = export_file(tmp_path, [GOOD], ("sft_images/run1-a.jpg",))
    assert is_sft_export(str(path))
    (tmp_path / "ds.json").write_text(json.dumps({"examples": [{"uid": "q", "query": "?"}]}))
    (tmp_path / "split.json").write_text(json.dumps([{"uid": "q", "question": "?", "answer": "a"}]))
    assert not is_sft_export(str(tmp_path / "ds.json")) and not is_sft_export(str(tmp_path / "split.json"))
    export = read_sft_export(path)
    (sample,) = export.samples
    assert sample.images == ((tmp_path / "sft_images" / "run1-a.jpg").resolve(),)
    assert [m["role"] for m in sample.messages] == ["user", "assistant", "user", "assistant"]


def test_an_export_without_assistant_turns_is_refused_naming_the_file(tmp_path: Path) -> None:
    no_turns = {"id": "r2", "messages": [{"role": "user", "content": "Question: where?"}], "images": []}
    path = export_file(tmp_path, [no_turns])
    with pytest.raises(ConfigError) as got:
        read_sft_export(path)
    assert got.value.field == "dataset"
    assert str(path) in str(got.value) and "no sample has an assistant turn" in str(got.value)
    cfg = TrainConfig(algorithm="sft", model="m", dataset=str(path))
    problem = sft_source_problem(cfg, tmp_path)
    assert problem is not None and str(path) in problem
    with pytest.raises(ConfigError, match="no sample has an assistant turn"):
        plan.check_warm_start(cfg)


def test_bad_samples_are_left_out_and_named(tmp_path: Path) -> None:
    missing_image = {**GOOD, "id": "r3", "images": ["sft_images/gone.jpg"]}
    wrong_count = {**GOOD, "id": "r4", "images": []}
    no_turns = {"id": "r5", "messages": [{"role": "user", "content": "q"}], "images": []}
    path = export_file(tmp_path, [GOOD, missing_image, wrong_count, no_turns], ("sft_images/run1-a.jpg",))
    export = read_sft_export(path)
    assert [s.id for s in export.samples] == ["run1"]
    why = dict(export.problems)
    assert "image file(s) missing" in why["r3"] and "gone.jpg" in why["r3"]
    assert why["r4"] == "1 <image> tag(s) but 0 image(s)"
    assert "no assistant turn" in why["r5"]
    assert export.lines()[0] == "1 of 4 trajectorie(s) of sft.json can be trained on"


def test_a_dataset_without_answers_gives_the_teacher_nothing_to_say(tmp_path: Path) -> None:
    items = [{"uid": "q1", "query": "Where?", "meta_info": {"file_name": "a.pdf", "reference_page": [1]}}]
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"examples": items}))
    cfg = TrainConfig(algorithm="sft", model="m", dataset=str(path))
    problem = sft_source_problem(cfg, tmp_path)  # the dataset reader names the item and the field
    assert problem is not None and problem.startswith(f"dataset: cannot read {path}")
    assert '(uid q1): "reference_answer" must be a non-empty string' in problem
    with pytest.raises(ConfigError, match="reference_answer"):
        plan.check_warm_start(cfg)
    assert sft_source_problem(cfg.with_changes(algorithm="grpo"), tmp_path) is None
    items[0]["reference_answer"] = "Oslo"
    path.write_text(json.dumps({"examples": items}))
    assert sft_source_problem(cfg, tmp_path) is None


# ---- init_from -------------------------------------------------------------------------------------
def _run(
    root: Path, model: str, *, checkpoints: dict[int, dict[str, Any] | None], export: bool = False
) -> Path:
    run = TrainRun.create(root, TrainConfig(algorithm="sft", model=model, dataset="d"))
    for step, config in checkpoints.items():
        ckpt = run.checkpoint_dir(step)
        if config is None:  # a LoRA adapter
            ckpt.mkdir(parents=True)
            (ckpt / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "elsewhere"}))
        else:
            model_dir(ckpt, config)
        run.mark_complete(ckpt, step)
    if export:
        model_dir(run.export_dir, QWEN2)
    return root


def test_init_from_names_a_run_a_checkpoint_or_a_model_folder(tmp_path: Path) -> None:
    base = str(model_dir(tmp_path / "base", QWEN2))
    full = _run(tmp_path / "full", base, checkpoints={2: QWEN2, 4: QWEN2})
    src = resolve_init(str(full))
    assert src.path == full / "checkpoints" / "checkpoint-4" and not src.adapter and src.step == 4
    exported = _run(tmp_path / "exported", base, checkpoints={4: QWEN2}, export=True)
    assert resolve_init(str(exported)).path == exported / "export"
    lora = _run(tmp_path / "lora", base, checkpoints={3: None})
    src = resolve_init(str(lora))
    assert src.adapter and src.base == base and src.run == lora  # the run's model, not the stale path
    direct = resolve_init(str(full / "checkpoints" / "checkpoint-2"))
    assert direct.step == 2 and direct.run == full
    assert resolve_init(base).path == Path(base)
    named = _run(tmp_path / "data" / "training" / "warm", base, checkpoints={5: QWEN2})
    src = resolve_init("warm", str(tmp_path / "data"))  # a run's name, under <data>/training
    assert src.path == named / "checkpoints" / "checkpoint-5"
    empty = _run(tmp_path / "empty", base, checkpoints={})
    with pytest.raises(
        ConfigError, match=r"init_from: the run .* has no complete checkpoint yet \(status created\)"
    ):
        resolve_init(str(empty))
    with pytest.raises(ConfigError, match=r"init_from: no such folder .*, and no training run of that name"):
        resolve_init(str(tmp_path / "nowhere"))
    (tmp_path / "nothing").mkdir()
    with pytest.raises(ConfigError, match="holds no model weights"):
        resolve_init(str(tmp_path / "nothing"))


def test_weights_of_another_architecture_are_refused_naming_both(tmp_path: Path) -> None:
    qwen2 = model_dir(tmp_path / "qwen2", QWEN2)
    qwen25 = model_dir(tmp_path / "qwen25", QWEN25)
    sft = _run(tmp_path / "sft", str(qwen2), checkpoints={2: QWEN2})
    ok = TrainConfig(model=str(qwen2), dataset="d", init_from=str(sft))
    assert check_init_from(ok) is not None
    bad = ok.with_changes(model=str(qwen25))
    with pytest.raises(ConfigError) as got:
        check_init_from(bad)
    text = str(got.value)
    assert got.value.field == "init_from"
    assert "is a Qwen2VLForConditionalGeneration (qwen2_vl, hidden size 64, 2 layers" in text
    assert f"but model {qwen25} is a Qwen2_5_VLForConditionalGeneration (qwen2_5_vl" in text
    wider = model_dir(tmp_path / "wider", {**QWEN2, "hidden_size": 128})  # same class, other shape
    with pytest.raises(ConfigError, match="hidden size 128"):
        check_init_from(ok.with_changes(model=str(wider)))
    lora = _run(tmp_path / "lora", str(qwen2), checkpoints={1: None})  # an adapter: its base decides
    with pytest.raises(ConfigError, match="Qwen2_5_VLForConditionalGeneration"):
        check_init_from(bad.with_changes(init_from=str(lora)))
    # a hub id not downloaded yet cannot be read here: the trainer checks once it has it
    assert check_init_from(ok.with_changes(model="nobody/not-downloaded-model")) is not None


def test_the_plan_refuses_a_foreign_warm_start_before_writing_anything(tmp_path: Path) -> None:
    from vrag_desktop.core.runtime.gpu import GPUReport

    qwen2 = model_dir(tmp_path / "qwen2", QWEN2)
    qwen25 = model_dir(tmp_path / "qwen25", QWEN25)
    cfg = TrainConfig(model=str(qwen25), dataset="d", init_from=str(qwen2), device="cpu")
    with pytest.raises(ConfigError, match=r"init_from: .*Qwen2VLForConditionalGeneration"):
        plan.new_run(cfg, tmp_path / "run", "python", gpus=GPUReport())
    assert not (tmp_path / "run").exists()
    p = plan.new_run(cfg.with_changes(model=str(qwen2)), tmp_path / "run", "python", gpus=GPUReport())
    assert p.argv[:4] == ["python", "-m", "vrag_trainer", "grpo"]


def test_the_plan_launches_the_trainers_sft_command(tmp_path: Path) -> None:
    from vrag_desktop.core.runtime.gpu import GPUReport

    path = export_file(tmp_path, [GOOD], ("sft_images/run1-a.jpg",))
    cfg = TrainConfig(algorithm="sft", model="m", dataset=str(path), device="cpu")
    p = plan.new_run(cfg, tmp_path / "run", "python", gpus=GPUReport())
    assert p.argv == [
        "python", "-m", "vrag_trainer", "sft", "--config", str(tmp_path / "run" / "launch-config.json"),
        "--run", str(tmp_path / "run"),
    ]  # fmt: skip
    assert p.what == "SFT training" and load_config(p.config_path or "").algorithm == "sft"


# ---- the command line --------------------------------------------------------------------------------
def test_train_sft_runs_like_grpo_and_refuses_an_export_without_turns(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VRAG_TRAINER_PYTHON", str(make_fake_trainer(tmp_path / "fake")))
    no_turns = export_file(tmp_path, [{"id": "r", "messages": [{"role": "user", "content": "q"}]}])
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"model": "m", "dataset": str(no_turns), "device": "cpu"}))
    rc, _out, err = train(capsys, "sft", "--config", str(cfg), "--run", str(tmp_path / "bad"))
    assert rc == 2 and f"dataset: {no_turns}: no sample has an assistant turn" in err, err
    assert not (tmp_path / "bad").exists()
    good = export_file(tmp_path, [GOOD], ("sft_images/run1-a.jpg",))
    cfg.write_text(json.dumps({"model": "m", "dataset": str(good), "device": "cpu", "name": "warm"}))
    rc, out, err = train(capsys, "sft", "--config", str(cfg), "--set", "max_steps=2")
    assert rc == 0, err
    run = TrainRun.open(data_dir / "training" / "warm")
    assert run.config().algorithm == "sft" and run.config().max_steps == 2 and run.state()["command"] == "sft"
    assert "Training finished at step" in out and "SFT training in the foreground" in err  # (a stand-in)


def test_the_walk_through_configs_are_valid() -> None:
    """docs/trainer.md's sample-corpus walk-through runs these two files as they are."""
    root = Path(__file__).resolve().parents[1]
    sft = load_config(root / "docs/examples/warm_start_sft.json")
    grpo = load_config(root / "docs/examples/warm_start_grpo.json")
    assert (sft.algorithm, sft.name, grpo.algorithm, grpo.init_from) == (
        "sft",
        "sample-sft",
        "grpo",
        "sample-sft",
    )
    assert sft.model == grpo.model and sft.dataset == grpo.dataset == "resources/sample_corpus/train.json"
    assert grpo.validation.dataset == "resources/sample_corpus/val.json" and grpo.validation.eval_steps
    for cfg in (sft, grpo):
        assert (root / cfg.dataset).is_file() and cfg.device == "cpu"
