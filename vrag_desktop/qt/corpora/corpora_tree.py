"""The corpora tree: each corpus with the folders and files the person added, and their live state.

It is the view of a :class:`CorporaSnapshot` (read off the GUI thread by :func:`read_snapshot`), updated
in place so selection, expansion and scroll position survive a refresh; rows are painted by
:class:`~vrag_desktop.qt.corpora.corpora_rows.RowDelegate`.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QPoint, QSize, Qt
from PySide6.QtGui import QColor, QIcon
from PySide6.QtWidgets import QAbstractItemView, QTreeWidget, QTreeWidgetItem, QWidget

from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.corpus.status import (
    CorpusSummary,
    FileRow,
    missing_root_message,
    read_files,
    read_summaries,
)
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
from vrag_desktop.qt.infra.theme import color

if TYPE_CHECKING:
    from vrag_desktop.qt.context import AppContext
    from vrag_desktop.qt.corpora.indexer import Indexer

#: (corpus, source id or None for the whole corpus, label, items known) of the row to preview.
PreviewTarget = tuple[str, int | None, str, int]
KIND_LABELS = {kinds.PDF: "PDF", kinds.IMAGE: "image", kinds.VIDEO: "video", kinds.TEXT: "text"}


# ---------------------------------------------------------------- reading (worker pool)
@dataclass
class CorporaSnapshot:
    """Every corpus's summary, and the files of those that are expanded in the tree."""

    summaries: list[CorpusSummary]
    files: dict[str, list[FileRow]] = field(default_factory=dict)


def read_snapshot(ctx: AppContext, expanded: list[str]) -> CorporaSnapshot:
    """(Worker thread.) Read the corpora; a CorpusError names the path if the data dir is unusable."""
    corpora_dir = ctx.library.corpora_dir
    snap = CorporaSnapshot(read_summaries(corpora_dir))
    names = {s.name for s in snap.summaries}
    for name in expanded:
        if name in names:
            try:
                snap.files[name] = read_files(corpora_dir / name)
            except Exception:  # being renamed or removed right now: the next refresh catches up
                continue
    return snap


# ---------------------------------------------------------------- the tree
class CorporaTree(QTreeWidget):
    """Corpus rows with their folder and file rows; the indexer supplies the live state chips."""

    def __init__(self, indexer: Indexer, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.indexer = indexer
        self.summaries: dict[str, CorpusSummary] = {}
        self.corpus_items: dict[str, QTreeWidgetItem] = {}
        self.children_of: dict[str, dict[tuple[str, Any], QTreeWidgetItem]] = {}
        self.files: dict[str, list[FileRow]] = {}
        self.icons: dict[str, QIcon] = {}
        self.setHeaderHidden(True)
        self.setColumnCount(1)
        self.setUniformRowHeights(True)
        self.setItemDelegate(RowDelegate(self))
        self.setIconSize(QSize(18, 18))
        self.setIndentation(14)
        self.setAnimated(True)
        self.setExpandsOnDoubleClick(True)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)

    # ------------------------------------------------------------ reading the rows
    def selected_corpus(self) -> str | None:
        item = self.currentItem()
        return None if item is None else str(item.data(0, NAME_ROLE))

    def corpus_at(self, pos: QPoint) -> str | None:
        """The corpus of the row at ``pos`` (viewport coordinates), if any."""
        item = self.itemAt(pos)
        return None if item is None else str(item.data(0, NAME_ROLE))

    def file_item(self, name: str, path: str | os.PathLike[str]) -> QTreeWidgetItem | None:
        """The row of a source file (once its corpus was expanded and read)."""
        want = os.path.abspath(os.fspath(path))
        for row in self.files.get(name, []):
            if row.path == want:
                return self.children_of.get(name, {}).get(("file", row.source_id))
        return None

    def root_of_file(self, name: str, item: QTreeWidgetItem) -> str | None:
        """The path a file row was added by, when the person added that file alone (not in a folder)."""
        sid = item.data(0, KEY_ROLE)
        row = next((r for r in self.files.get(name, []) if r.source_id == sid), None)
        return row.root if row is not None and row.root == row.path else None

    def preview_target(self) -> PreviewTarget | None:
        """What the current row previews; None for folders and rows not read yet."""
        item = self.currentItem()
        if item is None:
            return None
        name = str(item.data(0, NAME_ROLE))
        kind = item.data(0, KIND_ROLE)
        if kind == "corpus":
            s = self.summaries.get(name)
            return (name, None, name, s.items) if s else None
        if kind == "file":
            sid = int(item.data(0, KEY_ROLE))
            rows = {r.source_id: r for r in self.files.get(name, [])}
            row = rows.get(sid)
            if row is None:
                return None
            if row.duplicate_of_id is not None and row.duplicate_of_id in rows:
                row = rows[row.duplicate_of_id]  # a duplicate is indexed once: show the original's
            return (name, row.source_id, item.text(0), row.items)
        return None

    def needs_files(self, item: QTreeWidgetItem) -> bool:
        """A corpus row was expanded whose files were never read."""
        return item.parent() is None and str(item.data(0, NAME_ROLE)) not in self.files

    def expanded_corpora(self) -> list[str]:
        return [n for n, it in self.corpus_items.items() if it.isExpanded()]

    # ------------------------------------------------------------ filling
    def restyle(self, ink: QColor) -> None:
        """Icons in the theme's ink; rows re-filled so folder icons follow."""
        self.icons = {
            k: line_icon(k, color("accent") if k == "corpus" else ink) for k in ("corpus", "folder", "file")
        }
        self.icons["missing"] = line_icon("folder", color("warn"))
        self.icons["broken"] = line_icon("corpus", color("error"))  # damaged or unreadable
        for name, item in self.corpus_items.items():
            item.setIcon(0, self.icons["corpus"])
            if name in self.summaries:
                self.fill_corpus(item, self.summaries[name])
            if name in self.files and name in self.summaries:
                self.fill_children(item, self.summaries[name], self.files[name], rebuild=True)
        self.viewport().update()

    def apply(self, snap: CorporaSnapshot) -> None:
        """Show ``snap``: corpora that left are taken out, new ones added, every row brought up to date."""
        self.summaries = {s.name: s for s in snap.summaries}
        for name in [n for n in self.corpus_items if n not in self.summaries]:
            gone = self.corpus_items.pop(name)
            self.children_of.pop(name, None)
            self.files.pop(name, None)
            self.takeTopLevelItem(self.indexOfTopLevelItem(gone))
        for i, s in enumerate(snap.summaries):
            item = self.corpus_items.get(s.name)
            if item is None:
                item = QTreeWidgetItem()
                item.setData(0, KIND_ROLE, "corpus")
                item.setData(0, NAME_ROLE, s.name)
                item.setIcon(0, self.icons["corpus"])
                self.insertTopLevelItem(i, item)
                self.corpus_items[s.name] = item
            self.fill_corpus(item, s)
            if s.name in snap.files:
                self.fill_children(item, s, snap.files[s.name])

    def refill_corpus(self, name: str) -> None:
        """Re-draw one corpus row (its live state changed: queued, indexing n%)."""
        item = self.corpus_items.get(name)
        if item is not None and name in self.summaries:
            self.fill_corpus(item, self.summaries[name])
            self.viewport().update()

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

    def fill_corpus(self, item: QTreeWidgetItem, s: CorpusSummary) -> None:
        live = self._live_state(s.name)
        chip, state = live if live else (s.badge(), s.state)
        sub = s.counts_text()
        p = self.indexer.last_progress if self.indexer.current() == s.name else None
        if p is not None and p.phase == "index" and not s.problem:
            # items reach the manifest at checkpoints; the live count is the worker's
            sub = f"{_count(s.files, 'file')} · indexing {p.done} of {p.total} items"
        details = s.details()
        if details:
            sub += " · " + details
        if s.problem:  # the whole sentence (a path, what to do) goes in the tooltip
            sub = "made by a newer VRAG Desktop" if s.newer else "its manifest cannot be read"
        item.setText(0, s.name)
        broken = s.state in ("damaged", "unreadable")
        sub_tone = "error" if broken else "warn" if s.missing_roots else ""
        _set_row(item, sub, chip, TONES.get(state, "muted"), sub_tone)
        item.setIcon(0, self.icons["broken" if broken else "corpus"])
        tip = [f"<b>{_esc(s.name)}</b>", _esc(s.counts_text() + (f" · {details}" if details else ""))]
        tip += [f"missing: {_esc(r)}" for r in s.missing_roots]
        if broken and not s.newer:
            tip.append("<b>Right-click › Check…</b> says what is damaged and repairs it.")
        if s.embedder:
            tip.append(f"embedder: {_esc(s.embedder)}")
        if not s.problem:
            tip.append(
                "watching its folders for changes" if s.watch else "not watching its folders for changes"
            )
        item.setToolTip(0, "<br>".join(tip))
        item.setChildIndicatorPolicy(
            QTreeWidgetItem.ChildIndicatorPolicy.ShowIndicator
            if s.files or s.roots
            else QTreeWidgetItem.ChildIndicatorPolicy.DontShowIndicatorWhenChildless
        )

    def fill_children(
        self, parent: QTreeWidgetItem, s: CorpusSummary, rows: list[FileRow], rebuild: bool = False
    ) -> None:
        """Folder rows (the folders the person added) with their files; files added alone directly.
        Rows are rebuilt only when the set of files changed, and only changed rows are re-filled
        (a large expanded corpus refreshes cheaply while it is being indexed)."""
        name = s.name
        prev = {r.source_id: r for r in self.files.get(name, [])}
        self.files[name] = rows
        by_root: dict[str, list[FileRow]] = {}
        for r in rows:
            by_root.setdefault(r.root or "", []).append(r)
        file_roots = {r.path for r in rows if r.root == r.path}
        folders = [root for root in s.roots if root not in file_roots]
        keys: list[tuple[str, Any]] = [("root", f) for f in folders]
        keys += [("file", r.source_id) for r in rows]
        current = self.children_of.get(name, {})
        rebuild = rebuild or list(current) != keys
        if rebuild:
            current = self._rebuild_children(parent, name, folders, rows, current)
        for r in rows:
            if rebuild or prev.get(r.source_id) != r:
                self.fill_file(current[("file", r.source_id)], r)
        for f in folders:  # few, and a folder can go missing or come back with no file changing
            self.fill_root(current[("root", f)], f, f in s.missing_roots, by_root.get(f, []))

    def _rebuild_children(
        self,
        parent: QTreeWidgetItem,
        name: str,
        folders: list[str],
        rows: list[FileRow],
        old: dict[tuple[str, Any], QTreeWidgetItem],
    ) -> dict[tuple[str, Any], QTreeWidgetItem]:
        """New child rows, keeping the current row and the folders the person folded."""
        keep = self.currentItem()
        keep_key = (keep.data(0, KIND_ROLE), keep.data(0, KEY_ROLE)) if keep is not None else None
        collapsed = {k for k, it in old.items() if k[0] == "root" and not it.isExpanded()}
        parent.takeChildren()
        current: dict[tuple[str, Any], QTreeWidgetItem] = {}
        for f in folders:
            current[("root", f)] = _child(parent, "root", name, f)
        for r in rows:
            holder = current.get(("root", r.root)) if r.root in folders else parent
            current[("file", r.source_id)] = _child(holder or parent, "file", name, r.source_id)
        self.children_of[name] = current
        for k, it in current.items():
            if k[0] == "root" and k not in collapsed:
                it.setExpanded(True)  # a folder shows its files unless the person folded it
        found = current.get(keep_key) if keep_key is not None else None  # type: ignore[arg-type]
        if found is not None:
            self.setCurrentItem(found)
        return current

    def fill_root(self, item: QTreeWidgetItem, root: str, missing: bool, rows: list[FileRow]) -> None:
        from vrag_desktop.core.corpus.scan import display_path

        item.setText(0, display_path(os.path.basename(root.rstrip(os.sep)) or root))
        item.setIcon(0, self.icons["missing" if missing else "folder"])
        pending = sum(r.status == "pending" for r in rows)
        failed = sum(r.status == "failed" for r in rows)
        files = len(rows)
        sub = f"{_count(files, 'file')} · {_count(sum(r.items for r in rows), 'item')}"
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
        _set_row(item, sub, chip, TONES[state], "warn" if missing else "")
        item.setToolTip(0, tip)

    def fill_file(self, item: QTreeWidgetItem, r: FileRow) -> None:
        from vrag_desktop.core.corpus.scan import display_path

        item.setText(0, r.display)
        item.setIcon(0, self.icons["file"])
        kind_label = KIND_LABELS.get(r.kind or "", os.path.splitext(r.path)[1].lstrip(".").upper() or "file")
        contents = r.contents()
        sub = r.short_reason or (
            f"{kind_label} · {contents}" if contents and contents != kind_label else kind_label
        )
        _set_row(
            item, sub, r.state_text, TONES.get(r.status, "muted"), "error" if r.status == "failed" else ""
        )
        tip = _esc(display_path(r.path))
        if r.reason:
            tip += "<br>" + _esc(r.reason)
        item.setToolTip(0, tip)


def _child(parent: QTreeWidgetItem, kind: str, name: str, key: Any) -> QTreeWidgetItem:
    item = QTreeWidgetItem(parent)
    item.setData(0, KIND_ROLE, kind)
    item.setData(0, NAME_ROLE, name)
    item.setData(0, KEY_ROLE, key)
    return item


def _set_row(item: QTreeWidgetItem, sub: str, chip: str, tone: str, sub_tone: str) -> None:
    """The second line, the state chip and their colours; unchanged values are not set again."""
    for role, value in ((SUB_ROLE, sub), (STATE_ROLE, chip), (TONE_ROLE, tone), (SUB_TONE_ROLE, sub_tone)):
        if item.data(0, role) != value:
            item.setData(0, role, value)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _esc(text: str) -> str:
    return html.escape(text)
