"""What an answer rests on: the pages a run looked at and the regions it zoomed into, in page pixels.

An :class:`EvidenceBoard` is built from a run's :mod:`events <vrag_desktop.core.agents.events>` one at a
time (live) or all at once (a saved run), so the evidence view and the answer's evidence links read one
model. Pages are keyed by the path of their raw (full-resolution) image: every ``Crop`` region is in that
image's pixels (a crop of a crop is already mapped back to the page by the agent), so a view can draw
regions where they are without knowing what size the model saw.

Page numbers in events are 1-based (``derive`` names pages ``{stem}_{ordinal}``, ordinal from 1),
which is also what every PDF viewer's command line expects.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from vrag_desktop.core.agents.events import AgentEvent, Answer, Crop, Evidence, ImageShown, SearchResults

Box = tuple[int, int, int, int]

#: Hit modalities whose image is a picture of the item (text hits have none worth showing).
_VISUAL = ("page", "image", "clip", "video")


@dataclass
class Region:
    """One crop the agent took: numbered 1.. in step order across the whole run."""

    number: int
    step: int
    region: Box  # x1, y1, x2, y2 in the page's raw pixels
    crop_image: str  # the resized crop the model saw (the view cuts the raw page for full resolution)
    cited: bool = False
    parent: int | None = None  # number of the region this one zoomed into (nested zoom), if any

    @property
    def width(self) -> int:
        return self.region[2] - self.region[0]

    @property
    def height(self) -> int:
        return self.region[3] - self.region[1]

    @property
    def text(self) -> str:
        x1, y1, x2, y2 = self.region
        return f"({x1}, {y1}) – ({x2}, {y2}) · {self.width}×{self.height} px"


@dataclass
class EvidencePage:
    """A page, image or clip frame the run showed to the model, with the regions cut from it."""

    key: str  # the raw image's path
    source: str = ""  # the document or file it comes from
    page: int | None = None  # 1-based page number; None for images and clips
    shown_image: str | None = None  # what the model saw (a small stand-in when the raw is gone)
    steps: list[int] = field(default_factory=list)  # steps at which it was shown
    regions: list[Region] = field(default_factory=list)
    cited: bool = False  # the answer's evidence names this page (whole, or a region of it)
    _size: tuple[int, int] | None = field(default=None, repr=False)
    _size_read: bool = field(default=False, repr=False)

    @property
    def raw(self) -> str:
        return self.key

    @property
    def label(self) -> str:
        """How a person names it: ``report.pdf p. 3`` or ``photo.jpg``."""
        name = Path(self.source or self.key).name
        return f"{name} p. {self.page}" if self.page is not None else name

    def size(self) -> tuple[int, int] | None:
        """Raw pixel size, read once from the image header (no decode); None if unreadable."""
        if not self._size_read:
            self._size_read = True
            try:
                from PIL import Image

                from vrag_desktop.core.images import upright_size

                with Image.open(self.key) as im:
                    self._size = upright_size(im)
            except Exception:  # gone, unreadable, not an image: the view says so
                self._size = None
        return self._size

    def region(self, number: int) -> Region | None:
        return next((r for r in self.regions if r.number == number), None)


class EvidenceBoard:
    """The pages and regions of one run, built incrementally from its events."""

    def __init__(self) -> None:
        self.pages: dict[str, EvidencePage] = {}  # in order of first appearance
        self.answer: Answer | None = None
        self._count = 0
        self._last: tuple[str, int | None] | None = None  # last image put before the model: (key, region)
        self._listed: dict[tuple[int, str, int | None], str] = {}  # (step, source, page) -> key via results

    @classmethod
    def from_events(cls, events: Iterable[AgentEvent]) -> EvidenceBoard:
        board = cls()
        for ev in events:
            board.apply(ev)
        return board

    # ------------------------------------------------------------------ building
    def apply(self, event: AgentEvent) -> str | None:
        """Take one event; return the key of the page it changed (the first, if several), else None."""
        if isinstance(event, ImageShown):
            return self._shown(event)
        if isinstance(event, Crop):
            return self._crop(event)
        if isinstance(event, SearchResults):
            return self._results(event)
        if isinstance(event, Answer):
            return self._answer(event)
        return None

    def _page(self, key: str, source: str, page: int | None) -> EvidencePage:
        p = self.pages.get(key)
        if p is None:
            p = self.pages[key] = EvidencePage(key=key, source=source, page=page)
        return p

    def _shown(self, ev: ImageShown) -> str | None:
        key = ev.raw or ev.image
        if not key:
            return None
        listed = self._listed.get((ev.step, ev.source, ev.page))
        if key not in self.pages and listed is not None and listed != key:
            self._rekey(listed, key)  # the searcher's path was fetched to a local copy: same page
        p = self._page(key, ev.source, ev.page)
        p.shown_image = p.shown_image or ev.image or None
        if ev.step not in p.steps:
            p.steps.append(ev.step)
        self._last = (key, None)
        return key

    def _results(self, ev: SearchResults) -> str | None:
        """VimRAG shows pictures only through its search results; VRAG follows with ``ImageShown``."""
        first = None
        for i in ev.shown:
            if not 0 <= i < len(ev.hits):
                continue
            hit = ev.hits[i]
            if not hit.image or hit.modality not in _VISUAL:
                continue
            p = self._page(hit.image, hit.source, hit.page if hit.modality == "page" else None)
            if ev.step not in p.steps:
                p.steps.append(ev.step)
            self._listed[(ev.step, hit.source, hit.page)] = hit.image
            first = first or hit.image
        return first

    def _rekey(self, old: str, new: str) -> None:
        page = self.pages.get(old)
        if page is None or page.regions:
            return
        page.key = new
        page._size_read = False
        self.pages = {(new if k == old else k): v for k, v in self.pages.items()}

    def _crop(self, ev: Crop) -> str | None:
        key = ev.raw
        if not key:
            return None
        p = self._page(key, ev.source, ev.page)
        parent = self._last[1] if self._last is not None and self._last[0] == key else None
        self._count += 1
        region = Region(
            number=self._count,
            step=ev.step,
            region=tuple(int(v) for v in ev.region),  # type: ignore[arg-type]
            crop_image=ev.image,
            parent=parent,
        )
        p.regions.append(region)
        self._last = (key, region.number)
        if self.answer is not None:
            self._mark()
        return key

    def _answer(self, ev: Answer) -> str | None:
        self.answer = ev
        for e in ev.evidence:  # evidence the run never showed as a page (e.g. video key frames)
            if e.image and self._key_for(e) is None:
                self._page(e.image, e.source, e.page)
        self._mark()
        keys = [k for k, _ in self.answer_evidence()]
        return keys[0] if keys else None

    def _mark(self) -> None:
        for p in self.pages.values():
            p.cited = False
            for r in p.regions:
                r.cited = False
        for e in self.answer.evidence if self.answer else ():
            key = self._key_for(e)
            if key is None:
                continue
            page = self.pages[key]
            page.cited = True
            if e.region is not None:
                box = tuple(int(v) for v in e.region)
                for r in page.regions:
                    if r.region == box:
                        r.cited = True

    # ------------------------------------------------------------------ reading
    def _key_for(self, e: Evidence) -> str | None:
        if e.image and e.image in self.pages:
            return e.image
        return self.find(e.source, e.page) if e.source else None

    def find(self, source: str, page: int | None) -> str | None:
        """The key of the page of ``source`` (a path) numbered ``page``; the first one shown."""
        for key, p in self.pages.items():
            if p.page == page and _same_path(p.source, source):
                return key
        return None

    def region_number(self, key: str, box: Iterable[int] | None) -> int | None:
        """The number of the region of page ``key`` at exactly ``box`` (the first such), if any."""
        page = self.pages.get(key)
        if page is None or box is None:
            return None
        b = tuple(int(v) for v in box)
        return next((r.number for r in page.regions if r.region == b), None)

    def answer_evidence(self) -> list[tuple[str, int | None]]:
        """The final answer's evidence as (page key, region number or None), in the answer's order."""
        out: list[tuple[str, int | None]] = []
        for e in self.answer.evidence if self.answer else ():
            key = self._key_for(e)
            if key is None:
                continue
            item = (key, self.region_number(key, e.region))
            if item not in out:
                out.append(item)
        return out

    def regions(self) -> list[tuple[str, Region]]:
        """Every region of the run with its page key, in number order."""
        out = [(k, r) for k, p in self.pages.items() for r in p.regions]
        return sorted(out, key=lambda kr: kr[1].number)

    def __len__(self) -> int:
        return len(self.pages)


def _same_path(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError, ValueError):
        return False


# ---------------------------------------------------------------------- system viewer
#: PDF viewers that can open at a page, in order of preference: name -> argv builder (1-based page).
_PDF_VIEWERS: tuple[tuple[str, Callable[[str, str, int], list[str]]], ...] = (
    ("evince", lambda exe, f, n: [exe, "-i", str(n), f]),  # -i: page index (-p is the page *label*)
    ("okular", lambda exe, f, n: [exe, "-p", str(n), f]),
    ("zathura", lambda exe, f, n: [exe, "-P", str(n), f]),
    ("qpdfview", lambda exe, f, n: [exe, f"{f}#{n}"]),
    ("mupdf", lambda exe, f, n: [exe, f, str(n)]),
)


def viewer_command(
    source: str,
    page: int | None,
    platform: str = sys.platform,
    which: Callable[[str], str | None] = shutil.which,
) -> list[str] | None:
    """argv that opens ``source`` (at 1-based ``page`` when a viewer can) in a system viewer.

    None on Windows (the caller uses ``os.startfile``, which knows the file associations) and when no
    suitable program is installed. macOS ``open`` cannot pass a page, so it opens the file."""
    if platform.startswith(("win", "cygwin")):
        return None
    if platform == "darwin":
        exe = which("open")
        return [exe or "/usr/bin/open", source]
    if page is not None and page >= 1 and source.lower().endswith(".pdf"):
        for name, argv in _PDF_VIEWERS:
            exe = which(name)
            if exe:
                return argv(exe, source, page)
    exe = which("xdg-open")
    return [exe, source] if exe else None


__all__ = ["EvidenceBoard", "EvidencePage", "Region", "viewer_command"]
