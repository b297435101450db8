"""The Corpora panel: create, rename, remove corpora; add files by drop or dialog; watch indexing.

Every read of a corpus happens off the GUI thread (:class:`SnapshotReader`, on the worker pool) and
the tree is refreshed at most every ``REFRESH_S`` seconds while indexing, updating rows in place so
selection and scroll position survive. Indexing itself is the :class:`Indexer`'s.
Nothing here opens a blocking dialog except the file pickers and the remove confirmation, and both
are injectable (``choose_folder``, ``choose_files``, ``confirm``) so tests replace them.

The panel coordinates its parts: :class:`CorporaToolbar` (commands), :class:`CorpusNameEditor`
(inline naming), :class:`CorporaTree` (rows), :class:`DropTarget` (drag and drop),
:class:`IndexingProgress`, :class:`CorpusPreview`, :class:`CorpusChecker` (Check… and Repair) and
:class:`FolderWatch` (a changed folder is rescanned).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, QPoint, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QLabel,
    QSplitter,
    QStackedWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.corpus.status import CorpusSummary, plan_drop
from vrag_desktop.core.progress import Progress
from vrag_desktop.qt.corpora.corpora_drop import DEFAULT_CORPUS, DROP_HINT, DropTarget
from vrag_desktop.qt.corpora.corpora_refresh import SnapshotReader
from vrag_desktop.qt.corpora.corpora_states import DataDirBanner, EmptyState
from vrag_desktop.qt.corpora.corpora_toolbar import (
    CorporaToolbar,
    ask_confirm,
    ask_files,
    ask_folder,
    row_menu,
)
from vrag_desktop.qt.corpora.corpora_tree import CorporaSnapshot, CorporaTree
from vrag_desktop.qt.corpora.corpus_check import CheckBanner, CorpusChecker
from vrag_desktop.qt.corpora.corpus_name_editor import CorpusNameEditor, check_name
from vrag_desktop.qt.corpora.corpus_preview import CorpusPreview
from vrag_desktop.qt.corpora.folder_watch import FolderWatch
from vrag_desktop.qt.corpora.indexer import Indexer
from vrag_desktop.qt.corpora.indexing_progress import IndexingProgress
from vrag_desktop.qt.infra.alive import alive
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.infra.tasks import run_call
from vrag_desktop.qt.infra.theme import set_role, theme_notifier

if TYPE_CHECKING:
    from vrag_desktop.qt.context import AppContext


class CorporaPanel(QWidget):
    """Corpora and their files with live state; see the module docstring."""

    corporaChanged = Signal()
    busyChanged = Signal(bool, str)
    indexed = Signal(str)
    currentCorpusChanged = Signal(str)
    viewRefreshed = Signal()

    REFRESH_S = 0.5

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("corporaPanel")
        self.ctx = ctx
        self.confirm: Callable[[str, str], bool] = lambda title, text: ask_confirm(self, title, text)
        self.choose_folder: Callable[[], str | None] = lambda: ask_folder(self)
        self.choose_files: Callable[[], list[str]] = lambda: ask_files(self)
        self.indexer = Indexer(ctx, self)
        self.watch = FolderWatch(ctx, self.indexer, self.refresh, self._write, self)
        self._select_after: str | None = None
        self._data_dir_problem: str | None = None
        self._closed = False
        self._build()
        self._wire()
        self.checker = CorpusChecker(self, self.check_banner)
        self.drops = DropTarget(self)
        self.refresh()

    # ------------------------------------------------------------ UI
    def _build(self) -> None:
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        lay.setSpacing(6)
        self.toolbar = CorporaToolbar(self)
        self.act_add_folder = self.toolbar.act_add_folder
        self.act_add_files = self.toolbar.act_add_files
        lay.addWidget(self.toolbar)

        self.editor = ed = CorpusNameEditor(
            lambda: self.tree.summaries, default_embedder=lambda: self.ctx.settings.embedder
        )
        self.name_edit, self.name_ok, self.name_error = ed.name_edit, ed.name_ok, ed.name_error
        lay.addWidget(self.editor)

        self.banner = DataDirBanner()  # data directory problems
        self.banner_label = self.banner.label
        lay.addWidget(self.banner)
        self.check_banner = CheckBanner()  # Check…'s report, and Repair
        lay.addWidget(self.check_banner)

        self.tree = CorporaTree(self.indexer)
        self.reader = SnapshotReader(self.ctx, self.tree.expanded_corpora, self._guard, self.REFRESH_S, self)
        self.empty = EmptyState()
        self.stack = QStackedWidget()
        self.stack.addWidget(self.tree)
        self.stack.addWidget(self.empty)

        top = QWidget()
        tl = QVBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
        tl.setSpacing(4)
        tl.addWidget(self.stack, 1)
        self.hint = QLabel(DROP_HINT)
        set_role(self.hint, "role", "hint")
        tl.addWidget(self.hint)
        self.progress = self.progress_box = pr = IndexingProgress()
        self.progress_label, self.progress_bar, self.cancel_button = pr.label, pr.bar, pr.cancel_button
        tl.addWidget(self.progress)

        self.preview = self.preview_box = CorpusPreview(self._guard)
        self.preview_label, self.strip = self.preview.label, self.preview.strip

        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.addWidget(top)
        self.splitter.addWidget(self.preview)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setChildrenCollapsible(False)
        lay.addWidget(self.splitter, 1)
        self._restyle()
        self._update_actions()

    def _restyle(self) -> None:
        ink = self.palette().color(QPalette.ColorRole.ButtonText)
        self.toolbar.restyle(ink)
        self.progress.restyle()
        self.tree.restyle(ink)

    def _wire(self) -> None:
        ix = self.indexer
        ix.progress.connect(self._on_progress)
        ix.changed.connect(lambda _name: self.reader.schedule())
        ix.busyChanged.connect(self._on_busy)
        ix.indexed.connect(self.indexed.emit)
        ix.jobStarted.connect(self._on_job_started)
        ix.jobEnded.connect(lambda _n, _o: self.reader.schedule(now=True))
        self.cancel_button.clicked.connect(self.cancel_indexing)
        self.editor.accepted.connect(self._editor_accept)
        self.editor.cancelled.connect(self.close_editor)
        self.tree.currentItemChanged.connect(self._on_current)
        self.tree.itemExpanded.connect(self._on_expanded)
        self.tree.customContextMenuRequested.connect(self._context_menu)
        self.reader.read.connect(self._apply_snapshot)
        self.reader.failed.connect(self._snapshot_failed)
        theme_notifier().changed.connect(self._on_theme)

    def _on_theme(self, _effective: str) -> None:
        if alive(self):
            self._restyle()

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange and hasattr(self, "preview"):
            self._restyle()
        super().changeEvent(event)

    # ------------------------------------------------------------ public API
    def selected_corpus(self) -> str | None:
        return self.tree.selected_corpus()

    def corpus_names(self) -> list[str]:
        return sorted(self.tree.summaries)

    def summary(self, name: str) -> CorpusSummary | None:
        return self.tree.summaries.get(name)

    def corpus_item(self, name: str) -> QTreeWidgetItem | None:
        return self.tree.corpus_items.get(name)

    def file_item(self, name: str, path: str | os.PathLike[str]) -> QTreeWidgetItem | None:
        """The row of a source file (once its corpus was expanded and read)."""
        return self.tree.file_item(name, path)

    def refresh(self) -> None:
        """Re-read every corpus now (off the GUI thread)."""
        self.reader.schedule(now=True)

    reload = refresh  # the main window calls this after the data directory changed

    def new_corpus(self) -> None:
        self.editor.open("new", "")

    def start_rename(self) -> None:
        name = self.selected_corpus()
        if name is None:
            self._hint("Select a corpus to rename.")
            return
        self.editor.open("rename", name)

    def close_editor(self) -> None:
        self.editor.close_editor()

    def create_corpus(self, name: str, embedder: str | None = None) -> bool:
        """Create an empty corpus that ``embedder`` will index (default: the settings'); a bad or
        taken name is explained under the name field."""
        checked = self.editor.usable(name)
        if checked is None:
            return False
        name = checked

        def make() -> None:
            lib = self.ctx.library
            if lib.exists(name):
                from vrag_desktop.core.corpus.corpus import CorpusError

                raise CorpusError(f"a corpus named '{name}' already exists")
            corpus = lib.open(name, create=True)
            try:  # recorded now: indexing loads it (indexer._load_embedder), whatever the default then
                corpus.manifest.set_meta("embedder_model", embedder or self.ctx.settings.embedder)
            finally:
                corpus.close()

        def made(_r: object) -> None:
            self.close_editor()
            self.refresh()

        self._select_after = name
        self._write(make, made, "Cannot create the corpus")
        return True

    def rename_corpus(self, old: str, new: str) -> bool:
        checked = self.editor.usable(new, current=old)
        if checked is None:
            return False
        new = checked
        if new == old:
            self.close_editor()
            return True
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

        self.indexer.stop_then(old, lambda: self._write(do, done, f"Cannot rename '{old}'"))
        return True

    def remove_corpus(self, name: str | None = None) -> bool:
        """Ask, then delete the corpus's index and derived images. The person's files stay."""
        name = name or self.selected_corpus()
        if name is None:
            self._hint("Select a corpus to remove.")
            return False
        s = self.tree.summaries.get(name)
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
            name, lambda: self._write(lambda: self.ctx.library.remove(name), done, f"Cannot remove '{name}'")
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
        run_call(
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
        if name not in self.tree.summaries:
            self._select_after = name
        self.indexer.enqueue(name, [os.path.abspath(os.fspath(p)) for p in paths], create=True)
        self.reader.schedule()

    def rescan(self, name: str | None = None) -> None:
        """Pick up new, changed and deleted files (failed ones are tried again) and index them."""
        name = name or self.selected_corpus()
        if name is None:
            self._hint("Select a corpus to re-scan.")
            return
        self.indexer.enqueue(name, retry_failed=True)

    def check(self, name: str | None = None) -> None:
        """Read the corpus whole for damage (off the GUI thread); the report offers Repair."""
        self.checker.check(name)

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
            self.progress.stopping()
        self.indexer.cancel()

    def resume_pending(self) -> None:
        """Queue every corpus with work left (called once at start-up)."""
        self.indexer.resume_pending()

    def is_busy(self) -> bool:
        return self.indexer.is_busy()

    def shutdown(self, timeout_s: float = 10.0) -> bool:
        """Stop indexing (what is done is kept; the next start resumes). True when it stopped."""
        self._closed = True
        self.reader.close()
        self.watch.close()
        return self.indexer.shutdown(timeout_s)

    # ------------------------------------------------------------ naming
    def _editor_accept(self, mode: str, old: str, text: str) -> None:
        if mode == "new":
            self.create_corpus(text, self.editor.embedder())
        else:
            self.rename_corpus(old, text)

    def _hint(self, text: str) -> None:
        self.hint.setText(text)

    def _show_drop_hint(self) -> None:
        name = self.selected_corpus()
        self._hint(f"Drop folders or files here to add them to '{name}'." if name else DROP_HINT)

    def _write(self, work: Callable[[], object], done: Callable[[Any], None], failure: str) -> None:
        """Create, rename, remove (or change a corpus's setting) off the GUI thread; a failure is
        said, titled ``failure``, in the messages and under the name field."""

        def failed(exc: BaseException) -> None:
            error_sink().report(failure, exc)
            if self.editor.editing is not None:
                self.editor.problem(describe(exc))
            self.refresh()

        run_call(work, on_done=self._guard(done), on_error=self._guard(failed))

    # ------------------------------------------------------------ adding
    def _apply_plan(self, target: str, plan: Any) -> None:
        for level, message in plan.messages:
            error_sink().report(f"Not added to {target}", message, level)
        if plan.accepted:
            self.add_and_index(target, plan.accepted)
        else:
            self._hint("Nothing was added: see the messages.")

    # ------------------------------------------------------------ refresh
    def _snapshot_failed(self, exc: BaseException) -> None:
        text = describe(exc)
        try:
            if self.tree.summaries:  # what was listed lives in a directory that cannot be used now
                self._apply(CorporaSnapshot([]))
            if text != self._data_dir_problem:
                error_sink().report("Data directory unusable", text)
            self._data_dir_problem = text
            self.banner.show_problem(text)
            self._show_empty(True, unusable=True)
        finally:
            self.reader.done()

    def _apply_snapshot(self, snap: CorporaSnapshot) -> None:
        try:
            self._apply(snap)
        finally:
            self.reader.done()
        self.viewRefreshed.emit()

    def _apply(self, snap: CorporaSnapshot) -> None:
        if self._data_dir_problem is not None:
            self._data_dir_problem = None
            self.banner.hide()
        before = set(self.tree.summaries)
        self.tree.apply(snap)
        self.watch.sync(self.tree.summaries)
        self._show_empty(not self.tree.summaries)
        if self._select_after in self.tree.corpus_items:
            self.tree.setCurrentItem(self.tree.corpus_items[self._select_after])
            self._select_after = None
        self._update_actions()
        self.preview.reload_if_changed(self.tree.preview_target(), self._corpora_dir())
        if set(self.tree.summaries) != before:
            self.corporaChanged.emit()

    def _show_empty(self, empty: bool, unusable: bool = False) -> None:
        """The empty state (or, with an unusable data directory, what to do) instead of a bare tree;
        the preview strip only where there is something to preview."""
        self.empty.show_state(unusable)
        self.stack.setCurrentWidget(self.empty if empty else self.tree)
        self.preview.setVisible(not empty)

    # ------------------------------------------------------------ selection and preview
    def _update_actions(self) -> None:
        self.toolbar.set_selected(self.selected_corpus() is not None)

    def _on_current(self, _item: QTreeWidgetItem | None, _prev: QTreeWidgetItem | None) -> None:
        self._update_actions()
        name = self.selected_corpus()
        if name is not None:
            self.currentCorpusChanged.emit(name)
            self._show_drop_hint()
        self.preview.load(self.tree.preview_target(), self._corpora_dir())

    def _on_expanded(self, item: QTreeWidgetItem) -> None:
        if self.tree.needs_files(item):
            self.reader.schedule(now=True)

    def _corpora_dir(self) -> Path | None:
        """Library's layout, without creating anything here; None while the data directory is unusable."""
        return None if self._data_dir_problem is not None else self.ctx.layout.corpora

    # ------------------------------------------------------------ indexing feedback
    def _on_job_started(self, name: str) -> None:
        self.progress.started(name)
        self.tree.refill_corpus(name)

    def _on_progress(self, name: str, p: Progress) -> None:
        self.progress.show_progress(name, p, len(self.indexer.queued()))
        self.tree.refill_corpus(name)

    def _on_busy(self, busy: bool, text: str) -> None:
        self.progress.set_busy(busy)
        if not busy:
            self._show_drop_hint()
        self.busyChanged.emit(busy, text)

    # ------------------------------------------------------------ context menu and pool callbacks
    def _context_menu(self, pos: QPoint) -> None:
        row_menu(self, self.tree.itemAt(pos)).popup(self.tree.viewport().mapToGlobal(pos))

    def _guard(self, fn: Callable[[Any], None]) -> Callable[[Any], None]:
        """Callbacks from the pool do nothing once the panel is gone (window closed)."""

        def call(value: Any) -> None:
            if alive(self) and not self._closed:
                fn(value)
            elif isinstance(value, BaseException):
                error_sink().report("Corpora", value)

        return call
