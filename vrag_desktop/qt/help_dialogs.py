"""The window's help: how to connect a model, the keyboard shortcuts and the About box. Texts live
here so the window only decides when to show them (the first-run welcome is a dialog of its own:
:mod:`vrag_desktop.qt.welcome.first_run_dialog`)."""

from __future__ import annotations

import html
import math
from collections.abc import Callable

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QMessageBox,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

CONNECT_HELP = """
<h3>Connect a model</h3>
<p>VRAG Desktop searches your corpora on this machine; the reasoning needs a vision-language model
behind an OpenAI-compatible API. Pick one in the <b>Runtime</b> panel:</p>
<ul>
<li><b>Local vLLM</b> (a GPU workstation): set the model (e.g. the released
<code>autumncc/Qwen2.5-VL-7B-VRAG</code> checkpoint or a local folder) and press <b>Start</b>. The app runs
and supervises the server. One-time setup of vLLM's own environment:
<code>vrag-desktop runtime setup</code>.</li>
<li><b>DashScope</b> (Alibaba Cloud, for VimRAG with Qwen3.5): paste your API key; it is kept in the
system keyring, never in a file.</li>
<li><b>Custom</b>: any OpenAI-compatible server (vLLM or SGLang elsewhere, LM Studio, a gateway):
its base URL, model name and key.</li>
</ul>
<p>Then <b>Test connection</b>, and ask. VRAG (search, crop and zoom) suits the released VRAG model;
VimRAG (multimodal memory graph) suits strong general models such as Qwen3.5.</p>
"""

SHORTCUTS_HELP = """
<h3>Keyboard shortcuts</h3>
<table cellpadding='3'>
<tr><td><b>Ctrl+N</b></td><td>New question</td></tr>
<tr><td><b>Ctrl+Enter</b></td><td>Ask</td></tr>
<tr><td><b>Esc</b></td><td>Stop the run</td></tr>
<tr><td><b>Ctrl+F</b></td><td>Find in the reasoning</td></tr>
<tr><td><b>Ctrl++ / Ctrl+− / Ctrl+0</b></td>
<td>Zoom in / out / fit (the graph or the evidence, whichever you used last)</td></tr>
<tr><td><b>Ctrl+O</b></td><td>Add a folder to a corpus</td></tr>
<tr><td><b>Ctrl+,</b></td><td>Settings</td></tr>
<tr><td><b>Ctrl+Q</b></td><td>Quit</td></tr>
</table>
"""

HELP_WIDTH = 600  # px: lines of a comfortable length for reading


class HelpText(QTextBrowser):
    """Rich help text whose size hint is the text's own: ``width`` wide and as tall as the text at
    that width (up to ``max_height``, then it scrolls), so a dialog around it has no empty half."""

    def __init__(self, html_text: str, width: int, max_height: int) -> None:
        super().__init__()
        self.setOpenExternalLinks(True)
        self.setHtml(html_text)
        self._width = width
        self._max_height = max_height

    def sizeHint(self) -> QSize:
        frame = 2 * self.frameWidth()
        doc = self.document().clone(self)
        doc.setTextWidth(self._width - frame - self.verticalScrollBar().sizeHint().width())
        height = math.ceil(doc.size().height()) + frame
        return QSize(self._width, min(height, self._max_height))


def help_dialog(
    parent: QWidget, html_text: str, title: str, open_runtime: Callable[[], None] | None = None
) -> QDialog:
    """A non-modal help dialog (shown), sized to its text; with ``open_runtime`` it also offers a
    button to go there."""
    dlg = QDialog(parent)
    dlg.setWindowTitle(title)
    screen = (parent.screen() if parent is not None else None) or QGuiApplication.primaryScreen()
    room = screen.availableGeometry().height() if screen is not None else 800
    view = HelpText(html_text, HELP_WIDTH, max(240, int(room * 0.8) - 80))
    close = QPushButton("Close")
    lay = QVBoxLayout(dlg)
    lay.addWidget(view)
    row = QHBoxLayout()
    row.addStretch(1)
    if open_runtime is not None:
        ok = QPushButton("Open the Runtime panel")
        row.addWidget(ok)

        def go() -> None:
            open_runtime()
            dlg.accept()

        ok.clicked.connect(go)
    row.addWidget(close)
    close.clicked.connect(dlg.accept)
    lay.addLayout(row)
    dlg.resize(dlg.sizeHint())
    dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dlg.show()
    return dlg


def about_text(data_dir: str, config_dir: str) -> str:
    """The About box's text: version, what the app does, its licence (core/licences.py: PyMuPDF makes
    the distributed app AGPL-3.0) with links to the notices this copy carries, and where its data and
    settings live."""
    from vrag_desktop import __version__
    from vrag_desktop.core.licences import STATEMENT, licence_file

    links = [
        f'<a href="{path.as_uri()}">{html.escape(label)}</a>'
        for label, name in (
            ("Third-party notices", "THIRD_PARTY_NOTICES.md"),
            ("NOTICE", "NOTICE"),
            ("Apache-2.0", "LICENSE"),
            ("AGPL-3.0", "licenses/AGPL-3.0.txt"),
        )
        if (path := licence_file(name)) is not None
    ]
    return (
        f"<b>VRAG Desktop {__version__}</b><p>Multimodal retrieval-augmented reasoning over your own "
        "documents, images and videos, with the VRAG and VimRAG agents.</p>"
        f"<p>{html.escape(STATEMENT, quote=False)}</p>"
        + (f"<p>{' · '.join(links)}</p>" if links else "")
        + f"<p>Data: {html.escape(data_dir, quote=False)}<br>Settings: {html.escape(config_dir, quote=False)}</p>"
    )


def about_box(parent: QWidget, data_dir: str, config_dir: str) -> None:
    """The About box (:func:`about_text`); its links open the files in the desktop's viewer."""
    box = QMessageBox(
        QMessageBox.Icon.NoIcon, "About VRAG Desktop", about_text(data_dir, config_dir), parent=parent
    )
    box.setTextFormat(Qt.TextFormat.RichText)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
    icon = parent.windowIcon() if parent is not None else None
    if icon is not None and not icon.isNull():
        box.setIconPixmap(icon.pixmap(64, 64))
    box.exec()
