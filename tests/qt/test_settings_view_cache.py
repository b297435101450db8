"""The Settings dialog's page-view cache row on real files: usage counted off the GUI thread, Clear
empties the cache, the cap is saved and applied, and an off cache says so."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_page_view_cache import _fill

from vrag_desktop.core.agents import page_views
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.settings_dialog import SettingsDialog

MB = page_views.MB


@pytest.fixture
def views(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    d = tmp_path / "views"
    monkeypatch.setenv(page_views.CACHE_ENV, str(d))
    monkeypatch.delenv(page_views.LIMIT_ENV, raising=False)
    monkeypatch.setattr(page_views, "_cap", page_views._Cap())
    yield d
    page_views.flush()


def _dialog(ctx: AppContext, qtbot: Any) -> SettingsDialog:
    dlg = SettingsDialog(ctx)
    qtbot.addWidget(dlg)
    dlg.show()
    return dlg


def test_usage_is_shown_and_clear_empties_the_cache(ctx: AppContext, qtbot: Any, views: Path) -> None:
    files = _fill(views, 3, 2 * MB)
    mine = views / "notes.txt"
    mine.write_text("not a view")
    dlg = _dialog(ctx, qtbot)
    row = dlg.view_cache_row
    qtbot.waitUntil(lambda: not row.busy(), timeout=5000)
    assert row.label.text() == "Page views kept: 3 pages, 6.0 MB"
    assert row.clear_button.isEnabled() and str(views) in row.label.toolTip()
    with qtbot.waitSignal(row.usageShown, timeout=5000) as sig:
        row.clear_button.click()
        assert not row.clear_button.isEnabled()  # no second click while it runs
    assert sig.args == [0, 0] and row.label.text() == "Page views kept: none"
    assert not row.clear_button.isEnabled() and not any(f.exists() for f in files) and mine.exists()
    assert dlg.view_cache_spin.value() == 2048


def test_cap_is_saved_applied_and_a_smaller_one_trims(ctx: AppContext, qtbot: Any, views: Path) -> None:
    files = _fill(views, 4, 300_000)
    page_views.configure(ctx.settings.view_cache_mb * MB)  # as the app does at start
    dlg = _dialog(ctx, qtbot)
    dlg.view_cache_spin.setValue(1)
    assert dlg.view_cache_spin.text().replace("\u00a0", " ").endswith("1 MB")
    with qtbot.waitSignal(dlg.settingsApplied, timeout=2000) as sig:
        dlg.ok_button.click()
    assert sig.args == [["view_cache_mb"]]
    assert json.loads((ctx.config_dir / "settings.json").read_text())["view_cache_mb"] == 1
    assert page_views.limit() == 1 * MB
    page_views.flush()  # the smaller cap was applied on the cache's thread
    assert [f.exists() for f in files] == [False, True, True, True]  # 0.9 MB: the oldest went
    again = AppContext.load(config_dir=ctx.config_dir)
    assert again.settings.view_cache_mb == 1 and _dialog(again, qtbot).view_cache_spin.value() == 1


def test_keep_none_and_restore_defaults(ctx: AppContext, qtbot: Any, views: Path) -> None:
    dlg = _dialog(ctx, qtbot)
    dlg.view_cache_spin.setValue(0)
    assert dlg.view_cache_spin.text() == "Keep none"
    dlg.restore_button.click()
    assert dlg.view_cache_spin.value() == 2048
    dlg.view_cache_spin.setValue(0)
    dlg.ok_button.click()
    assert ctx.settings.view_cache_mb == 0 and page_views.limit() == 0


def test_an_off_cache_says_so(
    ctx: AppContext, qtbot: Any, views: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(page_views.CACHE_ENV, "off")
    row = _dialog(ctx, qtbot).view_cache_row
    assert not row.busy() and "not kept" in row.label.text() and page_views.CACHE_ENV in row.label.text()
    assert not row.clear_button.isEnabled()


def test_the_variable_s_override_is_shown(
    ctx: AppContext, qtbot: Any, views: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(page_views.LIMIT_ENV, "100")
    dlg = _dialog(ctx, qtbot)
    assert f"{page_views.LIMIT_ENV}=100 overrides" in dlg.view_cache_hint.text()
