"""Translation readiness (issue 31): what a new person meets first (the main window, its menus, the
Ask panel, the notification bar, the welcome dialog) is wrapped for Qt's translation tools.

Three checks: no bare user-visible literal is passed to a text-setting call in those modules (an
``ast`` scan, which also refuses f-strings inside ``tr``: lupdate extracts them as written, so they
are never found again); ``pyside6-lupdate`` extracts the window's own menu, dock and Ask texts; and a
translation made with ``pyside6-lrelease`` and loaded the way the app loads its own
(:func:`~vrag_desktop.qt.app.install_translations`) changes what the window shows.
"""

from __future__ import annotations

import ast
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QCoreApplication, QLocale
from PySide6.QtWidgets import QApplication, QMenu

from vrag_desktop.qt.context import AppContext

ROOT = Path(__file__).resolve().parents[2]
QT = ROOT / "vrag_desktop" / "qt"
WRAPPED = [
    QT / "main_window.py",
    QT / "window_menus.py",
    QT / "ask" / "ask_panel.py",
    QT / "notifications.py",
    QT / "welcome" / "first_run_dialog.py",
    QT / "welcome" / "choices.py",
]
#: Calls whose string arguments a person reads, and which positional arguments those are.
FIRST = (0,)
TEXT_CALLS: dict[str, tuple[int, ...]] = {
    **dict.fromkeys(
        ("setText", "setWindowTitle", "setToolTip", "setStatusTip", "setPlaceholderText", "setAccessibleName",
         "setWhatsThis", "addMenu", "addAction", "addItem", "showMessage", "set_status", "report", "QLabel",
         "QPushButton", "QCheckBox", "QRadioButton", "QGroupBox", "QAction", "QToolButton", "_dock"),
        FIRST,
    ),
    "addTab": (1,),
    "_action": (1, 4),  # (menu, text, slot, shortcut, tip)
    "button": (1,),
    "action": (1,),
    "icon_only": (1, 2),
    "_text": (1,),  # welcome cards' labels
    "_say": (0,),
    "line_edit": (1,),
    "addRow": (0,),
}  # fmt: skip
TEXT_KEYWORDS = {"text", "placeholderText", "toolTip", "windowTitle", "title", "tip", "error_title"}
WRAPPERS = {"tr", "translate", "QT_TRANSLATE_NOOP", "QT_TR_NOOP"}
WORD = re.compile(r"[^\W\d_]{2,}")
LUPDATE = ROOT / ".venv" / "bin" / "pyside6-lupdate"
LRELEASE = ROOT / ".venv" / "bin" / "pyside6-lrelease"


def _name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _words(text: str) -> bool:
    """Whether ``text`` holds words to translate (an example URL such as http://host:8000/v1 does not)."""
    return bool(WORD.search(text)) and not re.match(r"^[a-z]+://\S+$", text)


def _worded(f: ast.JoinedStr) -> bool:
    """Whether an f-string's own text holds words (``f"{icon} <b>{title}</b>"`` holds none)."""
    return any(isinstance(v, ast.Constant) and WORD.search(str(v.value)) for v in f.values)


def bare_strings(source: str) -> list[tuple[int, str]]:
    """(line, text) of each user-visible literal not wrapped for translation, and of f-strings
    passed to a translation call."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node)
        if name in WRAPPERS:
            found += [
                (a.lineno, "f-string in a translation") for a in node.args if isinstance(a, ast.JoinedStr)
            ]
            continue
        args = [k.value for k in node.keywords if k.arg in TEXT_KEYWORDS]  # QLineEdit(placeholderText=…)
        args += [node.args[i] for i in TEXT_CALLS.get(name, ()) if i < len(node.args)]
        for a in args:
            for part in ast.walk(a):
                if isinstance(part, ast.Call) and _name(part) in WRAPPERS:
                    break
                if isinstance(part, ast.Constant) and isinstance(part.value, str) and _words(part.value):
                    found.append((part.lineno, part.value))
                    break
                if isinstance(part, ast.JoinedStr) and _worded(part):
                    found.append((part.lineno, "an f-string"))
                    break
    return found


@pytest.mark.parametrize("path", WRAPPED, ids=lambda p: p.name)
def test_no_bare_user_visible_string(path: Path) -> None:
    assert bare_strings(path.read_text(encoding="utf-8")) == []


def test_the_scan_finds_bare_and_f_strings() -> None:
    source = (
        "b.setText('Open')\n"
        "b.setToolTip(self.tr('Fine'))\n"
        "QLabel(f'{n} corpora')\n"
        "self.tr(f'{n} runs')\n"
        "b.setText('✕')\n"
        "sink.report('Title', message)\n"
        "QLineEdit(placeholderText='Find…')\n"
    )
    assert bare_strings(source) == [
        (1, "Open"),
        (3, "an f-string"),
        (4, "f-string in a translation"),
        (6, "Title"),
        (7, "Find…"),
    ]


def _lupdate(tmp_path: Path) -> Path:
    if not LUPDATE.exists():
        pytest.skip("pyside6-lupdate is not in .venv (PySide6's tools are needed)")
    ts = tmp_path / "vrag_desktop_de.ts"
    proc = subprocess.run(
        [str(LUPDATE), *map(str, WRAPPED), "-ts", str(ts)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return ts


def _sources(ts: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for ctx in ET.parse(ts).getroot().iter("context"):
        name = ctx.findtext("name") or ""
        out[name] = {m.findtext("source") or "" for m in ctx.iter("message")}
    return out


def _menu_texts(menu: QMenu) -> list[str]:
    texts = [menu.title()]
    for a in menu.actions():
        sub = a.menu()
        if isinstance(sub, QMenu):
            texts += _menu_texts(sub)
        elif not a.isSeparator():
            texts.append(a.text())
    return texts


def test_lupdate_extracts_what_the_window_shows(qtbot: Any, ctx: AppContext, tmp_path: Path) -> None:
    from vrag_desktop.qt.main_window import MainWindow

    sources = _sources(_lupdate(tmp_path))
    every = set().union(*sources.values())
    assert len(every) > 60
    patterns = [re.compile(re.escape(s).replace(r"\{agent\}", ".+") + "$") for s in every if "{" in s]

    w = MainWindow(ctx, first_run=False)
    qtbot.addWidget(w)
    shown = [w.windowTitle(), w.ask.send_button.text(), w.ask.stop_button.text(), w.ask.thinking.text()]
    shown += [d.windowTitle() for d in w.docks()]
    for a in w.menuBar().actions():
        menu = a.menu()
        assert isinstance(menu, QMenu)
        shown += _menu_texts(menu)
    missing = [t for t in shown if t not in every and not any(p.match(t) for p in patterns)]
    assert missing == []
    assert "Ask" in sources["AskPanel"] and "&File" in sources["WindowMenus"]
    assert "Training" in sources["MainWindow"] and "Welcome to VRAG Desktop" in sources["FirstRunDialog"]
    assert "Use this server" in sources["ServerChoice"] and "Use DashScope" in sources["DashScopeChoice"]


def test_a_translation_changes_what_the_window_shows(qtbot: Any, ctx: AppContext, tmp_path: Path) -> None:
    """A German file for three strings, made with lrelease and loaded as the app loads its own."""
    from vrag_desktop.qt.app import install_translations
    from vrag_desktop.qt.main_window import MainWindow

    if not LRELEASE.exists():
        pytest.skip("pyside6-lrelease is not in .venv")
    ts = _lupdate(tmp_path)
    german = {
        ("AskPanel", "Ask"): "Fragen",
        ("WindowMenus", "&File"): "&Datei",
        ("MainWindow", "History"): "Verlauf",
    }
    tree = ET.parse(ts)
    for c in tree.getroot().iter("context"):
        for m in c.iter("message"):
            key = (c.findtext("name"), m.findtext("source"))
            if key in german:
                t = m.find("translation")
                assert t is not None
                t.text = german[key]  # type: ignore[index]
                t.attrib.pop("type", None)
    tree.write(ts, encoding="utf-8")
    folder = tmp_path / "translations"
    folder.mkdir()
    qm = folder / "vrag_desktop_de.qm"
    subprocess.run([str(LRELEASE), str(ts), "-qm", str(qm)], check=True, capture_output=True, timeout=60)

    app = QApplication.instance()
    assert app is not None
    loaded = install_translations(app, folder, QLocale(QLocale.Language.German))
    try:
        assert str(qm) in loaded
        w = MainWindow(ctx, first_run=False)
        qtbot.addWidget(w)
        assert w.ask.send_button.text() == "Fragen"
        assert w.history_dock.windowTitle() == "Verlauf"
        assert w.menuBar().actions()[0].text() == "&Datei"
        assert w.ask.stop_button.text() == "Stop"  # not translated in this file: the source shows
        assert QCoreApplication.translate("AskPanel", "%n corpora", "", 3) == "3 corpora"
    finally:
        from PySide6.QtCore import QTranslator

        for translator in app.findChildren(QTranslator):
            app.removeTranslator(translator)
            translator.deleteLater()
