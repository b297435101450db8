"""The New-run dialog's SFT warm start (offscreen): choosing *SFT warm start* hides the RL-only
fields and the reward box, shows its own, moves an untouched learning rate to the SFT one and
previews ``python -m vrag_trainer sft``; History's SFT export is counted as trajectories and one
without assistant turns turns Start off naming the file; *Start from* lists the SFT runs (picking
one sets the base model), and a warm start of another architecture turns Start off naming both.
The Training panel lists an SFT run and plots its loss rows (an SFT run logs no reward)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qt.test_training_new_run import _dataset, _dialog, _model, _ready, no_trainer_env, ready_env
from vrag_desktop.core.runtime.venv import venv_python
from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.launch import trainer_argv
from vrag_desktop.core.training.rundir import TrainRun

__all__ = ["no_trainer_env", "ready_env"]  # the fixtures, used here by name
WAIT = 30000


def _export(tmp_path: Path, with_turns: bool = True) -> Path:
    (tmp_path / "sft_images").mkdir(exist_ok=True)
    (tmp_path / "sft_images" / "a.jpg").write_bytes(b"img")
    turns = [{"role": "assistant", "content": "<answer>450 kg</answer>"}] if with_turns else []
    sample = {
        "id": "r1",
        "messages": [{"role": "user", "content": "Question: payload? <image>"}, *turns],
        "images": ["sft_images/a.jpg"],
    }
    path = tmp_path / ("sft.json" if with_turns else "no_turns.json")
    path.write_text(json.dumps([sample]))
    return path


def _choose_file(qtbot: Any, dlg: Any, path: Path) -> None:
    dlg.form.dataset.set_file(str(path))
    qtbot.waitUntil(lambda: dlg.match is not None, timeout=WAIT)
    _ready(qtbot, dlg)


def test_sft_shows_its_fields_and_previews_the_sft_command(
    qtbot: Any, indexed: Any, tmp_path: Path, ready_env: Path
) -> None:
    _dataset(indexed, "atlas", ["robots.pdf"] * 2)
    dlg = _dialog(qtbot, indexed, str(_model(tmp_path)), judge=None)  # no model chosen: SFT needs no judge
    form = dlg.form
    assert not form.rows["sft.batch_size"][1].isVisibleTo(dlg)
    assert form.reward_box.isVisibleTo(dlg) and form.rows["group_size"][1].isVisibleTo(dlg)
    form.algorithm.setCurrentIndex(form.algorithm.findData("sft"))
    assert not form.reward_box.isVisibleTo(dlg)
    for key in ("group_size", "kl_coef", "ppo_epochs", "dynamic_sampling.enabled"):
        assert not form.rows[key][1].isVisibleTo(dlg), key
    assert form.rows["sft.batch_size"][1].isVisibleTo(dlg)
    assert form.fields["learning_rate"].text() == "1e-05"  # type: ignore[attr-defined]
    cfg = dlg.config
    assert cfg is not None, dlg.blockers()
    assert (cfg.algorithm, cfg.agent, cfg.learning_rate, cfg.sft.batch_size) == ("sft", "vrag", 1e-5, 16)
    run_dir = indexed.data_dir / "training" / "sft-vrag"
    python = venv_python(indexed.layout.trainer_env)
    assert dlg.argv == trainer_argv(python, "sft", config=run_dir / "launch-config.json", run=run_dir)
    _ready(qtbot, dlg)
    assert dlg.match_label.text().startswith("2 of 2 items match the chosen corpora")
    assert dlg.ok_button.isEnabled(), dlg.blockers()
    form.fields["sft.batch_size"].setText("0")  # type: ignore[attr-defined]
    assert dlg.config is None and form.error_text("sft.batch_size") == "must be >= 1, not 0"
    form.fields["sft.batch_size"].setText("4")  # type: ignore[attr-defined]
    form.algorithm.setCurrentIndex(form.algorithm.findData("grpo"))  # back: the RL rate again
    assert form.fields["learning_rate"].text() == "1e-06"  # type: ignore[attr-defined]
    assert form.reward_box.isVisibleTo(dlg)


def test_an_sft_export_counts_its_trajectories_and_one_without_turns_stops_start(
    qtbot: Any, indexed: Any, tmp_path: Path, ready_env: Path
) -> None:
    dlg = _dialog(qtbot, indexed, str(_model(tmp_path)))
    dlg.form.algorithm.setCurrentIndex(dlg.form.algorithm.findData("sft"))
    _choose_file(qtbot, dlg, _export(tmp_path))
    assert dlg.match_label.text().startswith("1 of 1 trajectories of the SFT export can be trained on")
    assert dlg.ok_button.isEnabled(), dlg.blockers()
    bad = _export(tmp_path, with_turns=False)
    _choose_file(qtbot, dlg, bad)
    assert not dlg.ok_button.isEnabled()
    assert str(bad) in dlg.match_label.text() and "no sample has an assistant turn" in dlg.match_label.text()


def test_start_from_lists_sft_runs_and_refuses_another_architecture(
    qtbot: Any, indexed: Any, tmp_path: Path, ready_env: Path
) -> None:
    model = _model(tmp_path)
    cfg = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(
        json.dumps({**cfg, "architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl"})
    )
    sft = TrainRun.create(
        indexed.data_dir / "training" / "warm",
        TrainConfig(algorithm="sft", model=str(model), dataset="atlas"),
    )
    ckpt = sft.checkpoint_dir(8)
    ckpt.mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        (ckpt / name).write_bytes((model / name).read_bytes())
    sft.mark_complete(ckpt, 8)
    _dataset(indexed, "atlas", ["robots.pdf"] * 2)
    dlg = _dialog(qtbot, indexed)
    form = dlg.form
    qtbot.waitUntil(lambda: form.warm_runs.isEnabled(), timeout=WAIT)
    actions = form.warm_runs.menu().actions()
    assert [a.text() for a in actions] == [
        "No warm start: the base model itself",
        f"warm (vrag, step 8) — {model}",
    ]
    actions[1].trigger()
    assert form.init_from.text() == str(sft.root) and form.model.text() == str(model)
    _ready(qtbot, dlg)
    assert dlg.config is not None and dlg.config.init_from == str(sft.root)
    assert "starts from the weights at step 8 of run" in dlg.model_label.text()
    assert dlg.ok_button.isEnabled(), dlg.blockers()
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(
        json.dumps(
            {**cfg, "architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl"}
        )
    )
    (other / "model.safetensors").write_bytes(b"\0" * 64)
    form.model.setText(str(other))
    _ready(qtbot, dlg)
    assert not dlg.ok_button.isEnabled()
    text = dlg.status.text()
    assert "init_from:" in text and "Qwen2VLForConditionalGeneration" in text
    assert "Qwen2_5_VLForConditionalGeneration" in text


def test_the_panel_plots_an_sft_runs_loss(qtbot: Any, ctx: Any) -> None:
    from qt.test_training_panel import _panel

    run = TrainRun.create(
        ctx.layout.training / "warm", TrainConfig(algorithm="sft", model="m", dataset="d.json")
    )
    run.write_state(status="finished", step=3)
    for i in range(1, 4):
        run.append_metrics({"step": i, "loss": 3.0 / i, "tokens": 918.0, "token_accuracy": 0.1 * i})
    panel = _panel(qtbot, ctx)
    qtbot.waitUntil(lambda: panel.row(run.root) is not None, timeout=10_000)
    row = panel.row(run.root)
    assert row is not None and row.algorithm == "sft" and row.reward is None
    panel.select(run.root)
    qtbot.waitUntil(lambda: panel.view.rows_seen == 3, timeout=10_000)
    qtbot.waitUntil(lambda: panel.view.plots.built, timeout=10_000)
    panel.view.plots.redraw()
    assert panel.view.plots.point_count("loss") == 3 and panel.view.plots.point_count("reward") == 0
    panel.shutdown()
