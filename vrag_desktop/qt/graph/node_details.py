"""What the agent did at one node of the reasoning graph: its query, summary and thinking, the items
the search returned with their scores, the images it kept in memory (priority, energy, pixel budget)
and the crops it took.

Thumbnails are decoded off the GUI thread at thumbnail size (``QImageReader.setScaledSize``); a
missing or unreadable image file shows as a cell that says so, never as an error dialog.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSize, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QImage, QPalette, QPixmap
from PySide6.QtWidgets import (
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.agents.events import HitRef
from vrag_desktop.core.run.reasoning_graph import NodeInfo
from vrag_desktop.core.run.training_roles import SampleTraining, role_kind
from vrag_desktop.qt.graph.details_table import DetailsTable
from vrag_desktop.qt.graph.graph_items import kind_color, role_color
from vrag_desktop.qt.graph.graph_scene import GraphScene
from vrag_desktop.qt.infra.alive import alive
from vrag_desktop.qt.infra.tasks import run_decode
from vrag_desktop.qt.infra.theme import KINDS
from vrag_desktop.qt.infra.theme import color as theme_color
from vrag_desktop.qt.infra.thumbnails import load_thumbnail

THUMB = QSize(88, 88)
MISSING = "image file missing"
UNREADABLE = "cannot read image"


def hit_source(h: HitRef) -> str:
    """File name with page, clip or time span."""
    name = Path(h.source).name or h.name
    if h.page is not None:
        return f"{name} · p.{h.page}"
    if h.t_start is not None and h.t_end is not None:
        return f"{name} · {h.t_start:.0f}–{h.t_end:.0f} s"
    if h.clip is not None:
        return f"{name} · clip {h.clip}"
    return name


class NodeDetails(QWidget):
    """One node of the reasoning graph, or a hint when none is chosen."""

    CACHE = 256  # thumbnails kept, by path

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._info: NodeInfo | None = None
        self._training: SampleTraining | None = None  # a training sample's node roles
        self._generation = 0
        self._thumbs: OrderedDict[str, QImage] = OrderedDict()
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self._scroll = QScrollArea(self)
        self._scroll.setWidgetResizable(True)
        self._scroll.setFrameShape(QFrame.Shape.NoFrame)
        outer.addWidget(self._scroll)
        self._body = QWidget()
        self._scroll.setWidget(self._body)
        self._lay = QVBoxLayout(self._body)
        self._lay.setContentsMargins(12, 10, 12, 12)
        self._lay.setSpacing(8)
        self.tables: dict[str, DetailsTable] = {}  # "hits" | "memory" | "crops" | "images": shown tables
        self.fields: dict[str, QLabel] = {}  # "query" | "summary" | ...: shown text fields
        self.clear()

    # ------------------------------------------------------------------ public
    def node(self) -> NodeInfo | None:
        return self._info

    def set_training(self, training: SampleTraining | None) -> None:
        """A training sample's roles: each node then says whether it was trained or masked, and why."""
        self._training = training
        self.refresh()

    def clear(self) -> None:
        """Nothing selected: a short hint."""
        self._info = None
        self._reset()
        hint = QLabel(
            "Click a node of the graph to see what the agent did there: its query, the items "
            "it retrieved with their scores, what it kept in memory and the regions it cropped."
        )
        hint.setWordWrap(True)
        hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        hint.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        hint.setObjectName("hint")
        self._lay.addStretch(1)
        self._lay.addWidget(hint)
        self._lay.addStretch(2)

    def show_node(self, info: NodeInfo) -> None:
        """Show ``info`` (call again when its details change; the scroll position is kept)."""
        keep = self._scroll.verticalScrollBar().value() if self._info is info else 0
        self._info = info
        self._reset()
        self._header(info)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        form.setHorizontalSpacing(12)
        form.setVerticalSpacing(6)
        rows: list[tuple[str, str, str]] = []
        if info.kind == "answer":
            rows.append(("answer", "Answer", info.answer or info.summary or info.label))
        if info.kind == "crop":
            if info.label or info.query:
                rows.append(("box", "Box asked", info.label or info.query))
        elif info.query:
            rows.append(("query", "Question" if info.kind == "root" else "Query", info.query))
        if info.summary and info.kind not in ("answer",):
            rows.append(("summary", "Thought" if info.kind == "think" else "Summary", info.summary))
        if info.thinking and info.thinking != info.summary and info.kind != "think":
            rows.append(("thinking", "Thinking", info.thinking))
        if not rows and info.label:
            rows.append(("label", "Label", info.label))
        for key, name, text in rows:
            label = self._text(text)
            self.fields[key] = label
            form.addRow(self._caption(name), label)
        role_text = self._training.describe(info.id) if self._training is not None else ""
        if role_text and self._training is not None:
            label = self._text(role_text)
            mask = role_color(role_kind(self._training.role(info.id)))
            if mask is not None:
                label.setStyleSheet(f"color: {mask.name()};")
            self.fields["training"] = label
            form.addRow(self._caption("Training"), label)
        if info.errors:
            err = self._text("\n".join(info.errors))
            err.setStyleSheet(f"color: {self._warn().name()};")
            self.fields["errors"] = err
            form.addRow(self._caption("Problems"), err)
        if info.removed:
            note = self._text("This node was taken out of the graph by the agent (its search failed).")
            self.fields["removed"] = note
            form.addRow(self._caption("Removed"), note)
        self._lay.addLayout(form)

        if info.searched or info.hits:
            self._hits(info)
        if info.images:
            self._images(info)
        if info.memory:
            self._memory(info)
        if info.crops:
            self._crops(info)
        if info.evidence:
            self._evidence(info)
        self._lay.addStretch(1)
        if keep:
            self._scroll.verticalScrollBar().setValue(keep)

    def refresh(self) -> None:
        if self._info is not None:
            self.show_node(self._info)

    # ------------------------------------------------------------------ sections
    def _header(self, info: NodeInfo) -> None:
        row = QHBoxLayout()
        row.setSpacing(8)
        chip = QLabel(info.caption.upper())
        color = kind_color(info.kind)
        chip.setStyleSheet(
            f"background: {color.name()}; color: {KINDS['on_kind']}; border-radius: 4px; padding: 2px 8px;"
            "font-weight: bold;"
        )
        chip.setObjectName("kind")
        row.addWidget(chip)
        if info.tag:
            tag = QLabel(info.tag)
            f = tag.font()
            f.setBold(True)
            tag.setFont(f)
            tag.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            row.addWidget(tag)
        row.addStretch(1)
        when = [f"step {info.step}"] if info.step else []
        when.append(f"{info.time:.1f} s")
        meta = QLabel(" · ".join(when))
        meta.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        row.addWidget(meta)
        self._lay.addLayout(row)

    def _hits(self, info: NodeInfo) -> None:
        shown = set(info.shown)
        title = f"Retrieved items ({len(info.hits)})" if info.hits else "Retrieved items — none"
        self._section(title)
        if not info.hits:
            return
        t = self._table("hits", ["Item", "Source", "Score", "Shown"], wrap=False)
        t.setRowCount(len(info.hits))
        for r, h in enumerate(info.hits):
            source = hit_source(h) + (
                f" (+{len(h.also_in)} cop{'y' if len(h.also_in) == 1 else 'ies'})" if h.also_in else ""
            )
            cells = [h.label or h.name, source, h.score_text, "✓" if r in shown else ""]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c == 1:
                    where = [h.source + (f" ('{h.corpus}')" if h.corpus else "")]
                    where += [f"{x.source} ('{x.corpus}')" for x in h.also_in]
                    item.setToolTip("\n".join(where) + (f"\n{h.image}" if h.image else ""))
                if c == 2:
                    item.setToolTip(h.score_note[:1].upper() + h.score_note[1:])
                if c in (2, 3):
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                        if c == 2
                        else Qt.AlignmentFlag.AlignCenter
                    )
                if r in shown:
                    f = QFont(item.font())
                    f.setBold(True)
                    item.setFont(f)
                t.setItem(r, c, item)
        t.finish(text=(0, 1))

    def _images(self, info: NodeInfo) -> None:
        title = f"Shown to the model ({len(info.images)})"
        t = self._thumb_table(title, "images", ["Image", "Source", "Size"], [im.image for im in info.images])
        for r, im in enumerate(info.images):
            t.setItem(r, 1, self._item(_where(im.source, im.page), tip=im.source))
            t.setItem(r, 2, self._item(f"{im.width}×{im.height}"))
        self._finish_thumbs(t, text=(1,))

    def _memory(self, info: NodeInfo) -> None:
        kept = sum(1 for m in info.memory if m.useful)
        headers = ["Image", "Item", "Useful", "Priority", "Energy", "Pixel budget"]
        title = f"Memory ({kept} of {len(info.memory)} useful)"
        t = self._thumb_table(title, "memory", headers, [m.image for m in info.memory])
        for r, m in enumerate(info.memory):
            name = m.information_id
            if m.timestamps:
                name += "\n@ " + ", ".join(f"{s:.1f} s" for s in m.timestamps)
            t.setItem(r, 1, self._item(name))
            t.setItem(r, 2, self._item("yes" if m.useful else "no", center=True))
            t.setItem(r, 3, self._item(str(m.priority), right=True))
            t.setItem(r, 4, self._item(f"{m.energy:.3f}", right=True))
            t.setItem(r, 5, self._item(f"{m.pixel_budget:,} px" if m.pixel_budget else "—", right=True))
        self._finish_thumbs(t, text=(1,))

    def _crops(self, info: NodeInfo) -> None:
        # one column for the region, its size and its page: side by side in a narrow pane, a third
        # column left the source a few elided letters wide
        headers = ["Image", "Region (page pixels)"]
        t = self._thumb_table(f"Crops ({len(info.crops)})", "crops", headers, [c.image for c in info.crops])
        for r, c in enumerate(info.crops):
            x1, y1, x2, y2 = c.region
            size = f"{x2 - x1}×{y2 - y1} px → {c.width}×{c.height}"
            text = f"[{x1}, {y1}, {x2}, {y2}]\n{size}\n{_where(c.source, c.page)}"
            t.setItem(r, 1, self._item(text, tip=c.raw or c.source))
        self._finish_thumbs(t, text=(1,))

    def _evidence(self, info: NodeInfo) -> None:
        self._section(f"Evidence ({len(info.evidence)})")
        lines = []
        for e in info.evidence:
            where = _where(e.source, e.page)
            if e.region:
                where += f" · region [{', '.join(str(v) for v in e.region)}]"
            lines.append(where)
        label = self._text("\n".join(lines))
        self.fields["evidence"] = label
        self._lay.addWidget(label)

    # ------------------------------------------------------------------ thumbnails
    def _thumb_table(
        self, title: str, key: str, headers: list[str], images: Sequence[str | None]
    ) -> DetailsTable:
        """A titled table with one row per image, the image's thumbnail in the first column."""
        self._section(title)
        t = self._table(key, headers)
        t.setRowCount(len(images))
        for r, image in enumerate(images):
            self._thumb_cell(t, r, 0, image)
        return t

    def _thumb_cell(self, t: QTableWidget, row: int, col: int, path: str | None) -> None:
        item = QTableWidgetItem()
        item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
        t.setItem(row, col, item)
        if not path:
            item.setText("—")
            return
        item.setToolTip(path)
        cached = self._thumbs.get(path)
        if cached is not None:
            self._thumbs.move_to_end(path)
            item.setData(Qt.ItemDataRole.DecorationRole, QPixmap.fromImage(cached))
            return
        if not Path(path).is_file():
            self._problem(item, MISSING)
            return
        item.setText("loading…")
        gen = self._generation

        def cell() -> QTableWidgetItem | None:
            # Look the cell up again: the captured item may have been freed with its table (a
            # QTableWidgetItem is no QObject, so touching a freed one would crash, not raise).
            if gen != self._generation or not alive(self) or not alive(t):
                return None
            return t.item(row, col)

        def done(img: QImage) -> None:
            self._remember(path, img)
            it = cell()
            if it is not None:
                it.setText("")
                it.setData(Qt.ItemDataRole.DecorationRole, QPixmap.fromImage(img))

        def failed(exc: BaseException) -> None:
            it = cell()
            if it is not None:
                self._problem(it, UNREADABLE, str(exc))

        run_decode(load_thumbnail, path, THUMB, urgent=True, on_done=done, on_error=failed)

    def _remember(self, path: str, img: QImage) -> None:
        self._thumbs[path] = img
        self._thumbs.move_to_end(path)
        while len(self._thumbs) > self.CACHE:
            self._thumbs.popitem(last=False)

    def _problem(self, item: QTableWidgetItem, text: str, detail: str = "") -> None:
        item.setText(text)
        item.setForeground(self._warn())
        if detail:
            item.setToolTip(detail)

    # ------------------------------------------------------------------ building blocks
    def _warn(self) -> QColor:
        """A red readable on this palette's base."""
        return theme_color("error")  # readable on the theme's base

    def _reset(self) -> None:
        self._generation += 1
        self.tables.clear()
        self.fields.clear()
        _clear_layout(self._lay)

    def _section(self, title: str) -> None:
        label = QLabel(title)
        f = label.font()
        f.setBold(True)
        label.setFont(f)
        label.setContentsMargins(0, 8, 0, 0)
        self._lay.addWidget(label)

    def _caption(self, text: str) -> QLabel:
        label = QLabel(text)
        label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        return label

    def _text(self, text: str) -> QLabel:
        label = QLabel(text)
        label.setWordWrap(True)
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        return label

    def _item(self, text: str, tip: str = "", right: bool = False, center: bool = False) -> QTableWidgetItem:
        item = QTableWidgetItem(text)
        if tip:
            item.setToolTip(tip)
        if right:
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        elif center:
            item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
        return item

    def _table(self, key: str, headers: list[str], *, wrap: bool = True) -> DetailsTable:
        t = DetailsTable(headers, wrap=wrap)
        t.setIconSize(THUMB)
        self.tables[key] = t
        self._lay.addWidget(t)
        return t

    def _finish_thumbs(self, t: DetailsTable, text: tuple[int, ...]) -> None:
        """A table whose first column holds thumbnails: rows as tall as one, ``text`` stretching."""
        t.row_height = THUMB.height() + 8
        t.finish(text=text, fixed={0: THUMB.width() + 12})

    def sizeHint(self) -> QSize:
        return QSize(420, 520)


def link_details(scene: GraphScene, details: NodeDetails) -> None:
    """Show the selected node of ``scene`` in ``details``, refreshed while a live run adds to it."""

    def selected(node_id: str) -> None:
        if node_id:
            details.show_node(scene.details(node_id))
        else:
            details.clear()

    timer = QTimer(details)  # a streaming run may change a node many times a second: redraw at most ~10/s
    timer.setSingleShot(True)
    timer.setInterval(100)

    def refresh() -> None:
        current = details.node()
        info = scene.graph.get(current.id) if current is not None else None
        if info is not None:
            details.show_node(info)

    def changed(node_id: str) -> None:
        current = details.node()
        if current is not None and current.id == node_id and not timer.isActive():
            timer.start()

    timer.timeout.connect(refresh)
    scene.trainingChanged.connect(lambda: details.set_training(scene.training()))
    scene.nodeSelected.connect(selected)
    scene.detailsChanged.connect(changed)


def _clear_layout(layout: Any) -> None:
    while layout.count():
        item = layout.takeAt(0)
        w = item.widget()
        if w is not None:
            w.hide()
            w.deleteLater()
        elif item.layout() is not None:
            _clear_layout(item.layout())
            item.layout().deleteLater()


def _where(source: str, page: int | None) -> str:
    """A source's file name, with its page when it has pages."""
    return Path(source).name + (f" · p.{page}" if page is not None else "")


__all__ = ["MISSING", "UNREADABLE", "NodeDetails", "hit_source", "link_details"]
