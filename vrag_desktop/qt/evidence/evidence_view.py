"""Evidence view: the pages a run looked at, every crop drawn where it was cut, each crop at full resolution.

Left, the run's pages; centre, a :class:`PageView` (:mod:`page_view`) drawing regions in the raw image's
pixels; right, the crops of that page cut from the raw image (:mod:`crop_pane`, :mod:`crop_cards`; the
pixels on disk, not the small copy the model saw). Images are decoded off the GUI thread
(:mod:`page_images`); ``pageLoaded(key)`` says when a page is on screen.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QImage, QResizeEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidgetItem,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.agents.events import AgentEvent, Crop, Evidence, ImageShown
from vrag_desktop.core.run.evidence import EvidenceBoard, EvidencePage, Region
from vrag_desktop.qt.evidence.crop_cards import CropCard
from vrag_desktop.qt.evidence.crop_pane import CropPane
from vrag_desktop.qt.evidence.page_images import PageRead, cut_crops, read_page
from vrag_desktop.qt.evidence.page_strip import PageStrip
from vrag_desktop.qt.evidence.page_view import CITED_COLOUR, PageView
from vrag_desktop.qt.evidence.source_viewer import open_source
from vrag_desktop.qt.infra.alive import alive
from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call, run_decode
from vrag_desktop.qt.infra.widgets import icon_only

if TYPE_CHECKING:
    from vrag_desktop.qt.context import AppContext

# The empty state: a title short enough for the bar at any dock width; the explanation, which needs
# room to wrap, where the page will be.
EMPTY_TITLE = "No evidence yet"
EMPTY_MESSAGE = "Pages and crops appear here as the agent looks at them."
SPLIT = (210, 640, 350)  # page strip, page, crops: the page gets the most room
#: The page's least width before the page strip folds away (issue 31: 266 px on a 1280×800 screen).
PAGE_MIN = 400


def split_sizes(total: int, strip_min: int, crops_min: int) -> list[int]:
    """The widths of the page strip, the page and the crops in ``total`` px: SPLIT's shares where
    they leave the page PAGE_MIN; else the strip and the crops at their least and the page the
    rest; else the strip folded away (0; its handle brings it back) so the page can be read."""
    sizes = [round(total * part / sum(SPLIT)) for part in SPLIT]
    if sizes[1] >= PAGE_MIN:
        return sizes
    if total - strip_min - crops_min >= PAGE_MIN:
        return [strip_min, total - strip_min - crops_min, crops_min]
    return [0, max(0, total - crops_min), crops_min]


# ---------------------------------------------------------------------- the view
class EvidenceView(QWidget):
    """Pages of a run (left), the current page with its regions (centre), its crops (right)."""

    pageChanged = Signal(str)  # key (raw image path) of the page now shown
    pageLoaded = Signal(str)  # that page's pixels (or its placeholder) are on screen
    # Pick mode (labelling): a click asks to toggle (page key, region number, or None for the page).
    pickToggled = Signal(str, object)
    page_view: PageView  # built in _build, after the buttons that act on it

    def __init__(self, ctx: AppContext | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.board = EvidenceBoard()
        self.current: str | None = None
        self.loaded: str | None = None  # key whose pixels are in the page view
        self._page_image: QImage | None = None
        self._size: tuple[int, int] | None = None  # raw pixel size of the loaded page
        self._full_res = False
        self._reading = TaskSlot()  # the page being decoded: only the newest one's pixels arrive
        self._pending: int | None = None  # region to centre on once the page is loaded
        self._follow = True  # live: show each new page/crop until the person picks a page
        self.picking = False
        self.picked: set[tuple[str, int | None]] = set()
        self._build()

    def _build(self) -> None:
        root = QVBoxLayout(self)
        root.setContentsMargins(0, 0, 0, 0)
        root.setSpacing(4)
        bar = QHBoxLayout()
        bar.setContentsMargins(8, 6, 8, 0)
        self.title = QLabel(EMPTY_TITLE, self)
        self.title.setTextFormat(Qt.TextFormat.RichText)
        # A long title must not set the dock's minimum width: it is elided by the layout instead.
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        bar.addWidget(self.title, 1)
        self.fit_button = self._button(bar, "Fit", "Fit the whole page in view", lambda: self.page_view.fit())
        icon_only(self._button(bar, "−", "Zoom out", lambda: self.page_view.zoom_out()), "Zoom out")
        icon_only(self._button(bar, "+", "Zoom in", lambda: self.page_view.zoom_in()), "Zoom in")
        icon_only(
            self._button(
                bar, "1:1", "One image pixel per screen pixel", lambda: self.page_view.actual_size()
            ),
            "Actual size",
        )
        self.open_button = self._button(
            bar, "Open source", "Open the source document at this page", self.open_source
        )
        self.pick_button = self._button(
            bar, "Page is evidence", "Pick mode: mark this whole page as evidence", self._pick_page
        )
        self.pick_button.setCheckable(True)
        self.pick_button.hide()
        root.addLayout(bar)

        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.strip = PageStrip(self.splitter)
        self.strip.currentItemChanged.connect(self._strip_changed)
        self.page_view = PageView(self.splitter)
        self.page_view.clear_page(EMPTY_MESSAGE)
        self.page_view.setMinimumWidth(160)
        self.page_view.regionClicked.connect(self._region_clicked)
        self.page_view.regionClicked.connect(self._pick_region)
        self.crop_scroll = CropPane(self.splitter)
        self.crop_scroll.cardClicked.connect(self._card_clicked)
        # the pane's parts, under the names the view has always had
        self.cards: dict[int, CropCard] = self.crop_scroll.cards
        self.crop_panel, self.crop_note = self.crop_scroll.panel, self.crop_scroll.note
        self.splitter.addWidget(self.strip)
        self.splitter.addWidget(self.page_view)
        self.splitter.addWidget(self.crop_scroll)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes(list(SPLIT))
        self._split_moved = False  # until the person drags a handle, resizing keeps SPLIT's proportions
        self.splitter.splitterMoved.connect(self._on_split_moved)
        self.splitter.setChildrenCollapsible(False)
        self.splitter.setCollapsible(0, True)  # the strip folds away where the page needs the room
        root.addWidget(self.splitter, 1)
        self._update_buttons()

    def resizeEvent(self, event: QResizeEvent) -> None:
        """Share the width as :func:`split_sizes` says (sizes set before the view is laid out are not
        kept, and the page ended up the narrowest column) until the person drags a handle."""
        super().resizeEvent(event)
        total = self.splitter.width() - self.splitter.handleWidth() * 2
        if not self._split_moved:
            self.splitter.setSizes(
                split_sizes(total, self.strip.minimumWidth(), self.crop_scroll.minimumWidth())
            )

    def _on_split_moved(self, _pos: int, _index: int) -> None:
        self._split_moved = True

    def _update_note(self) -> None:
        """The line above the crops: why there are none, or why they are not the page's pixels."""
        page = self.current_page()
        text = ""
        if page is not None and self.loaded == self.current:
            if not page.regions:
                text = "No crops on this page: the agent looked at it whole."
            elif self._page_image is None:
                text = "The page image is gone, so its crops cannot be cut from it."
        if page is not None and self.picking:  # labelling: what is picked here, and how to change it
            pick = pick_summary(self.picked, page.key)
            text = f"{pick[0].upper()}{pick[1:]}. Click a region on the page to pick or unpick it." + (
                f"\n\n{text}" if text else ""
            )
        self.crop_scroll.set_note(text)

    def _button(self, bar: QHBoxLayout, text: str, tip: str, slot: Any) -> QPushButton:
        b = QPushButton(text, self)
        b.setToolTip(tip)
        b.clicked.connect(slot)
        if len(text) <= 3:
            b.setFixedWidth(max(36, b.fontMetrics().horizontalAdvance(text) + 20))
        bar.addWidget(b)
        return b

    # ------------------------------------------------------------------ feeding
    def apply(self, event: AgentEvent) -> None:
        """One live event: update the strip; follow new pages and crops unless a page was picked."""
        key = self.board.apply(event)
        if key is None:
            return
        self.strip.sync(self.board.pages)
        if self.current is None or (
            self._follow and isinstance(event, ImageShown | Crop) and key != self.current
        ):
            self.show_page(key, _user=False)
        elif key == self.current:
            self._refresh_current()
        if isinstance(event, Crop) and key == self.current and self._follow:
            number = self.board.pages[key].regions[-1].number
            if self.loaded == key:
                self.page_view.select(number)
                self._highlight_card(number)

    def load(self, events: Iterable[AgentEvent]) -> None:
        """A whole (saved) run: show its first cited page, else its first page."""
        self.clear()
        self.board = EvidenceBoard.from_events(events)
        self._follow = False
        self.strip.sync(self.board.pages)
        cited = self.board.answer_evidence()
        first = cited[0][0] if cited else next(iter(self.board.pages), None)
        if first is not None:
            self.show_page(first, _user=False)

    def load_run(self, run_id: str) -> None:
        """A saved run by id, read off the GUI thread (needs a context)."""
        if self.ctx is None:
            raise RuntimeError("EvidenceView.load_run needs an AppContext")
        runs = self.ctx.runs

        def loaded(events: list[AgentEvent]) -> None:
            if alive(self):  # the view may have closed while the run was read
                self.load(events)

        run_call(lambda: list(runs.events(run_id)), on_done=loaded, error_title="Cannot open the run")

    def clear(self) -> None:
        self.board = EvidenceBoard()
        self.current = self.loaded = None
        self._page_image = None
        self._pending = None
        self._follow = True
        self._reading.drop()
        self.strip.remove_all()
        self.page_view.clear_page(EMPTY_MESSAGE)
        self._set_cards([])
        self._update_note()
        self.title.setText(EMPTY_TITLE)
        self._update_buttons()

    # ------------------------------------------------------------------ navigation
    def current_page(self) -> EvidencePage | None:
        return self.board.pages.get(self.current) if self.current else None

    def show_page(self, key: str, *, _user: bool = True) -> bool:
        """Show page ``key`` (decoded off the GUI thread; ``pageLoaded`` follows)."""
        page = self.board.pages.get(key)
        if page is None:
            return False
        if _user:
            self._follow = False
        if key == self.current:
            if self.loaded == key:
                self._apply_pending()
            return True
        self.current = key
        self.loaded = None
        self._page_image = None
        self.strip.select_key(key)
        self.page_view.clear_page(f"Loading {page.label}…")
        self._set_cards(page.regions)
        self._update_title()
        self._update_buttons()
        boxes = [(r.number, r.region, r.crop_image) for r in page.regions]
        self._reading.start(
            run_decode,
            read_page,
            key,
            boxes,
            urgent=True,
            on_done=self._page_read,
            error_title="Cannot show the page",
        )
        self.pageChanged.emit(key)
        return True

    def focus(
        self, source: str, page: int | None, region: Iterable[int] | None = None, image: str | None = None
    ) -> bool:
        """Show the evidence an answer names: its page, centred on (and flashing) its region."""
        key = image if image and image in self.board.pages else self.board.find(source, page)
        if key is None and source in self.board.pages:
            key = source
        if key is None:
            where = Path(source).name + (f" p. {page}" if page is not None else "")
            error_sink().report(
                "Evidence not in this run", f"{where} is not among the pages of this run", "warning"
            )
            return False
        self.show_region(key, self.board.region_number(key, region))
        return True

    def focus_evidence(self, evidence: Evidence) -> bool:
        """:meth:`focus` on one of an answer's :class:`Evidence` (what its links carry)."""
        return self.focus(evidence.source, evidence.page, evidence.region, image=evidence.image)

    def show_region(self, key: str, number: int | None) -> bool:
        """Show page ``key``; centre on region ``number`` (None: the whole page)."""
        self._pending = number if number is not None else -1
        if not self.show_page(key):
            self._pending = None
            return False
        return True

    def _apply_pending(self) -> None:
        number, self._pending = self._pending, None
        if number is None:
            return
        if number < 0:
            self.page_view.select(None)
            self.page_view.fit()
            self._highlight_card(None)
        else:
            self._show_number(number)

    def _show_number(self, number: int) -> None:
        self.page_view.centre_on(number)
        self._region_clicked(number)

    def _region_clicked(self, number: int) -> None:
        self._highlight_card(number)
        self.crop_scroll.reveal(number)

    # ------------------------------------------------------------------ loading
    def _page_read(self, result: PageRead) -> None:
        if not alive(self) or result.key != self.current:
            return  # the person moved on
        page = self.board.pages.get(result.key)
        if page is None:
            return
        if result.error or result.image is None or result.size is None:
            self.page_view.clear_page(result.error or f"cannot show {result.key}")
            self._page_image = None
            for r in page.regions:
                card = self.cards.get(r.number)
                if card is not None:
                    card.set_crop(
                        result.crops.get(r.number), r.number in result.stand_in, "crop image gone too"
                    )
        else:
            self.page_view.set_page(result.size, result.image)
            self.page_view.set_regions(page.regions)
            self._page_image = result.image
            self._full_res = result.image.width() == result.size[0]
            self._crops_read(result.key, result.crops)
            # crops that arrived while the page was loading
            self._fill_crops([r for r in page.regions if r.number not in result.crops])
            if self._follow and page.regions and self._pending is None:
                self.page_view.select(page.regions[-1].number)
                self._highlight_card(page.regions[-1].number)
        self.loaded = result.key
        self._size = result.size
        self._update_note()
        self._update_title(result.size)
        self._apply_pending()
        self.pageLoaded.emit(result.key)

    def _refresh_current(self) -> None:
        """The current page changed (a new crop, cited marks): add what is new, restyle the rest."""
        page = self.current_page()
        if page is None:
            return
        new = [r for r in page.regions if r.number not in self.cards]
        self._set_cards(page.regions)
        self._update_title()
        if self.loaded != self.current:
            return  # the pending load draws everything
        self.page_view.set_regions(page.regions)
        self._update_note()
        self._fill_crops(new)

    def _fill_crops(self, regions: list[Region]) -> None:
        """Cut crops for ``regions`` of the loaded page: a memory copy when it is decoded at full size."""
        if not regions or self.current is None:
            return
        if self._page_image is None:
            for r in regions:
                if r.number in self.cards:
                    self.cards[r.number].set_crop(None, missing="page image gone")
            return
        key = self.current
        boxes = [(r.number, r.region) for r in regions]
        if self._full_res:  # part of the decoded page: cheap enough for the GUI thread
            self._crops_read(key, cut_crops(key, self._page_image, boxes))
        else:
            run_decode(
                cut_crops, key, None, boxes, urgent=True, on_done=lambda crops: self._crops_read(key, crops)
            )

    def _crops_read(self, key: str | None, crops: dict[int, QImage]) -> None:
        if not alive(self) or key != self.current:
            return
        for number, img in crops.items():
            card = self.cards.get(number)
            if card is not None:
                card.set_crop(img)

    # ------------------------------------------------------------------ strip, cards, title
    def _strip_changed(self, item: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        if item is not None:
            self.show_region(str(item.data(Qt.ItemDataRole.UserRole)), None)
            self._follow = False

    def _set_cards(self, regions: list[Region]) -> None:
        self.crop_scroll.set_cards(regions, self.page_view.selected)

    def _card_clicked(self, number: int) -> None:
        if self.loaded == self.current:
            self.page_view.centre_on(number)
            self._highlight_card(number)

    def _highlight_card(self, number: int | None) -> None:
        page = self.current_page()
        if page is not None:
            self.crop_scroll.highlight(page.regions, number)

    def _update_title(self, size: tuple[int, int] | None = None) -> None:
        page = self.current_page()
        if page is None:
            return
        size = size or (self._size if self.loaded == self.current else None)
        parts = [f"<b>{_html(page.label)}</b>"]
        if size:
            parts.append(f"{size[0]}×{size[1]} px")
        n = len(page.regions)
        parts.append(f"{n} crop{'s' if n != 1 else ''}" if n else "no crops")
        if page.cited:
            parts.append(f"<span style='color:{CITED_COLOUR.name()}'>★ cited in the answer</span>")
        if self.picking:
            parts.append(f"<b>{_html(pick_summary(self.picked, page.key))}</b>")
        self.title.setText(" · ".join(parts))

    def _update_buttons(self) -> None:
        page = self.current_page()
        self.open_button.setEnabled(page is not None)
        self.pick_button.setChecked(page is not None and (page.key, None) in self.picked)
        self.open_button.setToolTip(
            f"Open {Path(page.source or page.key).name}" + (f" at page {page.page}" if page.page else "")
            if page
            else "Open the source document at this page"
        )

    # ------------------------------------------------------------------ pick mode
    def set_picking(self, on: bool, picked: Iterable[tuple[str, int | None]] = ()) -> None:
        """Pick mode: clicking a region, or "Page is evidence", emits ``pickToggled``; the owner
        (the Add-to-dataset dialog) decides and calls :meth:`set_picked` with what is picked."""
        self.picking = on
        self.pick_button.setVisible(on)
        self.set_picked(picked if on else ())

    def set_picked(self, picked: Iterable[tuple[str, int | None]]) -> None:
        self.picked = set(picked)
        self.pick_button.setChecked(self.current is not None and (self.current, None) in self.picked)
        self._update_title()
        self._update_note()

    def _pick_page(self) -> None:
        if self.picking and self.current is not None:
            self.pickToggled.emit(self.current, None)
        self.pick_button.setChecked(self.current is not None and (self.current, None) in self.picked)

    def _pick_region(self, number: int) -> None:
        if self.picking and self.current is not None:
            self.pickToggled.emit(self.current, number)

    # ------------------------------------------------------------------ system viewer
    def open_source(self) -> bool:
        """Open the current page's source document (at the page when the viewer can) outside the app."""
        page = self.current_page()
        if page is None:
            return False
        return open_source(page.source or page.key, page.page)


def pick_summary(picked: set[tuple[str, int | None]], key: str) -> str:
    """What is picked on page ``key``, for the title: "✓ page, regions 2, 5" or "nothing picked"."""
    numbers = sorted(n for k, n in picked if k == key and n is not None)
    parts = ["page"] if (key, None) in picked else []
    if numbers:
        parts.append(f"region{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))}")
    return "✓ picked as evidence: " + ", ".join(parts) if parts else "nothing picked on this page"


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
