"""A layout that lays its items out left to right and wraps them onto the next line when the width
runs out (Qt ships none). Why: a row of options (the Ask panel's agent, model, corpora, top-k…)
set the whole window's minimum width when it was one line; wrapping keeps every field whole in a
narrow column and on one line where there is room. Items are laid out only on resize, never per
repaint."""

from __future__ import annotations

from PySide6.QtCore import QMargins, QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QLayoutItem, QSizePolicy, QWidget


class FlowLayout(QLayout):
    """Items in reading order, wrapped at the layout's width; each keeps its size hint (one marked
    with ``grow`` on a line of its own widens to the line's end). Height follows the width."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 6, line_spacing: int = 4) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._h = spacing
        self._v = line_spacing
        self.setContentsMargins(0, 0, 0, 0)

    # ------------------------------------------------------------------ QLayout
    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:  # type: ignore[override]
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:  # type: ignore[override]
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._place(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._place(rect, move=True)

    def sizeHint(self) -> QSize:
        """Everything on one line."""
        m = self.contentsMargins()
        shown = [i for i in self._items if not i.isEmpty()]
        w = sum(i.sizeHint().width() for i in shown) + self._h * max(0, len(shown) - 1)
        h = max((i.sizeHint().height() for i in shown), default=0)
        return QSize(w + m.left() + m.right(), h + m.top() + m.bottom())

    def minimumSize(self) -> QSize:
        """The widest item: anything narrower wraps."""
        m = self.contentsMargins()
        size = QSize()
        for item in self._items:
            if not item.isEmpty():
                size = size.expandedTo(item.minimumSize())
        return size + QSize(m.left() + m.right(), m.top() + m.bottom())

    # ------------------------------------------------------------------ placing
    def _place(self, rect: QRect, *, move: bool) -> int:
        """Lay the items out in ``rect`` (only measure unless ``move``); return the height used."""
        m: QMargins = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        lines: list[list[tuple[QLayoutItem, QSize]]] = [[]]
        x = 0
        for item in self._items:
            if item.isEmpty():
                continue
            hint = item.sizeHint().expandedTo(item.minimumSize())
            w = min(hint.width(), max(1, area.width()))
            if lines[-1] and x + self._h + w > area.width():
                lines.append([])
                x = 0
            x += (self._h if lines[-1] else 0) + w
            lines[-1].append((item, QSize(w, hint.height())))
        y = area.y()
        for line in lines:
            if not line:
                continue
            height = max(size.height() for _, size in line)
            if move:
                left = area.x()
                for n, (item, size) in enumerate(line):
                    w = size.width()
                    last = n == len(line) - 1
                    if last and _grows(item.widget()):
                        w = max(w, area.right() + 1 - left)
                    top = y + (height - size.height()) // 2
                    item.setGeometry(QRect(QPoint(left, top), QSize(w, size.height())))
                    left += w + self._h
            y += height + self._v
        used = y - self._v - area.y() if any(lines) else 0
        return used + m.top() + m.bottom()


def _grows(widget: QWidget | None) -> bool:
    """A widget that takes its line's spare width (an Expanding horizontal policy)."""
    if widget is None:
        return False
    return widget.sizePolicy().horizontalPolicy() in (
        QSizePolicy.Policy.Expanding,
        QSizePolicy.Policy.MinimumExpanding,
    )


__all__ = ["FlowLayout"]
