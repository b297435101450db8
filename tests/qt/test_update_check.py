"""Help → Check for updates…, the Settings dialog's update feed, and the once-at-start notice, on a
real window against a real feed on loopback (tests/feed_server.py): the check runs while the window
stays free, and what it found is shown; nothing is asked of any feed until one is set."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from feed_server import FeedServer
from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.infra import open_file
from vrag_desktop.qt.main_window import MainWindow
from vrag_desktop.qt.settings_dialog import SettingsDialog
from vrag_desktop.qt.updates import UpdateDialog, check_at_start

NEWER = {
    "version": "99.0",
    "url": "https://example.org/releases/99.0",
    "notes": "Faster search.\n<b>not bold</b>",
}
WAIT_MS = 60_000  # answers come from a thread: generous for a loaded 2-core machine


@pytest.fixture(autouse=True)
def _online(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)


@pytest.fixture
def feed() -> Iterator[FeedServer]:
    with FeedServer() as server:
        yield server


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the app asked the desktop to open (nothing is opened)."""
    got: list[str] = []

    def record(url: QUrl) -> bool:
        got.append(url.toString())
        return True

    monkeypatch.setattr(open_file, "opener", record)
    return got


def _window(qtbot: Any, ctx: AppContext) -> MainWindow:
    w = MainWindow(ctx, first_run=False)
    qtbot.addWidget(w)
    w.show()
    return w


def test_help_check_runs_off_the_window_and_shows_a_newer_version(
    qtbot: Any, ctx: AppContext, feed: FeedServer, opened: list[str]
) -> None:
    ctx.settings.update_url = feed.hang("/feed", then=NEWER)
    w = _window(qtbot, ctx)
    help_menu = next(a.menu() for a in w.menuBar().actions() if a.text() == "&Help")
    next(a for a in help_menu.actions() if a.text() == "Check for updates…").trigger()
    dlg = w.update_dialog
    # the action returned while the feed still holds the request: the window was never blocked
    feed.wait_for_request()
    QApplication.processEvents()
    assert dlg.isVisible() and not dlg.isModal() and dlg.status == "checking"
    assert "Asking" in dlg.headline.text()
    feed.release.set()
    qtbot.waitUntil(lambda: dlg.status == "newer", timeout=WAIT_MS)
    assert "VRAG Desktop 99.0" in dlg.headline.text()
    assert dlg.notes.isVisible() and dlg.notes.toPlainText() == NEWER["notes"]  # shown as text, not markup
    assert dlg.page_button.isVisible() and not dlg.settings_button.isVisible()
    qtbot.mouseClick(dlg.page_button, Qt.MouseButton.LeftButton)
    assert opened == [NEWER["url"]]
    assert feed.requests == ["/feed"]


def test_no_feed_set_says_so_and_offers_settings(qtbot: Any, ctx: AppContext, feed: FeedServer) -> None:
    w = _window(qtbot, ctx)
    dlg = w.check_for_updates()
    assert dlg.status == "no-url" and "No update feed is set" in dlg.headline.text()
    assert dlg.settings_button.isVisible() and not dlg.page_button.isVisible()
    qtbot.mouseClick(dlg.settings_button, Qt.MouseButton.LeftButton)
    settings = next(
        d for d in QApplication.topLevelWidgets() if isinstance(d, SettingsDialog) and d.isVisible()
    )
    qtbot.addWidget(settings)
    assert settings.update_url_edit.hasFocus() or settings.focusWidget() is settings.update_url_edit
    settings.reject()
    assert feed.requests == []


def test_current_and_failed_checks_are_said(qtbot: Any, ctx: AppContext, feed: FeedServer) -> None:
    w = _window(qtbot, ctx)
    ctx.settings.update_url = feed.json("/old", {"version": "0.0.1"})
    dlg = w.check_for_updates()
    qtbot.waitUntil(lambda: dlg.status == "current", timeout=WAIT_MS)
    assert "newest version" in dlg.headline.text() and not dlg.page_button.isVisible()
    ctx.settings.update_url = feed.url("/missing")
    dlg = w.check_for_updates()
    qtbot.waitUntil(lambda: dlg.status == "error", timeout=WAIT_MS)
    assert "Could not check for updates" in dlg.headline.text() and "HTTP 404" in dlg.headline.text()
    assert dlg.settings_button.isVisible() and not dlg.page_button.isVisible()


def test_no_browser_puts_the_release_page_on_the_clipboard(
    qtbot: Any, ctx: AppContext, feed: FeedServer, monkeypatch: pytest.MonkeyPatch, reports: list[Any]
) -> None:
    monkeypatch.setattr(open_file, "opener", lambda url: False)
    ctx.settings.update_url = feed.json("/feed", NEWER)
    w = _window(qtbot, ctx)
    dlg = w.check_for_updates()
    qtbot.waitUntil(lambda: dlg.status == "newer", timeout=WAIT_MS)
    QGuiApplication.clipboard().clear()
    assert dlg.open_release_page() is False
    assert QGuiApplication.clipboard().text() == NEWER["url"]
    assert any(r[1] == "Cannot open the release page" and NEWER["url"] in r[2] for r in reports)


def test_settings_dialog_refuses_a_bad_feed_inline_and_saves_a_good_one(ctx: AppContext, qtbot: Any) -> None:
    dlg = SettingsDialog(ctx)
    qtbot.addWidget(dlg)
    dlg.show()
    assert dlg.update_url_edit.text() == "" and not dlg.update_start_check.isEnabled()
    dlg.update_url_edit.setText("http://example.org/feed.json")
    assert dlg.update_url_note.isVisible() and "must use https" in dlg.update_url_note.text()
    assert not dlg.update_start_check.isEnabled()
    # the Updates group sits beside Appearance so that the dialog, error showing, still fits the
    # smallest screen the window layout is made for (1366×728 available: test_window_layout.py)
    assert dlg.minimumSizeHint().height() <= 728
    assert dlg.apply() is False and "must use https" in dlg.error_label.text()
    assert not (ctx.config_dir / "settings.json").exists() and ctx.settings.update_url == ""
    dlg.update_url_edit.setText(" https://example.org/feed.json ")
    assert not dlg.update_url_note.isVisible() and dlg.update_start_check.isEnabled()
    dlg.update_start_check.setChecked(True)
    assert dlg.apply() is True
    saved = json.loads((ctx.config_dir / "settings.json").read_text(encoding="utf-8"))
    assert (saved["update_url"], saved["update_check_at_start"]) == ("https://example.org/feed.json", True)
    again = AppContext.load(config_dir=ctx.config_dir)
    assert (again.settings.update_url, again.settings.update_check_at_start) == (
        "https://example.org/feed.json",
        True,
    )


def test_check_at_start_notices_only_a_newer_version(
    qtbot: Any, ctx: AppContext, feed: FeedServer, reports: list[Any]
) -> None:
    """On: a few seconds after start, a notice in the bar (not a dialog). Up to date: nothing shown."""
    ctx.settings.update_url = feed.json("/feed", NEWER)
    ctx.settings.update_check_at_start = True
    w = _window(qtbot, ctx)
    qtbot.waitUntil(lambda: any(r[1] == "Update available" for r in reports), timeout=WAIT_MS)
    level, _, message = next(r for r in reports if r[1] == "Update available")
    assert level == "info" and "VRAG Desktop 99.0 is available" in message
    assert w.notifications.isVisible() and "Update available" in w.notifications.label.text()
    assert not any(isinstance(d, UpdateDialog) and d.isVisible() for d in QApplication.topLevelWidgets())

    ctx.settings.update_url = feed.json("/old", {"version": "0.0.1"})
    task = check_at_start(w)
    assert task is not None
    qtbot.waitUntil(lambda: task.outcome is not None, timeout=WAIT_MS)
    assert task.outcome == "finished" and task.result.status == "current"
    assert sum(r[1] == "Update available" for r in reports) == 1


def test_check_at_start_off_asks_nothing(qtbot: Any, ctx: AppContext, feed: FeedServer) -> None:
    ctx.settings.update_url = feed.json("/feed", NEWER)
    w = _window(qtbot, ctx)
    assert check_at_start(w) is None  # the box is off by default
    ctx.settings.update_check_at_start, ctx.settings.update_url = True, ""
    assert check_at_start(w) is None  # on, but no feed
    assert feed.requests == []
