"""The main window's menu bar: File, Run, View and Help, each action with its shortcut. The actions
are window-wide shortcuts too; the window enables Stop while a run is live and follows the theme."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QT_TRANSLATE_NOOP, QCoreApplication, Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMenu

from vrag_desktop.core.agents.names import AGENT_NAMES, agent_name
from vrag_desktop.qt.help_dialogs import CONNECT_HELP, SHORTCUTS_HELP

if TYPE_CHECKING:
    from vrag_desktop.qt.main_window import MainWindow

Shortcut = QKeySequence | list[QKeySequence | QKeySequence.StandardKey] | None

THEMES = (
    ("system", str(QT_TRANSLATE_NOOP("WindowMenus", "System"))),
    ("light", str(QT_TRANSLATE_NOOP("WindowMenus", "Light"))),
    ("dark", str(QT_TRANSLATE_NOOP("WindowMenus", "Dark"))),
)
translate = QCoreApplication.translate  # translate("WindowMenus", text): what Qt's lupdate extracts


class WindowMenus:
    """Builds the menus on ``win`` and keeps the actions the window changes later."""

    def __init__(self, win: MainWindow) -> None:
        self.win = win
        mb = win.menuBar()
        f = mb.addMenu(translate("WindowMenus", "&File"))
        self.add_folder = self._action(
            f,
            translate("WindowMenus", "Add folder…"),
            lambda: win.corpora.add_folder(),
            QKeySequence("Ctrl+O"),
            translate("WindowMenus", "Add a folder to a corpus"),
        )
        self._action(f, translate("WindowMenus", "Add files…"), lambda: win.corpora.add_files())
        self._action(f, translate("WindowMenus", "New corpus…"), lambda: win.corpora.new_corpus())
        f.addSeparator()
        self.settings = self._action(
            f,
            translate("WindowMenus", "Settings…"),
            win.open_settings,
            [QKeySequence("Ctrl+,"), QKeySequence.StandardKey.Preferences],
        )
        f.addSeparator()
        self._action(f, translate("WindowMenus", "Quit"), win.close, QKeySequence("Ctrl+Q"))

        r = mb.addMenu(translate("WindowMenus", "&Run"))
        self.new = self._action(
            r, translate("WindowMenus", "New question"), win.ask.new_question, QKeySequence("Ctrl+N")
        )
        self.send = self._action(
            r,
            translate("WindowMenus", "Ask"),
            win.ask.send,
            [QKeySequence("Ctrl+Return"), QKeySequence("Ctrl+Enter")],
        )
        self.stop = self._action(
            r,
            translate("WindowMenus", "Stop"),
            win.stop_run,
            [QKeySequence("Esc"), QKeySequence("Ctrl+.")],
            translate("WindowMenus", "Stop the running agent"),
        )
        self.stop.setEnabled(False)
        r.addSeparator()
        self.find = self._action(
            r, translate("WindowMenus", "Find in reasoning…"), win.ask.show_find, QKeySequence("Ctrl+F")
        )

        v = mb.addMenu(translate("WindowMenus", "&View"))
        self.zoom_in = self._action(
            v,
            translate("WindowMenus", "Zoom in"),
            lambda: win.zoom("in"),
            [QKeySequence("Ctrl++"), QKeySequence("Ctrl+=")],
        )
        self.zoom_out = self._action(
            v, translate("WindowMenus", "Zoom out"), lambda: win.zoom("out"), QKeySequence("Ctrl+-")
        )
        self.fit = self._action(
            v, translate("WindowMenus", "Fit"), lambda: win.zoom("fit"), QKeySequence("Ctrl+0")
        )
        v.addSeparator()
        self.models = self._action(
            v,
            translate("WindowMenus", "Models…"),
            lambda: win.models.open(),
            QKeySequence("Ctrl+Shift+M"),
            translate("WindowMenus", "Download, serve and delete answer models and embedders"),
        )
        for dock in win.docks():  # a dock opened from here comes to the front of the docks sharing its place
            toggle = dock.toggleViewAction()
            toggle.triggered.connect(lambda on, d=dock: d.raise_() if on else None)
            v.addAction(toggle)
        v.addSeparator()
        theme_menu = v.addMenu(translate("WindowMenus", "Theme"))
        group = QActionGroup(win)
        self.theme: dict[str, QAction] = {}
        for key, label in THEMES:
            a = QAction(translate("WindowMenus", label), win, checkable=True)
            a.setChecked(win.ctx.settings.theme == key)
            a.triggered.connect(lambda _=False, k=key: win.set_theme(k))
            group.addAction(a)
            theme_menu.addAction(a)
            self.theme[key] = a
        self._action(v, translate("WindowMenus", "Reset layout"), win.reset_layout)

        h = mb.addMenu(translate("WindowMenus", "&Help"))
        self._action(h, translate("WindowMenus", "Choose a model…"), lambda: win.guide.choose_model())
        self._action(
            h,
            translate("WindowMenus", "Connect a model…"),
            lambda: win.show_help(CONNECT_HELP, translate("WindowMenus", "Connect a model")),
        )
        for kind in AGENT_NAMES:
            self._action(
                h,
                translate("WindowMenus", "{agent} example run (recorded)").format(agent=agent_name(kind)),
                partial(win.guide.open_example, kind),
            )
        h.addSeparator()
        self._action(
            h,
            translate("WindowMenus", "Keyboard shortcuts"),
            lambda: win.show_help(SHORTCUTS_HELP, translate("WindowMenus", "Keyboard shortcuts")),
        )
        self.check_updates = self._action(
            h,
            translate("WindowMenus", "Check for updates…"),
            win.check_for_updates,
            tip=translate(
                "WindowMenus", "Ask the update feed set in Settings whether a newer version is out"
            ),
        )
        self._action(h, translate("WindowMenus", "About VRAG Desktop"), win.about)

    def check_theme(self, theme: str) -> None:
        """Tick ``theme`` in the View ▸ Theme menu (after it was changed elsewhere)."""
        if theme in self.theme:
            self.theme[theme].setChecked(True)

    def _action(
        self, menu: QMenu, text: str, slot: Callable[[], Any], shortcut: Shortcut = None, tip: str = ""
    ) -> QAction:
        a = QAction(text, self.win)
        if isinstance(shortcut, list):
            a.setShortcuts([QKeySequence(k) for k in shortcut])
        elif shortcut is not None:
            a.setShortcut(shortcut)
        a.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        if tip:
            a.setStatusTip(tip)
        a.triggered.connect(slot)
        menu.addAction(a)
        self.win.addAction(a)
        return a
