"""Settings dialog on real files: values persist, damaged files and unusable data directories are handled."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from doubles import tmpfs
from PySide6.QtWidgets import QApplication, QDialog

from vrag_desktop.core.settings import AppSettings
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.infra import theme
from vrag_desktop.qt.settings_dialog import SettingsDialog, check_data_dir


@pytest.fixture(autouse=True)
def _system_theme_after() -> Iterator[None]:
    yield
    app = QApplication.instance()
    if isinstance(app, QApplication):
        theme.apply_theme(app, "system")


def _dialog(ctx: AppContext, qtbot: Any) -> SettingsDialog:
    dlg = SettingsDialog(ctx)
    qtbot.addWidget(dlg)
    dlg.show()
    return dlg


def _settings_file(ctx: AppContext) -> Path:
    return ctx.config_dir / "settings.json"


def test_values_persist_for_the_next_start(ctx: AppContext, qtbot: Any, tmp_path: Path) -> None:
    dlg = _dialog(ctx, qtbot)
    new_data = tmp_path / "elsewhere" / "vrag-data"
    dlg.data_dir_edit.setText(str(new_data))
    assert dlg.data_dir_note.isVisible() and "reload" in dlg.data_dir_note.text()
    dlg.embedder_combo.setCurrentText("Qwen/Qwen3-VL-Embedding-2B")
    dlg.agent_combo.setCurrentIndex(dlg.agent_combo.findData("vimrag"))
    dlg.top_k_spin.setValue(5)
    dlg.max_steps_spin.setValue(20)
    dlg.thinking_check.setChecked(False)
    with qtbot.waitSignal(dlg.settingsApplied, timeout=2000) as sig:
        dlg.ok_button.click()
    assert sorted(sig.args[0]) == sorted(["data_dir", "embedder", "agent", "top_k", "max_steps", "thinking"])
    assert dlg.result() == QDialog.DialogCode.Accepted
    assert ctx.data_dir == new_data.resolve() and new_data.is_dir() and not list(new_data.iterdir())
    assert ctx.runs.root == new_data.resolve() / "runs"  # the stores reopened there

    again = AppContext.load(config_dir=ctx.config_dir)  # a new start: no --data-dir
    assert again.settings_message is None
    assert again.data_dir == new_data.resolve()
    s = again.settings
    assert (s.embedder, s.agent, s.top_k, s.max_steps, s.thinking) == (
        "Qwen/Qwen3-VL-Embedding-2B",
        "vimrag",
        5,
        20,
        False,
    )
    shown = _dialog(again, qtbot)
    assert shown.embedder_combo.currentText() == "Qwen/Qwen3-VL-Embedding-2B"
    assert shown.agent_combo.currentData() == "vimrag" and shown.top_k_spin.value() == 5
    assert not shown.thinking_check.isChecked() and shown.data_dir_edit.text() == str(new_data.resolve())


def test_ok_without_changes_and_cancel_write_nothing(ctx: AppContext, qtbot: Any) -> None:
    dlg = _dialog(ctx, qtbot)
    with qtbot.waitSignal(dlg.settingsApplied, timeout=2000) as sig:
        dlg.ok_button.click()
    assert sig.args == [[]] and not _settings_file(ctx).exists()
    dlg = _dialog(ctx, qtbot)
    dlg.top_k_spin.setValue(9)
    dlg.reject()
    assert ctx.settings.top_k == 3 and not _settings_file(ctx).exists()


def test_damaged_settings_file_opens_with_defaults_and_says_so(tmp_path: Path, qtbot: Any) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "settings.json").write_text('{"top_k": 7, "theme": ', encoding="utf-8")
    ctx = AppContext.for_dirs(data_dir=tmp_path / "data", config_dir=cfg)
    assert ctx.settings_message and "damaged" in ctx.settings_message
    assert list(cfg.glob("settings.damaged-*.json"))  # what the person wrote is kept aside
    dlg = _dialog(ctx, qtbot)
    assert dlg.banner.isVisible() and dlg.banner_label.text() == ctx.settings_message
    defaults = AppSettings()
    assert dlg.top_k_spin.value() == defaults.top_k and dlg.embedder_combo.currentText() == defaults.embedder
    assert dlg.theme_combo.currentData() == "system"
    dlg.top_k_spin.setValue(4)
    dlg.ok_button.click()
    assert json.loads((cfg / "settings.json").read_text())["top_k"] == 4  # saving repairs the file


def test_invalid_values_are_reset_and_the_rest_kept(tmp_path: Path, qtbot: Any) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "settings.json").write_text(json.dumps({"top_k": 999, "theme": "purple", "max_steps": 12}))
    ctx = AppContext.for_dirs(data_dir=tmp_path / "data", config_dir=cfg)
    dlg = _dialog(ctx, qtbot)
    assert dlg.banner.isVisible() and "reset" in dlg.banner_label.text()
    assert dlg.top_k_spin.value() == 3 and dlg.theme_combo.currentData() == "system"
    assert dlg.max_steps_spin.value() == 12


def test_data_dir_under_a_file_is_an_inline_error_and_changes_nothing(
    ctx: AppContext, qtbot: Any, tmp_path: Path
) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("not a folder")
    before_dir, before = ctx.data_dir, AppSettings(**vars(ctx.settings))
    dlg = _dialog(ctx, qtbot)
    dlg.top_k_spin.setValue(8)
    dlg.data_dir_edit.setText(str(blocker / "vrag"))
    applied: list[Any] = []
    dlg.settingsApplied.connect(applied.append)
    dlg.ok_button.click()
    assert dlg.isVisible() and dlg.result() != QDialog.DialogCode.Accepted
    assert dlg.error_box.isVisible() and f"{blocker} is a file, not a folder" in dlg.error_label.text()
    assert applied == [] and ctx.data_dir == before_dir and vars(ctx.settings) == vars(before)
    assert not _settings_file(ctx).exists() and blocker.read_text() == "not a folder"
    dlg.data_dir_edit.setText(str(blocker))  # the file itself
    dlg.ok_button.click()
    assert dlg.error_label.text() == f"{blocker} is a file, not a folder." and dlg.isVisible()
    dlg.data_dir_edit.setText("relative/path")
    dlg.ok_button.click()
    assert "full path" in dlg.error_label.text() and not Path("relative").exists()
    dlg.data_dir_edit.setText(str(tmp_path / "fine"))  # editing clears the error; a good folder works
    assert not dlg.error_box.isVisible()
    dlg.ok_button.click()
    assert dlg.result() == QDialog.DialogCode.Accepted and ctx.settings.top_k == 8


def test_empty_embedder_is_refused(ctx: AppContext, qtbot: Any) -> None:
    dlg = _dialog(ctx, qtbot)
    dlg.embedder_combo.setCurrentText("   ")
    dlg.ok_button.click()
    assert dlg.isVisible() and "embedder" in dlg.error_label.text().lower()
    assert not _settings_file(ctx).exists()


def test_settings_that_cannot_be_saved_are_an_inline_error(tmp_path: Path, qtbot: Any) -> None:
    blocker = tmp_path / "cfg-is-a-file"
    blocker.write_text("x")
    ctx = AppContext.for_dirs(data_dir=tmp_path / "data", config_dir=blocker / "cfg")
    dlg = _dialog(ctx, qtbot)
    dlg.top_k_spin.setValue(6)
    dlg.ok_button.click()
    assert dlg.isVisible() and "Could not save settings" in dlg.error_label.text()
    assert ctx.settings.top_k == 3  # put back: the app still runs on what is saved


def test_browse_and_restore_defaults(ctx: AppContext, qtbot: Any, tmp_path: Path) -> None:
    from vrag_desktop.core.paths import resolve_data_dir

    dlg = _dialog(ctx, qtbot)
    starts: list[str] = []
    dlg.choose_directory = lambda start: starts.append(start) or str(tmp_path / "picked")
    dlg.browse_button.click()
    assert starts == [str(ctx.data_dir)] and dlg.data_dir_edit.text() == str(tmp_path / "picked")
    dlg.top_k_spin.setValue(11)
    dlg.theme_combo.setCurrentIndex(dlg.theme_combo.findData("dark"))
    dlg.restore_button.click()
    assert dlg.top_k_spin.value() == 3 and dlg.theme_combo.currentData() == "system"
    assert dlg.data_dir_edit.text() == str(resolve_data_dir(None))
    assert not _settings_file(ctx).exists()  # restoring only fills the form


def test_theme_choice_applies_to_the_app(ctx: AppContext, qtbot: Any) -> None:
    app = QApplication.instance()
    dlg = _dialog(ctx, qtbot)
    dlg.theme_combo.setCurrentIndex(dlg.theme_combo.findData("dark"))
    dlg.ok_button.click()
    dark_window = app.palette().color(app.palette().ColorRole.Window)
    assert theme.is_dark(app.palette()) and theme.effective_theme() == "dark"
    dlg = _dialog(ctx, qtbot)
    assert dlg.theme_combo.currentData() == "dark"
    dlg.theme_combo.setCurrentIndex(dlg.theme_combo.findData("light"))
    with qtbot.waitSignal(dlg.settingsApplied, timeout=2000) as sig:
        dlg.ok_button.click()
    assert sig.args == [["theme"]]
    light_window = app.palette().color(app.palette().ColorRole.Window)
    assert dark_window.lightness() < light_window.lightness() and not theme.is_dark(app.palette())
    assert json.loads(_settings_file(ctx).read_text())["theme"] == "light"


# ------------------------------------------------------------------ real full / read-only disks
@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs of our own (needs permission to mount; skipped elsewhere)."""
    with tmpfs(tmp_path / "mnt", "64k") as mnt:
        yield mnt


def test_data_dir_on_a_full_disk_is_refused_and_leaves_nothing(tiny_disk: Path) -> None:
    with pytest.raises(OSError), open(tiny_disk / "filler", "wb", buffering=0) as fh:  # fill it up
        while True:
            fh.write(b"\0" * 4096)
            fh.flush()
            os.fsync(fh.fileno())
    problem = check_data_dir(tiny_disk / "vrag" / "data")
    assert problem and "the disk is full" in problem
    assert not (tiny_disk / "vrag").exists()  # the folders made for the check are gone again


def test_data_dir_on_a_read_only_disk_is_refused(tiny_disk: Path, ctx: AppContext, qtbot: Any) -> None:
    (tiny_disk / "existing").mkdir()
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_disk)], check=True)
    assert check_data_dir(tiny_disk / "new") == f"Cannot create {tiny_disk / 'new'}: the disk is read-only."
    dlg = _dialog(ctx, qtbot)
    dlg.data_dir_edit.setText(str(tiny_disk / "existing"))
    dlg.ok_button.click()
    assert (
        dlg.isVisible()
        and dlg.error_label.text() == f"Cannot write in {tiny_disk / 'existing'}: the disk is read-only."
    )
    assert not _settings_file(ctx).exists()
