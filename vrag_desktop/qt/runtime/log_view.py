"""A bounded, searchable tail of a process's output (the vLLM server's log).

Why this shape: vLLM prints thousands of lines while loading (progress bars, warnings) from a
thread that is not the GUI's. Lines go into a locked buffer from any thread; the first line into
an empty buffer arms a single-shot timer (through a queued signal: a timer starts only from its own
thread) that moves the batch into the view ``FLUSH_MS`` later, so at most 10 batches a second and no
wake-up at all while the log is quiet (each one is a GIL round-trip that a training or indexing
thread can delay). The view keeps only the last ``max_lines`` blocks, so neither memory nor repaint
cost grows with the log (napari's per-message re-render is the counter-example). The full log stays
in its file, which "Open log file" shows.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import threading
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import (
    QFontDatabase,
    QGuiApplication,
    QKeySequence,
    QResizeEvent,
    QShortcut,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
)
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.qt.infra.open_file import open_path
from vrag_desktop.qt.infra.theme import color, theme_notifier
from vrag_desktop.qt.infra.widgets import clear_button, icon_only

DEFAULT_MAX_LINES = 5000
FLUSH_MS = 100  # at most 10 batches a second
SLOW_SEARCH_LIMIT = 5000  # matches found by QTextDocument.find (text with non-BMP characters)


class LineBuffer:
    """Lines from any thread, taken in batches by the GUI thread. Bounded: when the GUI falls
    behind, the oldest lines go (the view could not keep them anyway) and are counted."""

    def __init__(self, maxlen: int) -> None:
        self._lines: collections.deque[str] = collections.deque(maxlen=maxlen)
        self._lock = threading.Lock()
        self._dropped = 0
        self._armed = False  # a take is on its way for the lines put since the last one

    def put(self, line: str) -> bool:
        """Add ``line``; True when it is the first since the last :meth:`take` (the caller arranges
        one), decided under the lock so two threads never both, or neither, arrange it."""
        with self._lock:
            if len(self._lines) == self._lines.maxlen:
                self._dropped += 1
            self._lines.append(line)
            first, self._armed = not self._armed, True
        return first

    def take(self) -> tuple[list[str], int]:
        """(pending lines, how many were dropped since the last take). A line put after this arms
        again, even one put while the caller is still showing these."""
        with self._lock:
            lines, dropped = list(self._lines), self._dropped
            self._lines.clear()
            self._dropped = 0
            self._armed = False
        return lines, dropped

    def __len__(self) -> int:
        with self._lock:
            return len(self._lines)


class LogView(QWidget):
    """Read-only log tail with find (all matches highlighted), copy and open-file actions.
    :meth:`append_line` may be called from any thread."""

    linesAppended = Signal(int)  # how many lines the last batch added
    _arm = Signal()  # a line came into an empty buffer: start the flush timer (queued from other threads)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        max_lines: int = DEFAULT_MAX_LINES,
        placeholder: str = "No output yet.",
    ) -> None:
        super().__init__(parent)
        self._buffer = LineBuffer(max_lines)
        self._log_file: Path | None = None
        self._starts: list[int] = []  # match positions in the document, ascending
        self._lengths: list[int] = []
        self._current = -1
        self._current_cursor: QTextCursor | None = None
        self._needle = ""

        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Find in log…")
        clear_button(self.search)
        self.search.setObjectName("logSearch")
        self.prev_button = self._tool("▲", "Previous match (Shift+Enter)", lambda: self.find(backward=True))
        self.next_button = self._tool("▼", "Next match (Enter)", lambda: self.find())
        icon_only(self.prev_button, "Previous match")
        icon_only(self.next_button, "Next match")
        self.match_label = QLabel("", self)
        self.match_label.setObjectName("logMatchCount")
        self.match_label.setVisible(False)
        self.match_label.setStyleSheet("color: palette(placeholder-text);")
        self.copy_button = self._tool("Copy all", "Copy the lines shown here", self.copy_all)
        self.open_button = self._tool(
            "Open log file", "The full log, in your text viewer", self.open_log_file
        )
        self.open_button.setEnabled(False)
        self.clear_button = self._tool("Clear", "Clear this view (the log file is kept)", self.clear)

        self.view = QPlainTextEdit(self)
        self.view.setReadOnly(True)
        self.view.setObjectName("logText")
        self.view.setMaximumBlockCount(max_lines)
        self.view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.view.setPlaceholderText(placeholder)
        self.view.setUndoRedoEnabled(False)

        bar = QHBoxLayout()
        bar.setSpacing(4)
        bar.addWidget(self.search, 1)
        bar.addWidget(self.prev_button)
        bar.addWidget(self.next_button)
        bar.addWidget(self.match_label)
        bar.addSpacing(8)
        bar.addWidget(self.copy_button)
        bar.addWidget(self.open_button)
        bar.addWidget(self.clear_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(4)
        layout.addLayout(bar)
        layout.addWidget(self.view, 1)

        self._search_timer = QTimer(self, singleShot=True, interval=150)
        self._search_timer.timeout.connect(self._rehighlight)
        self.search.textChanged.connect(lambda _t: self._search_timer.start())
        self.search.returnPressed.connect(self._on_return)
        find_key = QShortcut(QKeySequence(QKeySequence.StandardKey.Find), self)
        find_key.activated.connect(self._focus_search)

        self._flush_timer = QTimer(self, singleShot=True, interval=FLUSH_MS)
        self._flush_timer.timeout.connect(self.flush)
        self._arm.connect(self._flush_timer.start)
        self.view.verticalScrollBar().valueChanged.connect(self._repaint_visible)
        theme_notifier().changed.connect(self._repaint_visible)  # the marks take the theme's colours

    def _repaint_visible(self, *_args: object) -> None:
        if self._starts:
            self._paint()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._repaint_visible()

    def _tool(self, text: str, tip: str, slot: object) -> QToolButton:
        b = QToolButton(self)
        b.setText(text)
        b.setToolTip(tip)
        b.setAutoRaise(True)
        b.clicked.connect(slot)  # type: ignore[arg-type]
        return b

    # ---- feeding -------------------------------------------------------------------------------
    @property
    def max_lines(self) -> int:
        return self.view.maximumBlockCount()

    def append_line(self, line: str) -> None:
        """Queue one line (thread-safe); it appears within ``FLUSH_MS``."""
        if self._buffer.put(line.rstrip("\r\n")):
            # a reader thread may outlive the widget: its line then goes nowhere, as before
            with contextlib.suppress(RuntimeError):
                self._arm.emit()

    def append_lines(self, lines: list[str]) -> None:
        for line in lines:
            self.append_line(line)

    def flush(self) -> int:
        """Move pending lines into the view (the timer armed by the first pending line does this;
        tests may call it). Returns how many were added."""
        lines, dropped = self._buffer.take()
        if not lines:
            return 0
        if dropped:
            lines.insert(0, f"[… {dropped} earlier lines skipped here; they are in the log file]")
        bar = self.view.verticalScrollBar()
        follow = bar.value() >= bar.maximum() - 4
        kept = bar.value()
        self.view.appendPlainText("\n".join(lines))
        if follow:
            bar.setValue(bar.maximum())
        else:
            bar.setValue(min(kept, bar.maximum()))
        if self.search.text():
            self._rehighlight(keep_current=True)
        self.linesAppended.emit(len(lines))
        return len(lines)

    def clear(self) -> None:
        self._buffer.take()
        self.view.clear()
        self._rehighlight()

    def text(self) -> str:
        return self.view.toPlainText()

    def line_count(self) -> int:
        """Lines shown (an empty view counts 0)."""
        doc = self.view.document()
        return 0 if doc.isEmpty() else doc.blockCount()

    def set_log_file(self, path: str | Path | None) -> None:
        self._log_file = Path(path) if path else None
        self.open_button.setEnabled(self._log_file is not None)
        self.open_button.setToolTip(
            f"Open {self._log_file}" if self._log_file else "No log file yet (start the server)"
        )

    @property
    def log_file(self) -> Path | None:
        return self._log_file

    # ---- actions -------------------------------------------------------------------------------
    def copy_all(self) -> None:
        QGuiApplication.clipboard().setText(self.view.toPlainText())

    def open_log_file(self) -> bool:
        if self._log_file is None or not self._log_file.exists():
            return False
        return open_path(self, self._log_file, "the log file")

    def _focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    def _on_return(self) -> None:
        back = bool(QGuiApplication.keyboardModifiers() & Qt.KeyboardModifier.ShiftModifier)
        self.find(backward=back)

    # ---- search --------------------------------------------------------------------------------
    # Matches are found in the plain text with ``str.find`` (a few ms for 5000 lines;
    # QTextDocument.find takes ~40 µs per match) and only those on screen are painted, so a search stays cheap while
    # vLLM streams lines into the view.
    def match_count(self) -> int:
        return len(self._starts)

    def current_match_text(self) -> str:
        """The text of the line holding the current match ('' when none)."""
        if self._current_cursor is None:
            return ""
        return self._current_cursor.block().text()

    def find(self, text: str | None = None, *, backward: bool = False) -> bool:  # type: ignore[override]
        """Select the next (or previous) match of ``text`` (default: the search box), wrapping
        around. Case-insensitive. Returns whether one was found."""
        if text is not None and text != self.search.text():
            self.search.setText(text)
        self._search_timer.stop()
        if self._needle != self.search.text():
            self._rehighlight()
        if not self._starts:
            return False
        cursor = self.view.textCursor()
        pos = cursor.selectionStart() if backward else cursor.selectionEnd()
        if backward:
            i = bisect.bisect_left(self._starts, pos) - 1
            i = i if i >= 0 else len(self._starts) - 1
        else:
            i = bisect.bisect_left(self._starts, pos)
            i = i if i < len(self._starts) else 0
        self._select(i)
        self.view.centerCursor()
        self._paint()
        return True

    def _select(self, i: int) -> None:
        self._current = i
        c = QTextCursor(self.view.document())
        c.setPosition(self._starts[i])
        c.setPosition(self._starts[i] + self._lengths[i], QTextCursor.MoveMode.KeepAnchor)
        self._current_cursor = QTextCursor(c)  # follows edits (lines dropped at the top)
        self.view.setTextCursor(c)

    def _find_all(self, needle: str) -> tuple[list[int], list[int]]:
        text = self.view.toPlainText()
        low, key = text.lower(), needle.lower()
        bmp = text.isascii() or len(text.encode("utf-16-le")) == 2 * len(text)
        if bmp and len(low) == len(text) and len(key) == len(needle):
            starts, at = [], low.find(key)  # str.find: ~10x faster than re.IGNORECASE here
            while at >= 0:
                starts.append(at)
                at = low.find(key, at + len(key))
            return starts, [len(key)] * len(starts)
        # Qt counts UTF-16 units (and case-folds its own way): let it search
        doc, starts, lengths = self.view.document(), [], []
        cursor = QTextCursor(doc)
        while len(starts) < SLOW_SEARCH_LIMIT:
            cursor = doc.find(needle, cursor, QTextDocument.FindFlag(0))
            if cursor.isNull():
                break
            starts.append(cursor.selectionStart())
            lengths.append(cursor.selectionEnd() - cursor.selectionStart())
        return starts, lengths

    def _rehighlight(self, keep_current: bool = False) -> None:
        needle = self.search.text()
        self._needle = needle
        kept = self._current_cursor.selectionStart() if keep_current and self._current_cursor else None
        self._starts, self._lengths = self._find_all(needle) if needle else ([], [])
        self._current, self._current_cursor = -1, None
        if kept is not None:
            i = bisect.bisect_left(self._starts, kept)
            if i < len(self._starts) and self._starts[i] == kept:
                self._current = i
                c = QTextCursor(self.view.document())
                c.setPosition(kept)
                c.setPosition(kept + self._lengths[i], QTextCursor.MoveMode.KeepAnchor)
                self._current_cursor = c
        self._paint()

    def _paint(self) -> None:
        """Highlight the matches on screen (the current one stronger) and update the count."""
        selections = []
        if self._starts:
            doc = self.view.document()
            first = self.view.firstVisibleBlock()
            lines = self.view.viewport().height() // max(1, self.view.fontMetrics().lineSpacing()) + 2
            last = doc.findBlockByNumber(min(doc.blockCount() - 1, first.blockNumber() + lines))
            lo = bisect.bisect_left(self._starts, first.position())
            hi = bisect.bisect_right(self._starts, last.position() + last.length())
            for i in range(lo, hi):
                sel = QTextEdit.ExtraSelection()
                fmt = QTextCharFormat()
                role = "match_current" if i == self._current else "match"
                fmt.setBackground(color(role))  # the theme's: readable in both
                fmt.setForeground(color(f"{role}_text"))
                c = QTextCursor(doc)
                c.setPosition(self._starts[i])
                c.setPosition(self._starts[i] + self._lengths[i], QTextCursor.MoveMode.KeepAnchor)
                sel.format = fmt  # type: ignore[attr-defined]
                sel.cursor = c  # type: ignore[attr-defined]
                selections.append(sel)
        self.view.setExtraSelections(selections)
        needle = self.search.text()
        self.match_label.setVisible(bool(needle))
        if not needle:
            self.match_label.setText("")
        elif not self._starts:
            self.match_label.setText("no match")
        else:
            where = f"{self._current + 1} of " if self._current >= 0 else ""
            self.match_label.setText(f"{where}{len(self._starts)}")
