"""The main window's size and dock layout: chosen for the screen, remembered per user, reset on demand.

Why apart from the window: the window opened at 1600×1000 whatever the screen (a 1280×800 one lost
the status bar and half the graph), and five docks shared a 270 px column as tabs whose names and
fields were cut off. Here:

* the first start fills the screen's available area less a margin, never more; a remembered
  geometry is clamped to the screen it opens on (a laptop after a large monitor);
* the default layout depends on the room: Corpora over History on the left, the Ask panel in the
  middle, the reasoning graph and the evidence on the right — one above the other where the screen
  is large, as tabs of one full-height column where it is not. Runtime, Datasets, Evaluations and
  Training are hidden until used (the View menu, or whatever needs them, opens them) and then open
  as tabs of the right column, the widest, rather than in the narrow left one;
* the layout is saved in the per-user config directory (``window.ini``) on close and restored on
  the next start; *View → Reset layout* puts back the default for the current screen.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from PySide6.QtCore import QByteArray, QRect, QSettings, QSize, Qt, QTimer
from PySide6.QtGui import QGuiApplication, QScreen
from PySide6.QtWidgets import QDockWidget, QTabBar

if TYPE_CHECKING:
    from vrag_desktop.qt.main_window import MainWindow

log = logging.getLogger("vrag_desktop")

#: Saved layouts of another version are not restored (1: five docks tabbed in the left column).
STATE_VERSION = 2
#: From this available screen size on, the graph and the evidence are both shown, one above the other.
WIDE = QSize(1600, 960)
#: The most the first start takes: a window larger than this is more mouse travel than use.
MAX_FIRST = QSize(2560, 1600)


def margin(length: int) -> int:
    """The gap left around a new window on a screen side of ``length`` px (2.5 %, 16–64 px)."""
    return max(16, min(64, round(length * 0.025)))


def first_geometry(avail: QRect) -> QRect:
    """A first start's window: the available area less a margin on each side, centred on it."""
    w = min(avail.width() - 2 * margin(avail.width()), MAX_FIRST.width())
    h = min(avail.height() - 2 * margin(avail.height()), MAX_FIRST.height())
    rect = QRect(0, 0, max(1, w), max(1, h))
    rect.moveCenter(avail.center())
    return rect


def clamp_geometry(rect: QRect, avail: QRect) -> QRect:
    """``rect`` made no larger than ``avail`` and moved inside it."""
    w, h = min(rect.width(), avail.width()), min(rect.height(), avail.height())
    x = min(max(rect.x(), avail.x()), avail.x() + avail.width() - w)
    y = min(max(rect.y(), avail.y()), avail.y() + avail.height() - h)
    return QRect(x, y, w, h)


def is_wide(avail: QRect | QSize) -> bool:
    """Room for the graph above the evidence (else they share one column as tabs)."""
    return avail.width() >= WIDE.width() and avail.height() >= WIDE.height()


def screen_of(rect: QRect) -> QScreen | None:
    """The screen holding ``rect``'s centre, else the primary one."""
    return QGuiApplication.screenAt(rect.center()) or QGuiApplication.primaryScreen()


class WindowLayout:
    """Sizes ``win`` and lays out its docks; saves and restores both (see the module docstring)."""

    def __init__(self, win: MainWindow) -> None:
        self.win = win
        self.restored = False  # the last start restored a saved layout
        self._placed = QRect()  # where start() put the window
        self._tabs_pending = False

    def watch(self) -> None:
        """Keep the docks' tab names whole as docks are opened, moved and tabbed (after ``docks()``
        exist): Qt makes a tab bar for each new tab group and elides its names by default."""
        for dock in self.win.docks():
            dock.dockLocationChanged.connect(self._tabs_changed)
            dock.visibilityChanged.connect(self._tabs_changed)

    def _tabs_changed(self, *_: object) -> None:
        if not self._tabs_pending:  # once per burst of changes, after Qt made its tab bars
            self._tabs_pending = True
            QTimer.singleShot(0, self.unclip_tabs)

    def unclip_tabs(self) -> None:
        """Dock tabs show their whole names; where they do not all fit, the bar scrolls."""
        self._tabs_pending = False
        for bar in self.win.findChildren(QTabBar, options=Qt.FindChildOption.FindDirectChildrenOnly):
            if bar.elideMode() != Qt.TextElideMode.ElideNone:
                bar.setElideMode(Qt.TextElideMode.ElideNone)
                bar.setUsesScrollButtons(True)

    # ------------------------------------------------------------------ docks
    def tools(self) -> tuple[QDockWidget, ...]:
        """The docks hidden until used."""
        w = self.win
        return (w.runtime_dock, w.datasets_dock, w.evaluations_dock, w.training_dock)

    def apply_default(self, avail: QRect | None = None) -> None:
        """The default layout for the available area ``avail`` (default: the window's screen's)."""
        win = self.win
        avail = avail if avail is not None else self.available()
        wide = is_wide(avail)
        L, R = Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea
        for dock in win.docks():
            dock.setFloating(False)
            win.removeDockWidget(dock)
        win.addDockWidget(L, win.corpora_dock)
        win.splitDockWidget(win.corpora_dock, win.history_dock, Qt.Orientation.Vertical)
        win.addDockWidget(R, win.graph_dock)
        if wide:
            win.splitDockWidget(win.graph_dock, win.evidence_dock, Qt.Orientation.Vertical)
        else:
            win.tabifyDockWidget(win.graph_dock, win.evidence_dock)
        for tool in self.tools():
            win.tabifyDockWidget(win.evidence_dock, tool)
        for dock in win.docks():
            dock.setVisible(dock not in self.tools())
        win.evidence_dock.raise_()
        win.graph_dock.raise_()
        self.size_docks(wide)
        win.graph_pane.reset()
        self.unclip_tabs()

    def size_docks(self, wide: bool) -> None:
        """Share the window's width and height between the columns and the docks in them."""
        win = self.win
        width, height = win.width(), win.height()
        side = [win.corpora_dock, win.history_dock]
        left = max(max(d.minimumSizeHint().width() for d in side), min(400, round(width * 0.22)))
        if wide:
            right = round(width * 0.47)
        else:  # the evidence page needs the room more than the Ask column (266 px at 1280×800 before)
            ask = max(win.ask.minimumSizeHint().width() + 40, round(width * 0.28))
            right = max(round(width * 0.42), width - left - ask)
        win.resizeDocks([win.corpora_dock, win.graph_dock], [left, right], Qt.Orientation.Horizontal)
        win.resizeDocks(side, [height // 2, height // 2], Qt.Orientation.Vertical)
        if wide:
            docks = [win.graph_dock, win.evidence_dock]
            win.resizeDocks(docks, [round(height * 0.46), round(height * 0.54)], Qt.Orientation.Vertical)

    def show_tool(self, dock: QDockWidget) -> None:
        """Open a dock hidden until used, in front of the others sharing its place."""
        dock.show()
        dock.raise_()

    def show_run_views(self) -> None:
        """A run, a replay or a saved run takes the graph and the evidence: both shown, in front of
        the tools sharing their column (the graph in front where they are tabs)."""
        win = self.win
        for dock in (win.evidence_dock, win.graph_dock):
            dock.show()
            dock.raise_()

    # ------------------------------------------------------------------ geometry
    def available(self) -> QRect:
        """The available area of the screen the window is (or will be) on."""
        screen = self.win.screen() or screen_of(self.win.geometry())
        return screen.availableGeometry() if screen is not None else QRect(0, 0, 1280, 800)

    def clamp_to_screen(self) -> None:
        """Keep the window, its frame included once shown, inside the available area of the screen
        it is on (a layout restored from a larger monitor)."""
        win = self.win
        if win.isMaximized() or win.isFullScreen():
            return
        frame, inner = win.frameGeometry(), win.geometry()
        screen = screen_of(frame)
        if screen is None:
            return
        fits = clamp_geometry(frame, screen.availableGeometry())
        if fits != frame:  # the same change to the window inside its frame
            left, top = inner.x() - frame.x(), inner.y() - frame.y()
            extra_w, extra_h = frame.width() - inner.width(), frame.height() - inner.height()
            win.setGeometry(fits.x() + left, fits.y() + top, fits.width() - extra_w, fits.height() - extra_h)

    # ------------------------------------------------------------------ saving
    def settings(self) -> QSettings:
        return QSettings(str(self.win.ctx.config_dir / "window.ini"), QSettings.Format.IniFormat)

    def start(self) -> None:
        """Size the window and lay out its docks: as saved, else the defaults for this screen."""
        win = self.win
        s = self.settings()
        geometry, state, split = s.value("geometry"), s.value("state"), s.value("graph_split")
        restored = False
        try:
            if isinstance(geometry, QByteArray) and win.restoreGeometry(geometry):
                self.clamp_to_screen()
            else:
                win.setGeometry(first_geometry(self.available()))
            if isinstance(state, QByteArray):  # onto the docks as built: the default's hidden tabs
                restored = win.restoreState(state, STATE_VERSION)  # would leave a stray tab bar
            if not restored:
                self.apply_default()
            if restored and isinstance(split, QByteArray):
                win.graph_pane.restoreState(split)
            self.unclip_tabs()
        except Exception as exc:  # a damaged window.ini only costs the layout
            log.warning("could not restore the window layout: %s", exc)
        self.restored = restored
        self._placed = win.geometry()

    def shown(self) -> None:
        """The window's first show: inside the screen with its frame (known only now) unless it was
        sized on purpose since :meth:`start`, and the default layout's sizes again, now that the
        window has its real size (sizes given before are rescaled by Qt's first layout pass)."""
        if self.win.geometry() == self._placed:
            self.clamp_to_screen()
        if not self.restored:
            self.size_docks(is_wide(self.available()))

    def save(self) -> None:
        s = self.settings()
        s.setValue("geometry", self.win.saveGeometry())
        s.setValue("state", self.win.saveState(STATE_VERSION))
        s.setValue("graph_split", self.win.graph_pane.saveState())
        s.sync()

    def reset(self) -> None:
        """*View → Reset layout*: the default for the screen the window is on now, at a size that
        fits it when it does not (a window moved from a larger screen)."""
        win = self.win
        if not (win.isMaximized() or win.isFullScreen()):
            self.clamp_to_screen()
        self.apply_default()


__all__ = ["STATE_VERSION", "WIDE", "WindowLayout", "clamp_geometry", "first_geometry", "is_wide"]
