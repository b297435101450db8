"""Help → Check for updates…, and the once-at-start check when the person asked for it.

The check itself is :mod:`vrag_desktop.core.update_check`; it waits on the network (up to 5 s), so
it runs on the shared pool and the window only shows what it found. Nothing here is imported before
the window shows: the menu and the start-up timer load it when they fire.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, Qt, QUrl
from PySide6.QtGui import QCloseEvent, QGuiApplication
from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from vrag_desktop.core import update_check
from vrag_desktop.qt.infra import open_file
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.infra.tasks import Task, run_call

if TYPE_CHECKING:
    from vrag_desktop.qt.main_window import MainWindow

log = logging.getLogger(__name__)
translate = QCoreApplication.translate

NOTES_EXCERPT_CHARS = 1500
CHECKING = "checking"
NO_URL = "no-url"


class UpdateDialog(QDialog):
    """What the check found: a newer version (its notes, a button to its release page), up to date,
    or why it could not tell. Not modal: the person works on while the check runs."""

    def __init__(self, parent: QWidget | None, open_settings: Callable[[], object]) -> None:
        super().__init__(parent)
        self.setObjectName("updateDialog")
        self.setWindowTitle(self.tr("Check for updates"))
        self.setModal(False)
        self.status = CHECKING  # then: no-url, or the result's status
        self.found: update_check.UpdateResult | None = None
        self.task: Task | None = None
        self._open_settings = open_settings
        self.headline = QLabel()
        self.headline.setObjectName("updateHeadline")
        self.headline.setTextFormat(Qt.TextFormat.PlainText)  # the feed's words are never markup
        self.headline.setWordWrap(True)
        self.headline.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notes = QPlainTextEdit()
        self.notes.setReadOnly(True)
        self.notes.hide()
        self.page_button = QPushButton(self.tr("Open the release page"))
        self.page_button.clicked.connect(self.open_release_page)
        self.page_button.hide()
        self.settings_button = QPushButton(self.tr("Open Settings…"))
        self.settings_button.clicked.connect(self._settings)
        self.settings_button.hide()
        close = QPushButton(self.tr("Close"))
        close.clicked.connect(self.close)
        row = QHBoxLayout()
        row.addStretch(1)
        for button in (self.page_button, self.settings_button, close):
            row.addWidget(button)
        lay = QVBoxLayout(self)
        lay.addWidget(self.headline)
        lay.addWidget(self.notes, 1)
        lay.addLayout(row)
        self.resize(520, 160)

    def show_checking(self, url: str) -> None:
        self.status = CHECKING
        self.headline.setText(self.tr("Asking {url} for the newest version…").format(url=url))

    def show_no_url(self) -> None:
        self.status = NO_URL
        self.headline.setText(
            self.tr(
                "No update feed is set, so nothing is checked: VRAG Desktop has no built-in one. "
                "Set its address in Settings → Updates."
            )
        )
        self.settings_button.show()
        self.settings_button.setDefault(True)

    def show_result(self, result: update_check.UpdateResult) -> None:
        self.status, self.found = result.status, result
        if result.status == update_check.NEWER:
            text = self.tr("A newer version is out: VRAG Desktop {latest} (this is {current}).")
            self.headline.setText(text.format(latest=result.latest, current=result.current))
            if result.notes:
                excerpt = result.notes
                if len(excerpt) > NOTES_EXCERPT_CHARS:
                    excerpt = excerpt[: NOTES_EXCERPT_CHARS - 1].rstrip() + "…"
                self.notes.setPlainText(excerpt)
                self.notes.show()
                self.resize(max(self.width(), 560), max(self.height(), 360))
            self.page_button.setVisible(bool(result.url))
            self.page_button.setDefault(bool(result.url))
        elif result.status == update_check.CURRENT:
            self.headline.setText(self.tr("This is the newest version.") + f"\n{result.message}.")
        elif result.status == update_check.OFF:  # offline mode: said as core says it
            self.headline.setText(result.message[:1].upper() + result.message[1:] + ".")
        else:
            self.headline.setText(self.tr("Could not check for updates:") + f" {result.message}.")
            self.settings_button.show()  # where the address is changed

    def show_failure(self, exc: BaseException) -> None:
        """The check itself broke (a bug, not the network): say so instead of waiting forever."""
        self.show_result(
            update_check.UpdateResult(
                update_check.ERROR, update_check.current_version(), message=describe(exc)
            )
        )

    def open_release_page(self) -> bool:
        """The release page in the browser; with none, its address goes to the clipboard (said so)."""
        url = self.found.url if self.found is not None else None
        if not url:
            return False
        if open_file.opener(QUrl(url)):
            return True
        QGuiApplication.clipboard().setText(url)
        error_sink().report(
            self.tr("Cannot open the release page"),
            self.tr("No browser is set up to open it; its address is on the clipboard: {url}").format(
                url=url
            ),
            "warning",
        )
        return False

    def _settings(self) -> None:
        self.close()
        self._open_settings()

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.task is not None:
            self.task.cancel()  # its answer is no longer wanted
        super().closeEvent(event)


def check_for_updates(win: MainWindow) -> UpdateDialog:
    """Help → Check for updates…: the dialog shows at once, the answer when it comes."""
    dlg = UpdateDialog(win, functools.partial(_open_update_settings, win))
    dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    url = win.ctx.settings.update_url.strip()
    if not url:
        dlg.show_no_url()
    else:
        dlg.show_checking(url)
        dlg.task = run_call(
            functools.partial(update_check.check, url, data_dir=win.ctx.data_dir),
            name="Update check",
            on_done=dlg.show_result,
            on_error=dlg.show_failure,
        )
    dlg.show()
    return dlg


def check_at_start(win: MainWindow) -> Task | None:
    """The once-at-start check (Settings → Updates): a notice only when a newer version is out;
    anything else (up to date, offline, unreachable) is logged, never shown. None when it is off."""
    settings = win.ctx.settings
    url = settings.update_url.strip()
    if not (settings.update_check_at_start and url):
        return None

    def heard(result: update_check.UpdateResult) -> None:
        if result.status != update_check.NEWER:
            log.info("update check at start: %s", result.message)
            return
        error_sink().report(
            translate("UpdateCheck", "Update available"),
            translate("UpdateCheck", "{message}. Help → Check for updates… shows what is new.").format(
                message=result.message
            ),
            "info",
        )

    return run_call(
        functools.partial(update_check.check, url, data_dir=win.ctx.data_dir),
        name="Update check at start",
        on_done=heard,
        on_error=lambda exc: log.warning("update check at start failed: %s", describe(exc)),
    )


def _open_update_settings(win: MainWindow) -> None:
    dlg = win.open_settings()
    edit = getattr(dlg, "update_url_edit", None)
    if edit is not None:
        edit.setFocus()
