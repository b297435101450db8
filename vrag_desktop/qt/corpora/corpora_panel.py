"""The Corpora panel: create, rename, remove corpora; add files by drop or dialog; watch indexing.

Every read of a corpus happens off the GUI thread (:mod:`vrag_desktop.core.corpus.status` on the
worker pool) and the tree is refreshed at most every ``REFRESH_S`` seconds while indexing, updating
rows in place so selection and scroll position survive. Indexing itself is the :class:`Indexer`'s.
Nothing here opens a blocking dialog except the file pickers and the remove confirmation, and both
are injectable (``choose_folder``, ``choose_files``, ``confirm``) so tests replace them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import shiboken6
from PySide6.QtCore import QEvent, QPoint, QSize, Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QDragEnterEvent,
    QDragMoveEvent,
    QDropEvent,
    QKeySequence,
    QPalette,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.corpus.status import (
    CorpusSummary,
    FileRow,
    missing_root_message,
    plan_drop,
    progress_text,
    read_files,
    read_items,
    read_summaries,
)
from vrag_desktop.core.progress import Progress
from vrag_desktop.qt.corpora.corpora_rows import (
    KEY_ROLE,
    KIND_ROLE,
    NAME_ROLE,
    STATE_ROLE,
    SUB_ROLE,
    SUB_TONE_ROLE,
    TONE_ROLE,
    TONES,
    RowDelegate,
    line_icon,
)
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.corpora.indexer import Indexer
from vrag_desktop.qt.infra.theme import color, set_role, theme_notifier
from vrag_desktop.qt.infra.thumbnails import ThumbnailStrip
from vrag_desktop.qt.infra.workers import run_in_thread

if TYPE_CHECKING:
    from vrag_desktop.qt.context import AppContext

DEFAULT_CORPUS = "default"  # as core.library.DEFAULT_CORPUS (not imported: it pulls in numpy)


def check_name(name: str) -> str:
    """core.library.check_name, imported when first needed (the window opens without numpy)."""
    from vrag_desktop.core.corpus.library import check_name as check

    return check(name)


# ---------------------------------------------------------------- reading (worker pool)
@dataclass
class _View:
    summaries: list[CorpusSummary]
    files: dict[str, list[FileRow]] = field(default_factory=dict)


def _read_view(ctx: AppContext, expanded: list[str]) -> _View:
    corpora_dir = ctx.library.corpora_dir  # CorpusError with the path if the data dir is unusable
    view = _View(read_summaries(corpora_dir))
    names = {s.name for s in view.summaries}
    for name in expanded:
        if name in names:
            try:
                view.files[name] = read_files(corpora_dir / name)
            except Exception:  # being renamed or removed right now: the next refresh catches up
                continue
    return view


# ---------------------------------------------------------------- the panel
class CorporaPanel(QWidget):
    """Corpora and their files with live state; see the module docstring."""

    corporaChanged = Signal()
    busyChanged = Signal(bool, str)
    indexed = Signal(str)
    currentCorpusChanged = Signal(str)
    viewRefreshed = Signal()

    REFRESH_S = 0.5
    PREVIEW_LIMIT = 120

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("corporaPanel")
        self.ctx = ctx
        self.confirm: Callable[[str, str], bool] = self._confirm_dialog
        self.choose_folder: Callable[[], str | None] = self._folder_dialog
        self.choose_files: Callable[[], list[str]] = self._files_dialog
        self.indexer = Indexer(ctx, self)
        self._summaries: dict[str, CorpusSummary] = {}
        self._corpus_items: dict[str, QTreeWidgetItem] = {}
        self._children: dict[str, dict[tuple[str, Any], QTreeWidgetItem]] = {}
        self._files: dict[str, list[FileRow]] = {}
        self._refreshing = False
        self._dirty = False
        self._last_refresh = 0.0
        self._select_after: str | None = None
        self._editing: tuple[str, str] | None = None  # ("new", "") or ("rename", old name)
        self._data_dir_problem: str | None = None
        self._preview_key: tuple[Any, ...] | None = None
        self._preview_gen = 0
        self._closed = False
        self._build()
        self._wire()
        self.setAcceptDrops(True)
        self.refresh()

    # ------------------------------------------------------------ UI
    def _build(self) -> None:
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        lay.setSpacing(6)

        bar = QHBoxLayout()
        bar.setSpacing(4)
        self.new_button = self._tool(
            "New corpus", "plus", "Create an empty corpus", self.new_corpus, text=True
        )
        self.add_button = self._tool(
            "Add", "folder", "Add folders or files to the selected corpus", None, text=True
        )
        add_menu = QMenu(self.add_button)
        self.act_add_folder = add_menu.addAction("Add folder…", self.add_folder)
        self.act_add_files = add_menu.addAction("Add files…", self.add_files)
        self.add_button.setMenu(add_menu)
        self.add_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.add_button.setText("Add…")
        self.add_button.setStyleSheet("QToolButton::menu-indicator { image: none; width: 0px; }")
        self.rescan_button = self._tool(
            "Re-scan", "refresh", "Re-scan: pick up new, changed and deleted files (F5)", self.rescan
        )
        self.rename_button = self._tool(
            "Rename", "pencil", "Rename the selected corpus (F2)", self.start_rename
        )
        self.remove_button = self._tool(
            "Remove", "trash", "Remove the selected corpus (your files are not touched)", self.remove_corpus
        )
        for w in (self.new_button, self.add_button):
            bar.addWidget(w)
        bar.addStretch(1)
        for w in (self.rescan_button, self.rename_button, self.remove_button):
            bar.addWidget(w)
        lay.addLayout(bar)

        # inline name editor (new / rename): never a modal
        self.editor = QFrame()
        ed = QVBoxLayout(self.editor)
        ed.setContentsMargins(0, 0, 0, 0)
        ed.setSpacing(2)
        row = QHBoxLayout()
        row.setSpacing(4)
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("Name of the new corpus")
        self.name_edit.setClearButtonEnabled(True)
        self.name_ok = QPushButton("Create")
        self.name_ok.setDefault(True)
        self.name_cancel = QToolButton()
        self.name_cancel.setText("Cancel")
        row.addWidget(self.name_edit, 1)
        row.addWidget(self.name_ok)
        row.addWidget(self.name_cancel)
        ed.addLayout(row)
        self.name_error = QLabel()
        self.name_error.setWordWrap(True)
        set_role(self.name_error, "role", "error")
        self.name_error.hide()
        ed.addWidget(self.name_error)
        self.editor.hide()
        lay.addWidget(self.editor)

        # data directory problems
        self.banner = QFrame()
        set_role(self.banner, "role", "banner-error")
        bl = QHBoxLayout(self.banner)
        bl.setContentsMargins(8, 6, 8, 6)
        self.banner_label = QLabel()
        self.banner_label.setWordWrap(True)
        self.banner_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bl.addWidget(self.banner_label)
        self.banner.hide()
        lay.addWidget(self.banner)

        self.tree = QTreeWidget()
        self.tree.setHeaderHidden(True)
        self.tree.setColumnCount(1)
        self.tree.setUniformRowHeights(True)
        self.tree.setItemDelegate(RowDelegate(self.tree))
        self.tree.setIconSize(QSize(18, 18))
        self.tree.setIndentation(14)
        self.tree.setAnimated(True)
        self.tree.setExpandsOnDoubleClick(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.tree.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.empty = QLabel()
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.empty.setFrameShape(QFrame.Shape.StyledPanel)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.tree)
        self.stack.addWidget(self.empty)

        top = QWidget()
        tl = QVBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
        tl.setSpacing(4)
        tl.addWidget(self.stack, 1)
        self.hint = QLabel("Drop folders or files on a corpus to add them.")
        set_role(self.hint, "role", "hint")
        tl.addWidget(self.hint)

        # progress: label, bar, cancel
        self.progress_box = QFrame()
        set_role(self.progress_box, "role", "banner-info")
        pl = QVBoxLayout(self.progress_box)
        pl.setContentsMargins(8, 6, 8, 6)
        pl.setSpacing(4)
        self.progress_label = QLabel()
        self.progress_label.setWordWrap(True)
        self.progress_label.setTextFormat(Qt.TextFormat.RichText)
        pl.addWidget(self.progress_label)
        prow = QHBoxLayout()
        prow.setSpacing(6)
        self.progress_bar = QProgressBar()
        self.progress_bar.setTextVisible(False)
        self.progress_bar.setFixedHeight(8)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setIcon(line_icon("stop", color("error")))
        self.cancel_button.setToolTip("Stop indexing; everything indexed so far is kept")
        prow.addWidget(self.progress_bar, 1)
        prow.addWidget(self.cancel_button)
        pl.addLayout(prow)
        self.progress_box.hide()
        tl.addWidget(self.progress_box)

        bottom = self.preview_box = QWidget()
        bl2 = QVBoxLayout(bottom)
        bl2.setContentsMargins(0, 0, 0, 0)
        bl2.setSpacing(2)
        self.preview_label = QLabel("Select a corpus or a file to see its pages.")
        set_role(self.preview_label, "role", "hint")
        self.preview_label.setTextFormat(Qt.TextFormat.PlainText)
        self.strip = ThumbnailStrip()
        self.strip.empty_text = "Pages, images and clip keyframes appear here."
        bl2.addWidget(self.preview_label)
        bl2.addWidget(self.strip, 1)

        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.addWidget(top)
        self.splitter.addWidget(bottom)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setChildrenCollapsible(False)
        lay.addWidget(self.splitter, 1)

        for key, fn in (("F2", self.start_rename), ("F5", self.rescan), ("Delete", self.remove_corpus)):
            act = QAction(self)
            act.setShortcut(QKeySequence(key))
            act.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            act.triggered.connect(lambda _=False, fn=fn: fn())
            self.addAction(act)
        self._restyle()
        self._update_actions()

    def _tool(
        self, label: str, icon: str, tip: str, slot: Callable[[], Any] | None, *, text: bool = False
    ) -> QToolButton:
        b = QToolButton()
        b.setText(label)
        b.setProperty("icon_shape", icon)
        b.setToolTip(tip)
        b.setAutoRaise(True)
        b.setIconSize(QSize(16, 16))
        b.setToolButtonStyle(
            Qt.ToolButtonStyle.ToolButtonTextBesideIcon if text else Qt.ToolButtonStyle.ToolButtonIconOnly
        )
        if slot is not None:
            b.clicked.connect(lambda _=False: slot())
        return b

    def _restyle(self) -> None:
        ink = self.palette().color(QPalette.ColorRole.ButtonText)
        for b in (
            self.new_button,
            self.add_button,
            self.rescan_button,
            self.rename_button,
            self.remove_button,
        ):
            b.setIcon(line_icon(str(b.property("icon_shape")), ink))
        self.cancel_button.setIcon(line_icon("stop", color("error")))
        self._icons = {
            k: line_icon(k, color("accent") if k == "corpus" else ink) for k in ("corpus", "folder", "file")
        }
        self._icons["missing"] = line_icon("folder", color("warn"))
        for name, item in self._corpus_items.items():
            item.setIcon(0, self._icons["corpus"])
            if name in self._files and name in self._summaries:
                self._fill_children(item, self._summaries[name], self._files[name], rebuild=True)
        self.tree.viewport().update()

    def _wire(self) -> None:
        ix = self.indexer
        ix.progress.connect(self._on_progress)
        ix.changed.connect(lambda _name: self._schedule_refresh())
        ix.busyChanged.connect(self._on_busy)
        ix.indexed.connect(self._on_indexed)
        ix.jobStarted.connect(self._on_job_started)
        ix.jobEnded.connect(lambda _n, _o: self._schedule_refresh(now=True))
        self.cancel_button.clicked.connect(self.cancel_indexing)
        self.name_ok.clicked.connect(self._editor_accept)
        self.name_cancel.clicked.connect(self.close_editor)
        self.name_edit.returnPressed.connect(self._editor_accept)
        self.name_edit.textChanged.connect(self._editor_validate)
        self.tree.currentItemChanged.connect(self._on_current)
        self.tree.itemExpanded.connect(self._on_expanded)
        self.tree.customContextMenuRequested.connect(self._context_menu)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._start_refresh)
        theme_notifier().changed.connect(self._on_theme)

    def _on_theme(self, _effective: str) -> None:
        if shiboken6.isValid(self):
            self._restyle()

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange and hasattr(self, "_icons"):
            self._restyle()
        super().changeEvent(event)

    # ------------------------------------------------------------ public API
    def selected_corpus(self) -> str | None:
        item = self.tree.currentItem()
        return None if item is None else str(item.data(0, NAME_ROLE))

    def corpus_names(self) -> list[str]:
        return sorted(self._summaries)

    def summary(self, name: str) -> CorpusSummary | None:
        return self._summaries.get(name)

    def corpus_item(self, name: str) -> QTreeWidgetItem | None:
        return self._corpus_items.get(name)

    def file_item(self, name: str, path: str | os.PathLike[str]) -> QTreeWidgetItem | None:
        """The row of a source file (once its corpus was expanded and read)."""
        want = os.path.abspath(os.fspath(path))
        for row in self._files.get(name, []):
            if row.path == want:
                return self._children.get(name, {}).get(("file", row.source_id))
        return None

    def refresh(self) -> None:
        """Re-read every corpus now (off the GUI thread)."""
        self._schedule_refresh(now=True)

    reload = refresh  # the main window calls this after the data directory changed

    def new_corpus(self) -> None:
        self._open_editor("new", "")

    def start_rename(self) -> None:
        name = self.selected_corpus()
        if name is None:
            self._hint("Select a corpus to rename.")
            return
        self._open_editor("rename", name)

    def close_editor(self) -> None:
        self._editing = None
        self.editor.hide()
        self.name_error.hide()

    def create_corpus(self, name: str) -> bool:
        """Create an empty corpus; a bad or taken name is explained under the name field."""
        try:
            name = check_name(name)
        except Exception as exc:
            self._name_problem(str(exc))
            return False
        if name in self._summaries:
            self._name_problem(f"a corpus named '{name}' already exists")
            return False

        def make() -> None:
            lib = self.ctx.library
            if lib.exists(name):
                from vrag_desktop.core.corpus.corpus import CorpusError

                raise CorpusError(f"a corpus named '{name}' already exists")
            lib.open(name, create=True).close()

        self._select_after = name
        run_in_thread(
            make,
            on_done=self._guard(lambda _r: (self.close_editor(), self.refresh())),
            on_error=self._guard(lambda exc: self._write_failed("Cannot create the corpus", exc)),
        )
        return True

    def rename_corpus(self, old: str, new: str) -> bool:
        try:
            new = check_name(new)
        except Exception as exc:
            self._name_problem(str(exc))
            return False
        if new == old:
            self.close_editor()
            return True
        if new in self._summaries:
            self._name_problem(f"a corpus named '{new}' already exists")
            return False
        resume = self.indexer.current() == old or old in self.indexer.queued()

        def do() -> None:
            lib = self.ctx.library
            corpus = lib.open(old)
            try:
                corpus.lock()  # refuse while another process indexes it
            finally:
                corpus.close()
            lib.rename(old, new)

        def done(_r: object) -> None:
            self.close_editor()
            self._select_after = new
            if resume:
                self.indexer.enqueue(new)
            self.refresh()

        self.indexer.stop_then(
            old,
            lambda: run_in_thread(
                do,
                on_done=self._guard(done),
                on_error=self._guard(lambda exc: self._write_failed(f"Cannot rename '{old}'", exc)),
            ),
        )
        return True

    def remove_corpus(self, name: str | None = None) -> bool:
        """Ask, then delete the corpus's index and derived images. The person's files stay."""
        name = name or self.selected_corpus()
        if name is None:
            self._hint("Select a corpus to remove.")
            return False
        s = self._summaries.get(name)
        what = f" ({s.counts_text()})" if s else ""
        if not self.confirm(
            f"Remove corpus '{name}'?",
            f"This deletes its index and page images{what} from VRAG Desktop's data folder.\n\n"
            "Your own files and folders are not touched.",
        ):
            return False

        def done(_r: object) -> None:
            error_sink().report(
                "Corpus removed", f"Removed corpus '{name}' (your files were not touched).", "info"
            )
            self.refresh()

        self.indexer.stop_then(
            name,
            lambda: run_in_thread(
                lambda: self.ctx.library.remove(name),
                on_done=self._guard(done),
                on_error=self._guard(lambda exc: self._write_failed(f"Cannot remove '{name}'", exc)),
            ),
        )
        return True

    def add_folder(self) -> None:
        path = self.choose_folder()
        if path:
            self.add_paths([path])

    def add_files(self) -> None:
        paths = self.choose_files()
        if paths:
            self.add_paths(paths)

    def add_paths(self, paths: Iterable[str | os.PathLike[str]], corpus: str | None = None) -> None:
        """Check the paths (off-thread), say why any is left out, add and index the rest into
        ``corpus``, else the selected corpus, else "default"."""
        target = corpus or self.selected_corpus() or DEFAULT_CORPUS
        items = [os.fspath(p) for p in paths]
        run_in_thread(
            plan_drop,
            items,
            on_done=self._guard(lambda plan: self._apply_plan(target, plan)),
            error_title=f"Cannot add to {target}",
        )

    def add_and_index(self, corpus_name: str, paths: Iterable[str | os.PathLike[str]]) -> None:
        """Add ``paths`` to ``corpus_name`` (created if new) and queue it for indexing."""
        try:
            name = check_name(corpus_name)
        except Exception as exc:
            error_sink().report("Cannot add files", exc)
            return
        if name not in self._summaries:
            self._select_after = name
        self.indexer.enqueue(name, [os.path.abspath(os.fspath(p)) for p in paths], create=True)
        self._schedule_refresh()

    def rescan(self, name: str | None = None) -> None:
        """Pick up new, changed and deleted files (failed ones are tried again) and index them."""
        name = name or self.selected_corpus()
        if name is None:
            self._hint("Select a corpus to re-scan.")
            return
        self.indexer.enqueue(name, retry_failed=True)

    def remove_folder(self, name: str, root: str) -> bool:
        """Take a folder (or file) the person added out of a corpus; the folder itself stays."""
        if not self.confirm(
            f"Remove {os.path.basename(root) or root} from '{name}'?",
            f"Its files leave the corpus index:\n{root}\n\nThe folder and its files are not touched.",
        ):
            return False
        self.indexer.enqueue(name, remove_roots=[root])
        return True

    def cancel_indexing(self) -> None:
        """Stop at the next batch; what was indexed is kept and the rest stays pending."""
        if self.indexer.is_busy():
            self.cancel_button.setEnabled(False)
            self.progress_label.setText("<b>Stopping after the current batch…</b>")
        self.indexer.cancel()

    def resume_pending(self) -> None:
        """Queue every corpus with work left (called once at start-up)."""
        self.indexer.resume_pending()

    def is_busy(self) -> bool:
        return self.indexer.is_busy()

    def shutdown(self, timeout_s: float = 10.0) -> bool:
        """Stop indexing (what is done is kept; the next start resumes). True when it stopped."""
        self._closed = True
        self._timer.stop()
        return self.indexer.shutdown(timeout_s)

    # ------------------------------------------------------------ editor
    def _open_editor(self, mode: str, name: str) -> None:
        self._editing = (mode, name)
        self.name_ok.setText("Create" if mode == "new" else "Rename")
        self.name_edit.setPlaceholderText("Name of the new corpus" if mode == "new" else "New name")
        self.name_edit.setText(name)
        self.name_error.hide()
        self.editor.show()
        self.name_edit.setFocus()
        self.name_edit.selectAll()

    def _editor_validate(self, text: str) -> None:
        if not text.strip():
            self.name_error.hide()
            self.name_ok.setEnabled(False)
            return
        problem = None
        try:
            name = check_name(text)
            old = self._editing[1] if self._editing else ""
            if name in self._summaries and name != old:
                problem = f"a corpus named '{name}' already exists"
        except Exception as exc:
            problem = str(exc)
        self.name_ok.setEnabled(problem is None)
        if problem:
            self._name_problem(problem)
        else:
            self.name_error.hide()

    def _editor_accept(self) -> None:
        if self._editing is None:
            return
        mode, old = self._editing
        text = self.name_edit.text()
        if mode == "new":
            self.create_corpus(text)
        else:
            self.rename_corpus(old, text)

    def _name_problem(self, text: str) -> None:
        if not self.editor.isVisible() and self._editing is None:
            self._open_editor("new", "")
        self.name_error.setText(text[:1].upper() + text[1:])
        self.name_error.show()

    def _hint(self, text: str) -> None:
        self.hint.setText(text)

    def _write_failed(self, title: str, exc: BaseException) -> None:
        """Creating/renaming/removing failed: say it under the name field and in the messages."""
        error_sink().report(title, exc)
        if self._editing is not None:
            self._name_problem(describe(exc))
        self.refresh()

    # ------------------------------------------------------------ drag and drop
    @staticmethod
    def _local_paths(event: QDropEvent | QDragEnterEvent | QDragMoveEvent) -> list[str]:
        md = event.mimeData()
        if md is None or not md.hasUrls():
            return []
        return [u.toLocalFile() for u in md.urls() if u.isLocalFile() and u.toLocalFile()]

    def corpus_at(self, pos: QPoint) -> str | None:
        """The corpus under ``pos`` (panel coordinates), if the point is over a tree row."""
        vp = self.tree.viewport()
        p = vp.mapFrom(self, pos)
        if self.stack.currentWidget() is not self.tree or not vp.rect().contains(p):
            return None
        item = self.tree.itemAt(p)
        return None if item is None else str(item.data(0, NAME_ROLE))

    def _drop_target(self, pos: QPoint) -> str:
        return self.corpus_at(pos) or self.selected_corpus() or DEFAULT_CORPUS

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if self._local_paths(event):
            event.acceptProposedAction()
            self._hint(f"Release to add to '{self._drop_target(event.position().toPoint())}'")
        else:
            event.ignore()

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        if self._local_paths(event):
            event.acceptProposedAction()
            self._hint(f"Release to add to '{self._drop_target(event.position().toPoint())}'")
        else:
            event.ignore()

    def dragLeaveEvent(self, event: QEvent) -> None:
        self._hint("Drop folders or files on a corpus to add them.")
        super().dragLeaveEvent(event)  # type: ignore[arg-type]

    def dropEvent(self, event: QDropEvent) -> None:
        paths = self._local_paths(event)
        if not paths:
            event.ignore()
            return
        event.acceptProposedAction()
        target = self._drop_target(event.position().toPoint())
        self._hint(f"Adding {len(paths)} item{'s' if len(paths) != 1 else ''} to '{target}'…")
        self.add_paths(paths, target)

    def _apply_plan(self, target: str, plan: Any) -> None:
        for level, message in plan.messages:
            error_sink().report(f"Not added to {target}", message, level)
        if plan.accepted:
            self.add_and_index(target, plan.accepted)
        else:
            self._hint("Nothing was added: see the messages.")

    # ------------------------------------------------------------ refresh
    def _schedule_refresh(self, now: bool = False) -> None:
        if self._closed:
            return
        if self._refreshing:
            self._dirty = True
            return
        wait = 0.0 if now else self.REFRESH_S - (time.monotonic() - self._last_refresh)
        if wait <= 0:
            self._timer.stop()
            self._start_refresh()
        elif not self._timer.isActive():
            self._timer.start(int(wait * 1000) + 1)

    def _start_refresh(self) -> None:
        if self._refreshing or self._closed:
            return
        self._refreshing = True
        self._dirty = False
        self._last_refresh = time.monotonic()
        expanded = [n for n, it in self._corpus_items.items() if it.isExpanded()]
        run_in_thread(
            _read_view,
            self.ctx,
            expanded,
            on_done=self._guard(self._apply_view),
            on_error=self._guard(self._view_failed),
        )

    def _refresh_ended(self) -> None:
        self._refreshing = False
        if self._dirty:
            self._schedule_refresh()

    def _view_failed(self, exc: BaseException) -> None:
        text = describe(exc)
        try:
            if self._summaries:  # what was listed lives in a directory that cannot be used now
                self._apply(_View([]))
            if text != self._data_dir_problem:
                error_sink().report("Data directory unusable", text)
            self._data_dir_problem = text
            self.banner_label.setText(
                f"<b>Cannot use the data directory.</b><br>{_esc(text)}<br>"
                "Choose another data directory in Settings; nothing is written until then."
            )
            self.banner.show()
            self._show_empty(True, unusable=True)
        finally:
            self._refresh_ended()

    def _apply_view(self, view: _View) -> None:
        try:
            self._apply(view)
        finally:
            self._refresh_ended()
        self.viewRefreshed.emit()

    def _apply(self, view: _View) -> None:
        if self._data_dir_problem is not None:
            self._data_dir_problem = None
            self.banner.hide()
        before = set(self._summaries)
        self._summaries = {s.name: s for s in view.summaries}
        for name in [n for n in self._corpus_items if n not in self._summaries]:
            item = self._corpus_items.pop(name)
            self._children.pop(name, None)
            self._files.pop(name, None)
            self.tree.takeTopLevelItem(self.tree.indexOfTopLevelItem(item))
        for i, s in enumerate(view.summaries):
            item = self._corpus_items.get(s.name)
            if item is None:
                item = QTreeWidgetItem()
                item.setData(0, KIND_ROLE, "corpus")
                item.setData(0, NAME_ROLE, s.name)
                item.setIcon(0, self._icons["corpus"])
                self.tree.insertTopLevelItem(i, item)
                self._corpus_items[s.name] = item
            self._fill_corpus(item, s)
            if s.name in view.files:
                self._fill_children(item, s, view.files[s.name])
        self._show_empty(not self._summaries)
        if self._select_after in self._corpus_items:
            self.tree.setCurrentItem(self._corpus_items[self._select_after])
            self._select_after = None
        self._update_actions()
        self._maybe_reload_preview()
        if set(self._summaries) != before:
            self.corporaChanged.emit()

    def _show_empty(self, empty: bool, unusable: bool = False) -> None:
        """The empty state (or, with an unusable data directory, what to do) instead of a bare tree;
        the preview strip only where there is something to preview."""
        muted = color("muted").name()
        if unusable:
            self.empty.setText(
                "<p style='font-size:11pt'><b>Corpora unavailable</b></p>"
                f"<p style='color:{muted}'>Choose a data directory that can be written,<br>"
                "then your corpora appear here.</p>"
            )
        else:
            self.empty.setText(
                "<p style='font-size:11pt'><b>No corpora yet</b></p>"
                "<p>Drop folders or files here,<br>or click <b>New corpus</b>.</p>"
                f"<p style='color:{muted}'>PDFs, images, videos and notes are indexed on this "
                "machine, in the background.</p>"
            )
        self.stack.setCurrentWidget(self.empty if empty else self.tree)
        self.preview_box.setVisible(not empty)

    def _live_state(self, name: str) -> tuple[str, str] | None:
        if self.indexer.current() == name:
            p = self.indexer.last_progress
            if p is None or p.phase == "scan":
                return "scanning…", "indexing"
            if p.phase == "load":
                return "loading model…", "indexing"
            return f"indexing {min(p.done * 100 // p.total, 100) if p.total > 0 else 0}%", "indexing"
        if name in self.indexer.queued():
            return "queued", "queued"
        return None

    def _fill_corpus(self, item: QTreeWidgetItem, s: CorpusSummary) -> None:
        live = self._live_state(s.name)
        chip, state = live if live else (s.badge(), s.state)
        sub = s.counts_text()
        p = self.indexer.last_progress if self.indexer.current() == s.name else None
        if p is not None and p.phase == "index" and not s.problem:
            # items reach the manifest at checkpoints; the live count is the worker's
            files = f"{s.files} file{'s' if s.files != 1 else ''}"
            sub = f"{files} · indexing {p.done} of {p.total} items"
        details = s.details()
        if details:
            sub += " · " + details
        item.setText(0, s.name)
        _set(item, SUB_ROLE, sub)
        _set(item, STATE_ROLE, chip)
        _set(item, TONE_ROLE, TONES.get(state, "muted"))
        _set(item, SUB_TONE_ROLE, "warn" if s.missing_roots else "")
        tip = [f"<b>{_esc(s.name)}</b>", _esc(sub)]
        tip += [f"missing: {_esc(r)}" for r in s.missing_roots]
        if s.embedder:
            tip.append(f"embedder: {_esc(s.embedder)}")
        item.setToolTip(0, "<br>".join(tip))
        item.setChildIndicatorPolicy(
            QTreeWidgetItem.ChildIndicatorPolicy.ShowIndicator
            if s.files or s.roots
            else QTreeWidgetItem.ChildIndicatorPolicy.DontShowIndicatorWhenChildless
        )

    def _fill_children(
        self, parent: QTreeWidgetItem, s: CorpusSummary, rows: list[FileRow], rebuild: bool = False
    ) -> None:
        """Folder rows (the folders the person added) with their files; files added alone directly.
        Rows are rebuilt only when the set of files changed, and only changed rows are re-filled
        (a large expanded corpus refreshes cheaply while it is being indexed)."""
        name = s.name
        prev = {r.source_id: r for r in self._files.get(name, [])}
        self._files[name] = rows
        by_root: dict[str, list[FileRow]] = {}
        for r in rows:
            by_root.setdefault(r.root or "", []).append(r)
        file_roots = {r.path for r in rows if r.root == r.path}
        folders = [root for root in s.roots if root not in file_roots]
        keys: list[tuple[str, Any]] = [("root", f) for f in folders]
        keys += [("file", r.source_id) for r in rows]
        current = self._children.get(name, {})
        rebuild = rebuild or list(current) != keys
        if rebuild:
            keep = self.tree.currentItem()
            keep_key = (keep.data(0, KIND_ROLE), keep.data(0, KEY_ROLE)) if keep is not None else None
            collapsed = {k for k, it in current.items() if k[0] == "root" and not it.isExpanded()}
            parent.takeChildren()
            current = {}
            for f in folders:
                fi = QTreeWidgetItem(parent)
                fi.setData(0, KIND_ROLE, "root")
                fi.setData(0, NAME_ROLE, name)
                fi.setData(0, KEY_ROLE, f)
                current[("root", f)] = fi
            for r in rows:
                holder = current.get(("root", r.root)) if r.root in folders else parent
                fi = QTreeWidgetItem(holder or parent)
                fi.setData(0, KIND_ROLE, "file")
                fi.setData(0, NAME_ROLE, name)
                fi.setData(0, KEY_ROLE, r.source_id)
                current[("file", r.source_id)] = fi
            self._children[name] = current
            for k, it in current.items():
                if k[0] == "root" and k not in collapsed:
                    it.setExpanded(True)  # a folder shows its files unless the person folded it
            found = current.get(keep_key) if keep_key is not None else None  # type: ignore[arg-type]
            if found is not None:
                self.tree.setCurrentItem(found)
        for r in rows:
            if rebuild or prev.get(r.source_id) != r:
                self._fill_file(current[("file", r.source_id)], r)
        for f in folders:  # few, and a folder can go missing or come back with no file changing
            self._fill_root(current[("root", f)], f, f in s.missing_roots, by_root.get(f, []))

    def _fill_root(self, item: QTreeWidgetItem, root: str, missing: bool, rows: list[FileRow]) -> None:
        from vrag_desktop.core.corpus.scan import display_path

        item.setText(0, display_path(os.path.basename(root.rstrip(os.sep)) or root))
        item.setIcon(0, self._icons["missing" if missing else "folder"])
        pending = sum(r.status == "pending" for r in rows)
        failed = sum(r.status == "failed" for r in rows)
        items = sum(r.items for r in rows)
        files = len(rows)
        sub = f"{files} file{'s' if files != 1 else ''} · {items} item{'s' if items != 1 else ''}"
        tip = _esc(root)
        if missing:
            kept = sum(r.status == "indexed" for r in rows)
            state, chip = "missing", "missing"
            sub = f"missing · {kept} indexed file{'s' if kept != 1 else ''} kept — reconnect it or remove it"
            tip += "<br>" + _esc(missing_root_message(root, kept))
        elif pending:
            state, chip = "pending", f"pending {pending}"
        elif failed:
            state, chip = "failed", f"failed {failed}"
        else:
            state, chip = ("indexed", "indexed") if files else ("empty", "empty")
        _set(item, SUB_ROLE, sub)
        _set(item, STATE_ROLE, chip)
        _set(item, TONE_ROLE, TONES[state])
        _set(item, SUB_TONE_ROLE, "warn" if missing else "")
        item.setToolTip(0, tip)

    def _fill_file(self, item: QTreeWidgetItem, r: FileRow) -> None:
        from vrag_desktop.core.corpus.scan import display_path

        item.setText(0, r.display)
        item.setIcon(0, self._icons["file"])
        reason = r.short_reason
        kind_label = {kinds.PDF: "PDF", kinds.IMAGE: "image", kinds.VIDEO: "video", kinds.TEXT: "text"}.get(
            r.kind or "", os.path.splitext(r.path)[1].lstrip(".").upper() or "file"
        )
        contents = r.contents()
        sub = reason or (f"{kind_label} · {contents}" if contents and contents != kind_label else kind_label)
        _set(item, SUB_ROLE, sub)
        _set(item, STATE_ROLE, r.state_text)
        _set(item, TONE_ROLE, TONES.get(r.status, "muted"))
        _set(item, SUB_TONE_ROLE, "error" if r.status == "failed" else "")
        tip = _esc(display_path(r.path))
        if r.reason:
            tip += "<br>" + _esc(r.reason)
        item.setToolTip(0, tip)

    # ------------------------------------------------------------ selection and preview
    def _update_actions(self) -> None:
        has = self.selected_corpus() is not None
        for b in (self.rename_button, self.remove_button, self.rescan_button):
            b.setEnabled(has)

    def _on_current(self, item: QTreeWidgetItem | None, _prev: QTreeWidgetItem | None) -> None:
        self._update_actions()
        name = self.selected_corpus()
        if name is not None:
            self.currentCorpusChanged.emit(name)
            self._hint(f"Drop folders or files here to add them to '{name}'.")
        self._preview_key = None
        self._load_preview()

    def _on_expanded(self, item: QTreeWidgetItem) -> None:
        if item.parent() is None and str(item.data(0, NAME_ROLE)) not in self._files:
            self._schedule_refresh(now=True)

    def _preview_target(self) -> tuple[str, int | None, str, int] | None:
        """(corpus, source id or None, label, items known) of the current row; None for folders."""
        item = self.tree.currentItem()
        if item is None:
            return None
        name = str(item.data(0, NAME_ROLE))
        kind = item.data(0, KIND_ROLE)
        if kind == "corpus":
            s = self._summaries.get(name)
            return (name, None, name, s.items if s else 0) if s else None
        if kind == "file":
            sid = int(item.data(0, KEY_ROLE))
            rows = {r.source_id: r for r in self._files.get(name, [])}
            row = rows.get(sid)
            if row is None:
                return None
            if row.duplicate_of_id is not None and row.duplicate_of_id in rows:
                row = rows[row.duplicate_of_id]  # a duplicate is indexed once: show the original's
            return (name, row.source_id, item.text(0), row.items)
        return None

    def _maybe_reload_preview(self) -> None:
        t = self._preview_target()
        if t is not None and self._preview_key is not None and t != self._preview_key:
            self._load_preview()

    def _load_preview(self) -> None:
        t = self._preview_target()
        self._preview_key = t
        self._preview_gen += 1
        gen = self._preview_gen
        if t is None:
            self.strip.show_items([])
            self.preview_label.setText("Select a corpus or a file to see its pages.")
            return
        self.preview_label.setText(f"{t[2]}…")
        name, sid, label, _known = t
        if self._data_dir_problem is not None:
            return
        corpora_dir = self.ctx.data_dir / "corpora"  # Library's layout, without creating anything here

        def show(result: tuple[list[Any], int]) -> None:
            if gen != self._preview_gen:
                return
            items, total = result
            self.strip.show_items(items)
            if total == 0:
                self.preview_label.setText(f"{label}: nothing indexed yet")
            elif len(items) < total:
                self.preview_label.setText(f"{label} · first {len(items)} of {total} items")
            else:
                self.preview_label.setText(f"{label} · {total} item{'s' if total != 1 else ''}")

        run_in_thread(
            read_items,
            corpora_dir / name,
            sid,
            self.PREVIEW_LIMIT,
            on_done=self._guard(show),
            on_error=self._guard(lambda _exc: None),  # removed meanwhile: the refresh will say so
        )

    # ------------------------------------------------------------ indexing feedback
    def _on_job_started(self, name: str) -> None:
        self.progress_box.show()
        self.progress_bar.setRange(0, 0)
        self.progress_label.setText(f"<b>Indexing {_esc(name)}…</b>")
        self.cancel_button.setEnabled(True)
        item = self._corpus_items.get(name)
        if item is not None and name in self._summaries:
            self._fill_corpus(item, self._summaries[name])
            self.tree.viewport().update()

    def _on_progress(self, name: str, p: Progress) -> None:
        head, _, rest = progress_text(name, p).partition(" · ")
        queued = len(self.indexer.queued())
        if queued:
            rest += (" · " if rest else "") + f"{queued} more queued"
        muted = color("muted").name()
        self.progress_label.setText(
            f"<b>{_esc(head)}</b>" + (f"<br><span style='color:{muted}'>{_esc(rest)}</span>" if rest else "")
        )
        if p.phase == "index" and p.total > 0:
            self.progress_bar.setRange(0, p.total)
            self.progress_bar.setValue(min(p.done, p.total))
        else:
            self.progress_bar.setRange(0, 0)
        item = self._corpus_items.get(name)
        if item is not None and name in self._summaries:
            self._fill_corpus(item, self._summaries[name])
            self.tree.viewport().update()

    def _on_busy(self, busy: bool, text: str) -> None:
        self.progress_box.setVisible(busy)
        if not busy:
            self.progress_bar.setRange(0, 1)
            self.progress_bar.setValue(0)
            name = self.selected_corpus()
            self._hint(
                f"Drop folders or files here to add them to '{name}'."
                if name
                else "Drop folders or files on a corpus to add them."
            )
        self.busyChanged.emit(busy, text)

    def _on_indexed(self, name: str) -> None:
        self.indexed.emit(name)

    # ------------------------------------------------------------ context menu and dialogs
    def _context_menu(self, pos: QPoint) -> None:
        item = self.tree.itemAt(pos)
        menu = QMenu(self)
        if item is None:
            menu.addAction("New corpus…", self.new_corpus)
        else:
            name = str(item.data(0, NAME_ROLE))
            kind = item.data(0, KIND_ROLE)
            menu.addAction("Add folder…", self.add_folder)
            menu.addAction("Add files…", self.add_files)
            menu.addAction("Re-scan", lambda: self.rescan(name))
            menu.addSeparator()
            root = str(item.data(0, KEY_ROLE)) if kind == "root" else None
            if kind == "file":
                root = self._root_of_file(name, item)
            if root:
                menu.addAction("Remove from corpus…", lambda: self.remove_folder(name, root))
            menu.addAction("Rename…", self.start_rename)
            menu.addAction("Remove corpus…", lambda: self.remove_corpus(name))
        menu.popup(self.tree.viewport().mapToGlobal(pos))

    def _root_of_file(self, name: str, item: QTreeWidgetItem) -> str | None:
        sid = item.data(0, KEY_ROLE)
        row = next((r for r in self._files.get(name, []) if r.source_id == sid), None)
        return row.root if row is not None and row.root == row.path else None

    def _confirm_dialog(self, title: str, text: str) -> bool:
        answer = QMessageBox.question(
            self,
            title,
            text,
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            QMessageBox.StandardButton.Cancel,
        )
        return answer == QMessageBox.StandardButton.Yes

    def _folder_dialog(self) -> str | None:
        return QFileDialog.getExistingDirectory(self, "Add a folder") or None

    def _files_dialog(self) -> list[str]:
        pattern = " ".join(f"*{e}" for e in kinds.EXTENSIONS)
        files, _ = QFileDialog.getOpenFileNames(
            self, "Add files", "", f"Documents, images, videos ({pattern})"
        )
        return list(files)

    def _guard(self, fn: Callable[[Any], None]) -> Callable[[Any], None]:
        """Callbacks from the pool do nothing once the panel is gone (window closed)."""

        def call(value: Any) -> None:
            if shiboken6.isValid(self) and not self._closed:
                fn(value)
            elif isinstance(value, BaseException):
                error_sink().report("Corpora", value)

        return call


def _set(item: QTreeWidgetItem, role: int, value: str) -> None:
    if item.data(0, role) != value:
        item.setData(0, role, value)


def _esc(text: str) -> str:
    import html

    return html.escape(text)
