"""The validation curve in the Training dock (issue 30, item 4): a run's ``val/`` rows are drawn
beside the training reward and accuracy and on a Validation plot of their own, the best step is
marked and named; the run view shows the best validation with "Export best", which exports that
step's checkpoint (``export --best``) through the trainer, or the warm start's weights when no
validation beat them; a run without validation shows none of it, and exporting its best is refused
with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_training_launch import make_fake_trainer

from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.rundir import TrainRun

VAL = [  # (step, val reward, val accuracy, best so far)
    (2, 0.30, 0.25, True),
    (4, 0.60, 0.50, True),
    (6, 0.45, 0.375, False),
]


def _rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    train = [{"step": s, "reward": 0.1 * s, "accuracy": 0.05 * s, "loss": 0.1} for s in range(1, 7)]
    val = [
        {"step": s, "val/reward": r, "val/accuracy": a, "val/format": 1.0, "val/ndcg": 0.5, "val/recall": 0.75,
         "val/items": 8.0, "best": b}
        for s, r, a, b in VAL
    ]  # fmt: skip
    return train, val


def _validated_run(root: Path, *, best: bool = True) -> TrainRun:
    cfg = TrainConfig(model="m", dataset="train.json", validation=_validation() if best else _off())
    run = TrainRun.create(root, cfg)
    train, val = _rows()
    for row in train:
        run.append_metrics(row)
    for step in (2, 4, 6):
        run.checkpoint_dir(step).mkdir(parents=True)
        run.mark_complete(run.checkpoint_dir(step), step)
    if best:
        for row in val:
            run.append_val_metrics(row)
        run.write_best(4, "val/reward", 0.60)
    run.write_state(status="finished", step=6)
    return run


def _validation() -> Any:
    from vrag_desktop.core.training.validation import ValidationConfig

    return ValidationConfig(dataset="val.json", eval_steps=2)


def _off() -> Any:
    from vrag_desktop.core.training.validation import ValidationConfig

    return ValidationConfig()


def _plots(qtbot: Any) -> Any:
    from vrag_desktop.qt.training.plots import MetricPlots

    plots = MetricPlots()
    qtbot.addWidget(plots)
    plots.resize(900, 1000)
    plots.show()
    return plots


def test_the_validation_curve_is_drawn_beside_the_training_reward_with_the_best_marked(qtbot: Any) -> None:
    plots = _plots(qtbot)
    train, val = _rows()
    plots.add_rows(train)
    plots.add_rows(val)
    plots.redraw()
    qtbot.waitUntil(lambda: plots.built, timeout=60_000)
    plots.redraw()
    # on the Reward and Accuracy plots, beside the training curves; the parts on their own plot
    reward, validation = plots.curves["val/reward"]
    assert list(reward.xData) == [2, 4, 6] and list(reward.yData) == [0.30, 0.60, 0.45]
    assert reward in plots.boxes["Reward"].addedItems and validation in plots.boxes["Validation"].addedItems
    assert plots.curves["val/accuracy"][0] in plots.boxes["Accuracy"].addedItems
    assert plots.point_count("reward") == 6 and plots.point_count("val/reward") == 3
    for key in ("val/format", "val/ndcg", "val/recall"):
        assert plots.point_count(key) == 3
    assert reward.opts["symbol"] == "o"  # a measurement every few steps: points, not a trace
    assert plots.plots["Validation"].isVisible()
    assert plots.titles["Validation"].text == "Validation — best: step 4 (reward 0.600)"
    assert len(plots.best_lines) == 2
    assert all(line.isVisible() and line.value() == 4 for line in plots.best_lines)
    plots.clear()
    assert not plots.plots["Validation"].isVisible()
    assert not any(line.isVisible() for line in plots.best_lines)


def test_a_run_without_validation_shows_no_validation_plot(qtbot: Any) -> None:
    plots = _plots(qtbot)
    plots.add_rows(_rows()[0])
    plots.redraw()
    qtbot.waitUntil(lambda: plots.built, timeout=60_000)
    assert plots.plots["Reward"].isVisible() and not plots.plots["Validation"].isVisible()
    assert plots.point_count("val/reward") == 0 and not any(line.isVisible() for line in plots.best_lines)


@pytest.fixture
def panel(qtbot: Any, ctx: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from vrag_desktop.qt.training.training_panel import TrainingPanel

    monkeypatch.setenv("VRAG_TRAINER_PYTHON", str(make_fake_trainer(tmp_path / "fake")))
    p = TrainingPanel(ctx)
    qtbot.addWidget(p)
    p.resize(1000, 800)
    p.show()
    yield p
    p.view.shutdown()


def test_export_best_exports_the_best_step_through_the_trainer(qtbot: Any, ctx: Any, panel: Any) -> None:
    run = _validated_run(ctx.layout.training / "validated")
    panel.select(run.root)
    view = panel.view
    qtbot.waitUntil(lambda: view.root == run.root and view.best is not None, timeout=10_000)
    row = view.best_row
    assert row.isVisible() and row.label.text() == "Best validation: step 4 · val/reward 0.600"
    qtbot.waitUntil(row.export_button.isEnabled, timeout=5_000)  # finished: nothing works on it
    row.export_button.click()
    text = view.detail.text()
    assert text.startswith("Export (best checkpoint): -m vrag_trainer export") and text.endswith("--best")
    qtbot.waitUntil(lambda: (run.export_dir / "config.json").is_file(), timeout=20_000)
    # the plots got the validation rows from the run directory
    view.tabs.setCurrentWidget(view.plots)
    qtbot.waitUntil(lambda: view.plots.built and view.plots.point_count("val/reward") == 3, timeout=10_000)


def test_a_run_without_validation_has_no_best_to_export(
    qtbot: Any, ctx: Any, panel: Any, reports: list[tuple[str, str, str]]
) -> None:
    run = _validated_run(ctx.layout.training / "plain", best=False)
    panel.select(run.root)
    view = panel.view
    qtbot.waitUntil(lambda: view.root == run.root and view.checkpoint == 6, timeout=10_000)
    assert not view.best_row.isVisible()
    assert panel.export_run(run.root, best=True) is None  # e.g. asked from elsewhere: refused, said
    (_level, title, message) = reports[-1]
    assert title == "Cannot export" and "plain has no best checkpoint: no validation has run" in message
    assert not run.export_dir.exists()


def test_a_gone_best_checkpoint_turns_export_best_off(qtbot: Any, ctx: Any, panel: Any) -> None:
    import shutil

    run = _validated_run(ctx.layout.training / "pruned")
    shutil.rmtree(run.checkpoint_dir(4))  # deleted by hand
    panel.select(run.root)
    view = panel.view
    qtbot.waitUntil(lambda: view.root == run.root and view.best is not None, timeout=10_000)
    row = view.best_row
    assert row.label.text().endswith("(its checkpoint is gone)") and not row.export_button.isEnabled()
    assert "gone from checkpoints/" in row.export_button.toolTip()


def _warm_started_run(root: Path, warm: Path) -> TrainRun:
    """Written before the rule: step 2 marked the best at 0.30, below the warm start's 0.375."""
    warm.mkdir(parents=True)
    (warm / "config.json").write_text("{}")
    cfg = TrainConfig(model="m", dataset="train.json", init_from=str(warm), validation=_validation())
    run = TrainRun.create(root, cfg)
    for step, value in ((0, 0.375), (2, 0.30), (4, 0.0)):
        run.append_val_metrics({"step": step, "val/reward": value, "best": step == 2})
        if step:
            run.checkpoint_dir(step).mkdir(parents=True)
            run.mark_complete(run.checkpoint_dir(step), step)
    run.write_best(2, "val/reward", 0.30)
    run.write_state(status="finished", step=4, init_weights=str(warm))
    return run


def test_when_no_validation_beat_the_warm_start_export_best_writes_its_weights(
    qtbot: Any, ctx: Any, panel: Any, tmp_path: Path
) -> None:
    run = _warm_started_run(ctx.layout.training / "warm", tmp_path / "sft" / "export")
    panel.select(run.root)
    view = panel.view
    qtbot.waitUntil(lambda: view.root == run.root and view.best is not None, timeout=10_000)
    row = view.best_row
    assert row.isVisible() and row.label.text() == (
        "No validation beat the warm start (val/reward 0.375 at step 0): Export best writes the warm "
        "start's weights"
    )
    assert str(tmp_path / "sft" / "export") in row.export_button.toolTip()
    qtbot.waitUntil(row.export_button.isEnabled, timeout=5_000)
    row.export_button.click()
    text = view.detail.text()
    assert text.startswith("Export (warm start's weights): -m vrag_trainer export") and text.endswith(
        "--best"
    )
    qtbot.waitUntil(lambda: (run.export_dir / "config.json").is_file(), timeout=20_000)
    # the Validation plot marks no best either: the old verdict at 0.30 is below the warm start
    plots = _plots(qtbot)
    plots.add_rows(run.val_metrics())
    assert plots.best is None


def test_the_new_run_dialog_says_the_split_and_refuses_a_set_with_nothing_to_validate(
    qtbot: Any, indexed: Any, tmp_path: Path
) -> None:
    import json

    from vrag_desktop.core.datasets import DatasetItem
    from vrag_desktop.qt.training.new_run_dialog import NewRunDialog

    for i in range(10):
        indexed.datasets.add_item(
            "atlas", DatasetItem(f"q{i}", "Payload?", "450 kg", "robots.pdf", (2,)), create=True
        )
    model = tmp_path / "tiny-model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"hidden_size": 64, "num_hidden_layers": 2}))
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    indexed.profiles.set_active("DashScope")  # a judge, so the form is valid
    indexed.current_model.sync()
    dlg = NewRunDialog(indexed)
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.form.model.setText(str(model))
    qtbot.waitUntil(lambda: dlg.match is not None, timeout=30_000)
    assert not dlg.validation_label.isVisible()  # off by default: nothing to say
    dlg.form.fields["validation.eval_steps"].setText("5")  # no validation set: a share is held out
    said = "1 of the 10 usable training item(s) are held out (validation.fraction 0.1, seed 0)"
    qtbot.waitUntil(lambda: said in dlg.validation_label.text(), timeout=30_000)
    assert (
        dlg.validation_label.isVisible()
        and "9 train; evaluated every 5 step(s)" in dlg.validation_label.text()
    )
    assert dlg.config is not None and dlg.config.validation.eval_steps == 5
    assert dlg.config.validation.dataset == ""  # "Held out of the training dataset"
    val = tmp_path / "val.json"
    row = {"uid": "v1", "query": "Q?", "reference_answer": "x", "meta_info": {"file_name": "far.pdf"}}
    val.write_text(json.dumps({"examples": [row]}), encoding="utf-8")
    dlg.form.val_dataset.set_file(str(val))
    qtbot.waitUntil(lambda: dlg.validation_error is not None, timeout=30_000)
    assert dlg.validation_label.text().startswith("validation.dataset: none of the 1 item(s) of")
    assert not dlg.ok_button.isEnabled() and dlg.validation_error in dlg.blockers()
    dlg.form.fields["validation.eval_steps"].setText("0")  # a set without a curve: named on its field
    assert dlg.config is None and "only when validation.eval_steps is above 0" in dlg.form.error_text(
        "validation.dataset"
    )
    dlg.form.algorithm.setCurrentIndex(dlg.form.algorithm.findData("sft"))  # no curve for SFT
    assert dlg.form.validation_box.isHidden()
