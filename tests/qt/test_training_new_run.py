"""The New-run dialog on real inputs (offscreen): the original's defaults, a bad value naming its field
and disabling Start, the exact command in the preview, the match count over the indexed robots
corpus (and a dataset matching nothing), a folder that is not a model, the trainer environment
missing or broken (Start is off and says why; Create / Re-create shows; nothing is created by
opening), an output folder that cannot be written, a full disk at Start (the dialog stays open with
its values; nothing is left behind), and the last values remembered."""

from __future__ import annotations

import errno
import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from vrag_desktop.core.datasets import DatasetItem
from vrag_desktop.core.runtime.venv import venv_python
from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.launch import trainer_argv
from vrag_desktop.qt.training.new_run_dialog import NewRunDialog
from vrag_desktop.qt.training.run_form import NUMBERS

WAIT = 30000


@pytest.fixture(autouse=True)
def no_trainer_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No trainer env anywhere: not $VRAG_TRAINER_PYTHON, not the checkout's .venv-trainer."""
    from vrag_desktop.core.runtime import trainer_env

    monkeypatch.delenv(trainer_env.PYTHON_ENV, raising=False)
    monkeypatch.setattr(trainer_env, "repo_root", lambda: None)


def _fake_env(ctx: Any, missing: str = "") -> Path:
    """A trainer env the pre-flight takes for ready (its marker, and a ``python`` whose probe passes),
    or broken (the probe prints ``missing`` and fails): no TRL needed, nothing is trained."""
    from vrag_desktop.core.runtime.trainer_env import MARKER

    env = ctx.layout.trainer_env
    python = venv_python(env)
    python.parent.mkdir(parents=True, exist_ok=True)
    body = f'echo "{missing}"\nexit 1\n' if missing else "exit 0\n"
    python.write_text("#!/bin/sh\n" + body)
    python.chmod(0o755)
    (env / MARKER).write_text("{}")
    return python


@pytest.fixture
def ready_env(ctx: Any) -> Path:
    return _fake_env(ctx)


def _model(tmp_path: Path) -> Path:
    d = tmp_path / "tiny-model"
    d.mkdir()
    cfg = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "model.safetensors").write_bytes(b"\0" * 64)
    return d


def _dataset(ctx: Any, name: str, files: list[str]) -> None:
    for i, f in enumerate(files):
        ctx.datasets.add_item(name, DatasetItem(f"q{i}", "Payload?", "450 kg", f, (2,)), create=True)


def _dialog(qtbot: Any, ctx: Any, model: str = "", *, judge: str | None = "DashScope") -> NewRunDialog:
    """The dialog, with ``judge`` as the current model (the judge's default; None: none chosen)."""
    ctx.profiles.set_active(judge)
    ctx.current_model.sync()
    dlg = NewRunDialog(ctx)
    qtbot.addWidget(dlg)
    dlg.show()
    if model:
        dlg.form.model.setText(model)
    matched = lambda: dlg.match is not None or not dlg.form.dataset.chosen()  # noqa: E731
    qtbot.waitUntil(lambda: dlg.env is not None and matched(), timeout=WAIT)
    return dlg


def _type_output(dlg: NewRunDialog, text: str) -> None:
    """As typed (``setText`` alone is not an edit)."""
    dlg.form.output.textEdited.emit(text)  # marks it as the person's (before the text changes)
    dlg.form.output.setText(text)


def _checked_dialog(qtbot: Any, ctx: Any, tmp_path: Path) -> NewRunDialog:
    """The dialog on a two-item dataset and a tiny model, its checks done."""
    _dataset(ctx, "atlas", ["robots.pdf"] * 2)
    dlg = _dialog(qtbot, ctx, str(_model(tmp_path)))
    _ready(qtbot, dlg)
    return dlg


def _ready(qtbot: Any, dlg: NewRunDialog) -> None:
    """Wait for the debounced checks of what is typed now."""
    checked = lambda: not dlg._check_later.isActive() and not dlg._checking.running  # noqa: E731
    qtbot.waitUntil(lambda: dlg.estimate is not None and checked(), timeout=WAIT)
    qtbot.wait(300)


def test_defaults_are_the_originals_and_the_preview_is_the_exact_command(
    qtbot: Any, indexed: Any, tmp_path: Path, ready_env: Path
) -> None:
    _dataset(indexed, "atlas", ["robots.pdf"] * 3)
    model = _model(tmp_path)
    dlg = _dialog(qtbot, indexed, str(model))
    cfg = dlg.config
    assert cfg is not None
    original = TrainConfig(model="m", dataset="d")
    for key, _ in NUMBERS:
        assert getattr(cfg, key) == getattr(original, key), key
    assert (cfg.algorithm, cfg.agent, cfg.reward, cfg.judge.kind) == (
        "grpo",
        "vrag",
        original.reward,
        "profile",
    )
    assert cfg.dataset == "atlas" and cfg.corpora == ("robots",) and cfg.data_dir == str(indexed.data_dir)
    run_dir = indexed.data_dir / "training" / "grpo-vrag"
    assert dlg.run_dir == run_dir and dlg.form.output.text() == str(run_dir)
    python = venv_python(indexed.layout.trainer_env)  # the (fake) trainer env's
    assert dlg.argv == trainer_argv(python, "grpo", config=run_dir / "launch-config.json", run=run_dir)
    text = dlg.preview.toPlainText()
    assert shlex.join(dlg.argv) in text and '"group_size": 5' in text
    dlg.form.algorithm.setCurrentIndex(dlg.form.algorithm.findData("ggpo"))  # GGPO trains VimRAG
    assert dlg.argv[3] == "ggpo" and dlg.run_dir == indexed.data_dir / "training" / "ggpo-vimrag"
    _ready(qtbot, dlg)
    assert dlg.match_label.text().startswith("3 of 3 items match the chosen corpora")
    assert dlg.ok_button.isEnabled(), dlg.blockers()
    assert dlg.estimate is not None and dlg.estimate.params


def test_a_bad_value_turns_its_field_red_and_disables_start(
    qtbot: Any, indexed: Any, tmp_path: Path, ready_env: Path
) -> None:
    dlg = _checked_dialog(qtbot, indexed, tmp_path)
    assert dlg.ok_button.isEnabled(), dlg.blockers()
    group = dlg.form.fields["group_size"]
    group.setText("1")  # type: ignore[attr-defined]
    assert not dlg.ok_button.isEnabled()
    assert dlg.form.error_text("group_size").startswith("must be >= 2 (rollouts per prompt), not 1: ")
    assert group.property("invalid") == "true"  # the theme draws its border in the error colour
    assert "group_size: must be >= 2" in dlg.preview.toPlainText()
    group.setText("5")  # type: ignore[attr-defined]
    dlg.form.fields["learning_rate"].setText("fast")  # type: ignore[attr-defined]
    assert not dlg.ok_button.isEnabled() and "must be a number" in dlg.form.error_text("learning_rate")
    assert dlg.form.error_text("group_size") == ""
    dlg.form.fields["learning_rate"].setText("1e-6")  # type: ignore[attr-defined]
    dlg.form.fields["reward.judge"].setText("-1")  # type: ignore[attr-defined]
    assert "must be >= 0.0" in dlg.form.error_text("reward.judge") and not dlg.ok_button.isEnabled()
    dlg.form.fields["reward.judge"].setText("0.7")  # type: ignore[attr-defined]
    dlg.form.judge_kind.setCurrentIndex(dlg.form.judge_kind.findData("url"))
    assert "http(s) base URL" in dlg.form.error_text("judge.base_url") and not dlg.ok_button.isEnabled()
    dlg.form.judge_kind.setCurrentIndex(dlg.form.judge_kind.findData("anls"))
    _ready(qtbot, dlg)
    assert dlg.ok_button.isEnabled(), dlg.blockers()


def test_more_gpus_than_the_machine_has_turns_gpus_red(
    qtbot: Any, indexed: Any, tmp_path: Path, ready_env: Path
) -> None:
    """The machine's real GPU probe against the gpus field: refused in the form, with both counts,
    before Start (the same check the launch makes)."""
    dlg = _checked_dialog(qtbot, indexed, tmp_path)
    qtbot.waitUntil(lambda: dlg.gpu_report is not None, timeout=WAIT)
    dlg.form.fields["gpus"].setText("64")  # type: ignore[attr-defined]
    text = dlg.form.error_text("gpus")
    assert text.startswith("64 ") and "this machine has" in text, text
    assert not dlg.ok_button.isEnabled()
    dlg.form.fields["gpus"].setText("0")  # type: ignore[attr-defined]
    assert dlg.form.error_text("gpus") == ""


def test_no_matching_item_and_a_folder_that_is_not_a_model(qtbot: Any, indexed: Any, tmp_path: Path) -> None:
    _dataset(indexed, "elsewhere", ["other.pdf", "third.pdf"])
    (tmp_path / "photos").mkdir()
    dlg = _dialog(qtbot, indexed, str(tmp_path / "photos"))
    _ready(qtbot, dlg)
    assert dlg.match == (0, 2, dlg.match[2] if dlg.match else [])
    assert dlg.match_label.text().startswith("No item can be trained on: 0 of 2 items match")
    assert "other.pdf is not in the indexed files of robots" in dlg.match_label.text()
    assert "not a Hugging Face model folder (no config.json)" in dlg.model_label.text()
    assert not dlg.ok_button.isEnabled()
    assert any("no dataset item matches" in b for b in dlg.blockers())
    dlg.accept()
    assert dlg.result() == 0  # refused: nothing accepted


def test_the_trainer_env_missing_offers_to_create_it(qtbot: Any, ctx: Any) -> None:
    dlg = _dialog(qtbot, ctx)
    assert dlg.env is not None and dlg.env.state == "missing"
    assert not dlg.env_box.isHidden() and dlg.env_button.text() == "Create the trainer environment"
    assert str(ctx.layout.trainer_env) in dlg.env_label.text()
    assert not ctx.layout.trainer_env.exists()  # nothing created by opening the dialog
    # no corpus, no dataset: Start stays off and says why
    assert not dlg.ok_button.isEnabled() and dlg.form.error_text("model") == "is required"
    assert dlg.match_label.text().startswith("Choose a dataset")


def test_a_dataset_file_is_picked_with_the_file_entry(
    qtbot: Any, indexed: Any, tmp_path: Path, ready_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """File… (the Dataset field's last entry) asks for a JSON, JSONL or Parquet file; the file is the
    run's dataset, listed once however often it is picked."""
    from PySide6.QtWidgets import QFileDialog

    _dataset(indexed, "atlas", ["robots.pdf"] * 2)
    dlg = _dialog(qtbot, indexed, str(_model(tmp_path)))
    picker, path = dlg.form.dataset, str(tmp_path / "items.parquet")
    filters: list[str] = []
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a: filters.append(a[3]) or (path, ""))
    for _ in range(2):
        picker.setCurrentIndex(picker.count() - 1)
        picker.activated.emit(picker.count() - 1)
    assert filters == ["Datasets (*.json *.jsonl *.parquet);;All files (*)"] * 2
    assert [picker.itemText(i) for i in range(picker.count())] == ["atlas", path, "File…"]
    assert dlg.config is not None and dlg.config.dataset == path


def test_start_is_off_while_the_trainer_env_is_missing_or_broken(
    qtbot: Any, indexed: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vrag_desktop.core.runtime import trainer_env

    dlg = _checked_dialog(qtbot, indexed, tmp_path)
    # everything else is fine: only the missing environment holds Start, and the dialog says so
    assert dlg.blockers() == ["the trainer environment does not exist yet: create it below"]
    assert not dlg.ok_button.isEnabled()
    assert "Start is off: the trainer environment does not exist yet" in dlg.status.text()
    assert not dlg.env_box.isHidden() and dlg.env_button.text() == "Create the trainer environment"

    # broken: the env is there (its marker too) but its Python cannot find TRL and the trainer
    _fake_env(indexed, missing="vrag_trainer trl")
    dlg.refresh_env()
    qtbot.waitUntil(lambda: dlg.env is not None and dlg.env.state == "broken", timeout=WAIT)
    assert "broken" in dlg.env_label.text() and "lacks vrag_trainer trl" in dlg.env_label.text()
    assert dlg.env_button.text() == "Re-create the trainer environment"
    assert not dlg.ok_button.isEnabled() and "environment is broken: re-create it" in dlg.status.text()
    dlg.accept()
    assert dlg.result() == 0 and dlg.isVisible()  # refused, nothing lost

    # Re-create: forced (a ready marker must not make it a no-op); then Start follows
    seen: list[bool] = []

    def fake_create(target: Path, *, mode: str, cancel: Any, force: bool = False) -> Any:
        seen.append(force)
        yield "Re-creating"
        return _fake_env(indexed)

    monkeypatch.setattr(trainer_env, "create_trainer_env", fake_create)
    dlg.env_button.click()
    qtbot.waitUntil(lambda: dlg.env is not None and dlg.env.ready, timeout=WAIT)
    assert seen == [True] and dlg.env_box.isHidden()
    qtbot.waitUntil(dlg.ok_button.isEnabled, timeout=WAIT)
    assert dlg.status.text() == ""


def test_an_output_folder_that_cannot_be_written_disables_start(
    qtbot: Any, indexed: Any, tmp_path: Path, ready_env: Path
) -> None:
    dlg = _checked_dialog(qtbot, indexed, tmp_path)
    assert dlg.ok_button.isEnabled(), dlg.blockers()
    # a regular file where a folder must be made: refused for root too
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file")
    _type_output(dlg, str(blocker / "run"))
    _ready(qtbot, dlg)
    assert not dlg.ok_button.isEnabled()
    assert f"{blocker} is a file, so {blocker / 'run'} cannot be created" in dlg.status.text()
    assert blocker.read_text() == "a file"
    if os.geteuid() != 0:  # root writes into read-only folders: this half needs a normal user
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        _type_output(dlg, str(locked / "run"))
        _ready(qtbot, dlg)
        assert not dlg.ok_button.isEnabled() and f"{locked} is not writable" in dlg.status.text()
    _type_output(dlg, str(tmp_path / "fine" / "run"))
    _ready(qtbot, dlg)
    assert dlg.ok_button.isEnabled(), dlg.blockers()


def test_a_full_disk_at_start_keeps_the_dialog_and_its_values(
    qtbot: Any, indexed: Any, tmp_path: Path, ready_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Start from the panel's dialog while the disk is full (the atomic write of the launch config
    raises ENOSPC): a clear message in the dialog, which stays open with every value; no folder or
    file is left behind and nothing is launched."""
    from vrag_desktop.core import fsutil
    from vrag_desktop.qt.training.training_panel import TrainingPanel

    _dataset(indexed, "atlas", ["robots.pdf"] * 2)
    indexed.current_model.choose("DashScope")  # the judge's model
    panel = TrainingPanel(indexed)
    qtbot.addWidget(panel)
    dlg = panel.new_run()
    assert isinstance(dlg, NewRunDialog)
    dlg.form.model.setText(str(_model(tmp_path)))
    qtbot.waitUntil(lambda: dlg.env is not None and dlg.match is not None, timeout=WAIT)
    dlg.form.fields["group_size"].setText("8")  # type: ignore[attr-defined]
    dlg.form.name.setText("full-disk")
    _ready(qtbot, dlg)
    assert dlg.ok_button.isEnabled(), dlg.blockers()
    values = dlg.form.mapping(str(indexed.data_dir))
    run_dir = indexed.data_dir / "training" / "full-disk"

    def full(path: Any, obj: Any, **_kw: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    room = fsutil.atomic_write_json
    monkeypatch.setattr(fsutil, "atomic_write_json", full)
    dlg.ok_button.click()
    assert dlg.result() == 0 and dlg.isVisible() and dlg.launched is None
    assert "Not started: The disk is full: no space left to write" in dlg.status.text()
    assert "launch-config.json" in dlg.status.text()
    assert dlg.form.mapping(str(indexed.data_dir)) == values  # every value kept
    assert not run_dir.exists() and not panel.processes.running()
    # typing on clears the refusal
    monkeypatch.setattr(fsutil, "atomic_write_json", room)
    dlg.form.name.setText("roomy")
    assert "disk is full" not in dlg.status.text()
    panel.shutdown()


def test_accept_gives_the_config_and_remembers_the_values(
    qtbot: Any, indexed: Any, tmp_path: Path, ready_env: Path
) -> None:
    _dataset(indexed, "atlas", ["robots.pdf"] * 2)
    dlg = _dialog(qtbot, indexed, str(_model(tmp_path)))
    dlg.form.fields["group_size"].setText("8")  # type: ignore[attr-defined]
    dlg.form.fields["ppo_epochs"].setText("0")  # type: ignore[attr-defined]
    assert "must be >= 1" in dlg.form.error_text("ppo_epochs") and not dlg.ok_button.isEnabled()
    dlg.form.fields["ppo_epochs"].setText("2")  # type: ignore[attr-defined]
    dlg.form.fields["clip_ratio_high"].setText("0.28")  # type: ignore[attr-defined]
    dlg.form.fields["dynamic_sampling.enabled"].setChecked(True)  # type: ignore[attr-defined]
    dlg.form.name.setText("first")
    _ready(qtbot, dlg)
    dlg.accept()
    cfg = dlg.config
    assert dlg.result() == 1 and cfg is not None and cfg.group_size == 8
    assert (cfg.ppo_epochs, cfg.clip_ratio_high, cfg.dynamic_sampling.enabled) == (2, 0.28, True)
    assert dlg.run_dir == indexed.data_dir / "training" / "first"
    again = _dialog(qtbot, indexed)
    assert again.form.fields["group_size"].text() == "8"  # type: ignore[attr-defined]
    assert again.form.fields["ppo_epochs"].text() == "2"  # type: ignore[attr-defined]
    assert again.form.fields["dynamic_sampling.enabled"].isChecked()  # type: ignore[attr-defined]
    assert again.form.model.text() == str(tmp_path / "tiny-model") and again.form.name.text() == ""


def test_a_model_too_large_for_the_gpu_turns_start_off_with_the_estimate(
    qtbot: Any, indexed: Any, tmp_path: Path, ready_env: Path
) -> None:
    """The 7B VRAG model, full fine-tuning, on a 24 GB GPU (the probe's answer, as NVML gives it):
    the pre-flight shows the estimate and Start is off, naming the GPU and LoRA; with LoRA at the
    documented settings it fits and Start is on."""
    from vrag_desktop.core.models.catalogue_data import QWEN25_VL_7B
    from vrag_desktop.core.runtime.gpu import GPUInfo, GPUReport

    model = tmp_path / "qwen7b"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(QWEN25_VL_7B))
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    _dataset(indexed, "atlas", ["robots.pdf"] * 2)
    dlg = _dialog(qtbot, indexed, str(model))
    qtbot.waitUntil(lambda: dlg.gpu_report is not None, timeout=WAIT)
    dlg._gpus_found(GPUReport((GPUInfo(0, "RTX 4090", 24 * 1024**3, 23 * 1024**3),), "550", "12.8"))
    _ready(qtbot, dlg)
    assert dlg.estimate is not None and dlg.estimate.refusal is not None
    assert "peak ~" in dlg.memory_label.text() and "GiB per GPU" in dlg.memory_label.text()
    assert not dlg.ok_button.isEnabled()
    assert any("RTX 4090, 24 GiB" in b and "lora.enabled: true" in b for b in dlg.blockers())
    assert "RTX 4090" in dlg.warn_label.text() and dlg.warn_box.isVisibleTo(dlg)
    dlg.estimate = None
    dlg.form.set_values(
        {
            **dlg.config.to_dict(),  # type: ignore[union-attr]
            "lora": {"enabled": True},  # the form's LoRA box
            "gradient_checkpointing": True,
            "micro_batch_rows": 1,
            "max_model_len": 6144,
            "max_response_length": 1024,
            "max_images": 8,
        }
    )
    dlg._edited()
    _ready(qtbot, dlg)
    assert dlg.estimate is not None and dlg.estimate.refusal is None, dlg.estimate.lines()
    assert dlg.ok_button.isEnabled(), dlg.blockers()


def test_ggpo_switches_to_vimrag_and_refuses_vrag_by_name(
    qtbot: Any, indexed: Any, tmp_path: Path, ready_env: Path
) -> None:
    dlg = _checked_dialog(qtbot, indexed, tmp_path)
    assert dlg.form.agent.currentData() == "vrag"
    dlg.form.algorithm.setCurrentIndex(dlg.form.algorithm.findData("ggpo"))
    assert dlg.form.agent.currentData() == "vimrag" and dlg.config is not None
    assert dlg.config.agent == "vimrag" and dlg.form.error_text("agent") == ""
    dlg.form.agent.setCurrentIndex(dlg.form.agent.findData("vrag"))  # chosen back by hand: refused
    assert dlg.config is None and not dlg.ok_button.isEnabled()
    assert dlg.form.error_text("agent").startswith("GGPO trains the VimRAG agent, not VRAG")
    dlg.form.algorithm.setCurrentIndex(dlg.form.algorithm.findData("grpo"))  # GRPO trains either
    assert dlg.form.agent.currentData() == "vrag" and dlg.config is not None


def test_an_exact_judge_on_sentence_answers_is_a_pre_flight_warning(
    qtbot: Any, indexed: Any, tmp_path: Path, ready_env: Path
) -> None:
    """A warning, not a blocker: Start stays on; the words are the CLI's (core/training/learnable)."""
    answers = ["The Atlas robot can lift a payload of 450 kg.", "It runs for fourteen hours on one charge."]
    for i, answer in enumerate(answers):
        indexed.datasets.add_item(
            "prose", DatasetItem(f"s{i}", "Q?", answer, "robots.pdf", (2,)), create=True
        )
    dlg = _dialog(qtbot, indexed, str(_model(tmp_path)))
    dlg.form.dataset.setCurrentIndex(dlg.form.dataset.findData("prose"))
    qtbot.waitUntil(lambda: dlg.answers is not None, timeout=WAIT)
    _ready(qtbot, dlg)
    assert not any("judge.kind: exact" in w for w in dlg.warnings())  # a model judges: fine
    dlg.form.judge_kind.setCurrentIndex(dlg.form.judge_kind.findData("exact"))
    assert dlg.warn_box.isVisibleTo(dlg), dlg.warnings()
    assert "2 of 2 reference answers look like whole sentences" in dlg.warn_label.text()
    assert "anls" in dlg.warn_label.text()
    assert dlg.ok_button.isEnabled(), dlg.blockers()
    dlg.form.judge_kind.setCurrentIndex(dlg.form.judge_kind.findData("anls"))
    assert "judge.kind: exact" not in dlg.warn_label.text()
