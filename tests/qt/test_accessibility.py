"""Accessibility (issue 31): every icon- or symbol-only control has a name a screen reader can say,
and the Ask flow works from the keyboard alone.

Names are read the way assistive technology reads them, through Qt's accessibility interface (which
falls back on a button's text, or its action's); a name must hold a word ("✕" or "▲" is no name).
Qt's own internal controls (object names starting ``qt_``: the docks' Float/Close, which Qt names,
and item views' corner buttons) are Qt's to name.
"""

from __future__ import annotations

import re
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible
from PySide6.QtWidgets import QAbstractButton, QApplication, QWidget
from scripted_openai import ScriptedOpenAI

from vrag_desktop.core.endpoints.profiles import EndpointProfile
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.main_window import MainWindow

WORD = re.compile(r"[^\W\d_]{2,}")
SCRIPT: list[dict[str, Any]] = [
    {"content": "<think>Find the spec page.</think>\n<search>Atlas robot payload</search>", "chunk": 4},
    {"content": "<think>It says 450 kg.</think>\n<answer>450 kg</answer>"},
    {"content": "<think>As before.</think>\n<answer>450 kg</answer>"},  # the second question
]


def _window(qtbot: Any, ctx: AppContext) -> MainWindow:
    w = MainWindow(ctx, first_run=False)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    w.show()
    w.activateWindow()
    qtbot.waitUntil(w.isActiveWindow, timeout=2000)
    return w


def spoken_name(widget: QWidget) -> str:
    """What a screen reader announces for ``widget``."""
    iface = QAccessible.queryAccessibleInterface(widget)
    return iface.text(QAccessible.Text.Name) if iface is not None else ""


def unnamed_icon_buttons(root: QWidget) -> list[str]:
    """Buttons under ``root`` whose visible text is no word (an icon, ✕, ▲, …, 1:1) and whose
    accessible name is none either."""
    bad = []
    for b in root.findChildren(QAbstractButton):
        if b.objectName().startswith("qt_"):
            continue
        if WORD.search(b.text().replace("&", "")):
            continue  # its text is its name
        if not WORD.search(spoken_name(b)):
            parent = b.parentWidget()
            where = f"{type(parent).__name__}({parent.objectName()})" if parent else "-"
            bad.append(f"{type(b).__name__} {b.text()!r} tip={b.toolTip()!r} in {where}")
    return bad


def test_every_icon_only_button_in_the_main_window_has_an_accessible_name(
    qtbot: Any, ctx: AppContext
) -> None:
    w = _window(qtbot, ctx)
    w.panels.build_all()  # the hidden docks' panels too (made after the first paint, maybe not yet)
    buttons = w.findChildren(QAbstractButton)
    icon_only = [b for b in buttons if not WORD.search(b.text()) and not b.objectName().startswith("qt_")]
    assert len(icon_only) >= 10  # the walk sees the symbol buttons (find bars, zoom, dismiss, reload…)
    assert unnamed_icon_buttons(w) == []
    # the names are the words a person would use, not the symbols
    assert {"Zoom in", "Zoom out", "Dismiss message", "Close find bar", "Reload runs"} <= {
        b.accessibleName() for b in buttons
    }


def test_the_check_catches_an_unnamed_symbol_button(qtbot: Any) -> None:
    from PySide6.QtWidgets import QHBoxLayout, QToolButton

    root = QWidget()
    qtbot.addWidget(root)
    lay = QHBoxLayout(root)
    for text in ("✕", "Close"):
        b = QToolButton(root)
        b.setText(text)
        lay.addWidget(b)
    assert unnamed_icon_buttons(root) == ["QToolButton '✕' tip='' in QWidget()"]


def _profile(ctx: AppContext, url: str) -> None:
    ctx.profiles.save(EndpointProfile(name="Scripted", kind="custom", base_url=url, model="scripted"))
    ctx.profiles.set_api_key("Scripted", "k-1")


def _tab(qtbot: Any, backward: bool = False) -> QWidget:
    focused = QApplication.focusWidget()
    assert focused is not None
    qtbot.keyClick(focused, Qt.Key.Key_Backtab if backward else Qt.Key.Key_Tab)
    now = QApplication.focusWidget()
    assert now is not None
    return now


def test_ask_from_the_keyboard_alone(qtbot: Any, indexed: AppContext) -> None:
    """Tab reaches the agent choice, the question field and Ask, in that order; typing then Enter on
    the focused Ask asks; Tab reaches the answer; Shift+Tab back to Ask and Space asks again."""
    with ScriptedOpenAI(SCRIPT, api_key="k-1") as srv:
        _profile(indexed, srv.base_url)
        w = _window(qtbot, indexed)
        ask = w.ask
        ends: list[tuple[str, str]] = []
        w.controller.finished.connect(lambda s, r: ends.append((s, r)))
        ask.refresh_profiles()
        ask.profile_combo.setCurrentIndex(ask.profile_combo.findData("Scripted"))
        qtbot.waitUntil(lambda: ask.ready, timeout=5000)

        ask.agent_combo.setFocus()
        qtbot.waitUntil(lambda: QApplication.focusWidget() is ask.agent_combo, timeout=2000)
        chain: list[QWidget] = [ask.agent_combo]
        while chain[-1] is not ask.send_button and len(chain) < 40:
            chain.append(_tab(qtbot))
        assert chain[-1] is ask.send_button, [type(x).__name__ for x in chain]
        assert ask.question_edit in chain and ask.profile_combo in chain
        assert chain.index(ask.question_edit) < chain.index(ask.send_button)

        # the question is typed in its field, reached by keyboard; Tab leaves it (no tab typed)
        while QApplication.focusWidget() is not ask.question_edit:
            _tab(qtbot, backward=True)
        qtbot.keyClicks(ask.question_edit, "How heavy a load can the Atlas robot carry?")
        assert _tab(qtbot) is ask.send_button
        assert "\t" not in ask.question_edit.toPlainText()

        qtbot.keyClick(ask.send_button, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: len(ends) == 1, timeout=20_000)
        assert ends[0][0] == "answered"

        focus: QWidget = ask.send_button
        ask.send_button.setFocus()
        reached = []
        for _ in range(5):
            focus = _tab(qtbot)
            reached.append(focus)
            if focus is ask.view:
                break
        assert focus is ask.view, [type(x).__name__ for x in reached]  # the answer, to read or copy
        assert "450 kg" in ask.view.toPlainText()

        while QApplication.focusWidget() is not ask.send_button:
            _tab(qtbot, backward=True)
        qtbot.keyClick(ask.send_button, Qt.Key.Key_Space)
        qtbot.waitUntil(lambda: len(ends) == 2, timeout=20_000)
        assert ends[1][0] == "answered"
        assert len(indexed.runs.list()) == 2
