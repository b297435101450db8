"""EvidenceBoard (pages and crop regions of a run, in raw pixels) and viewer_command, without Qt."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from vrag_desktop.core.agents.events import (
    Answer,
    BBox,
    Crop,
    Evidence,
    HitRef,
    ImageShown,
    SearchResults,
    SearchStarted,
    ThinkDelta,
)
from vrag_desktop.core.run.evidence import EvidenceBoard, viewer_command
from vrag_desktop.core.run.store import RunStore


def _page(tmp_path: Path, name: str, size: tuple[int, int]) -> str:
    path = tmp_path / name
    Image.new("RGB", size, "white").save(path)
    return str(path)


def _run(tmp_path: Path) -> tuple[list, dict[str, str]]:
    """A VRAG-like run: page A (crop 1, crop 2 nested in 1), page B (crop 3), back to A (crop 4)."""
    a = _page(tmp_path, "report_2.jpg", (1200, 1600))
    b = _page(tmp_path, "report_5.jpg", (1000, 1400))
    src = str(tmp_path / "report.pdf")

    def shown(step: int, raw: str, page: int) -> list:
        hit = HitRef(score=0.9, name=Path(raw).stem, source=src, modality="page", image=raw, page=page)
        return [
            SearchStarted(step=step, content="q"),
            SearchResults(step=step, content="q", hits=(hit,), shown=(0,)),
            ImageShown(
                step=step, image=f"{raw}.seen.jpg", raw=raw, width=600, height=800, source=src, page=page
            ),
        ]

    def crop(step: int, raw: str, page: int, region: tuple[int, int, int, int]) -> list:
        return [
            ThinkDelta(step=step, content="look closer"),
            BBox(step=step, content="[1, 2, 3, 4]", box=(1, 2, 3, 4)),
            Crop(
                step=step,
                region=region,
                raw=raw,
                image=f"{raw}.crop{step}.jpg",
                width=300,
                height=200,
                source=src,
                page=page,
            ),
        ]

    events = [
        *shown(1, a, 2),
        *crop(2, a, 2, (100, 200, 900, 800)),
        *crop(3, a, 2, (300, 400, 700, 600)),  # nested: inside crop 1
        *shown(4, b, 5),
        *crop(5, b, 5, (0, 0, 500, 700)),
        *shown(6, a, 2),  # page A shown again by a later search (the agent never repeats, but a replay may)
        *crop(7, a, 2, (50, 60, 150, 160)),
        Answer(
            step=8,
            content="42",
            evidence=(
                Evidence(source=src, image=b, page=5, region=(0, 0, 500, 700)),
                Evidence(source=src, image=a, page=2),
                Evidence(source=src, image=a, page=2, region=(300, 400, 700, 600)),
            ),
        ),
    ]
    return events, {"a": a, "b": b, "src": src}


def test_numbering_in_step_order_across_pages(tmp_path: Path) -> None:
    events, p = _run(tmp_path)
    board = EvidenceBoard.from_events(events)
    assert list(board.pages) == [p["a"], p["b"]]
    a, b = board.pages[p["a"]], board.pages[p["b"]]
    assert [r.number for r in a.regions] == [1, 2, 4] and [r.number for r in b.regions] == [3]
    assert [r.step for r in a.regions] == [2, 3, 7]
    assert [(k, r.number) for k, r in board.regions()] == [(p["a"], 1), (p["a"], 2), (p["b"], 3), (p["a"], 4)]
    assert a.steps == [1, 6] and b.steps == [4]
    assert (a.page, b.page, a.source) == (2, 5, p["src"])
    assert a.label == "report.pdf p. 2"
    assert a.shown_image == p["a"] + ".seen.jpg"
    assert a.regions[1].crop_image == p["a"] + ".crop3.jpg"


def test_nested_regions_keep_raw_pixels_and_parent(tmp_path: Path) -> None:
    events, p = _run(tmp_path)
    board = EvidenceBoard.from_events(events)
    a = board.pages[p["a"]]
    r1, r2, r4 = a.regions
    assert r1.region == (100, 200, 900, 800) and r2.region == (300, 400, 700, 600)
    assert (r2.width, r2.height) == (400, 200)
    assert r1.parent is None and r2.parent == 1  # a zoom into crop 1
    assert r4.parent is None  # page A was shown afresh before crop 4
    assert board.pages[p["b"]].regions[0].parent is None
    assert a.size() == (1200, 1600) and board.pages[p["b"]].size() == (1000, 1400)


def test_cited_marking_and_answer_evidence(tmp_path: Path) -> None:
    events, p = _run(tmp_path)
    board = EvidenceBoard()
    changed = [board.apply(e) for e in events]
    # every image/crop event reports its page; the rest change nothing
    assert changed[2] == p["a"] and changed[5] == p["a"] and changed[0] is None and changed[3] is None
    assert changed[-1] == p["b"]  # the answer's first evidence
    a, b = board.pages[p["a"]], board.pages[p["b"]]
    assert [r.cited for r in a.regions] == [False, True, False]
    assert [r.cited for r in b.regions] == [True]
    assert a.cited and b.cited
    assert board.answer_evidence() == [(p["b"], 3), (p["a"], None), (p["a"], 2)]


def test_no_answer_nothing_cited(tmp_path: Path) -> None:
    events, _ = _run(tmp_path)
    board = EvidenceBoard.from_events(events[:-1])
    assert board.answer_evidence() == []
    assert not any(pg.cited or any(r.cited for r in pg.regions) for pg in board.pages.values())


def test_evidence_by_source_and_page_and_unseen_images(tmp_path: Path) -> None:
    """Evidence without an image path finds its page by source+page; evidence images the run never
    listed (a clip's key frame) become pages so a click on them still opens something."""
    events, p = _run(tmp_path)
    frame = _page(tmp_path, "clip_1_f2.jpg", (64, 36))
    answer = Answer(
        step=9,
        content="x",
        evidence=(
            Evidence(source=p["src"], page=5),
            Evidence(source=str(tmp_path / "movie.mp4"), image=frame),
            Evidence(source=str(tmp_path / "notes.txt")),  # text: nothing to show
        ),
    )
    board = EvidenceBoard.from_events([*events[:-1], answer])
    assert board.answer_evidence() == [(p["b"], None), (frame, None)]
    assert board.pages[frame].page is None and board.pages[frame].label == "movie.mp4"
    assert board.pages[p["b"]].cited and not board.pages[p["a"]].cited
    assert board.find(p["src"], 2) == p["a"] and board.find(p["src"], 3) is None


def test_vimrag_pictures_come_from_search_results(tmp_path: Path) -> None:
    a = _page(tmp_path, "deck_3.jpg", (800, 600))
    photo = _page(tmp_path, "photo.jpg", (640, 480))
    hits = (
        HitRef(score=0.8, name="deck_3", source=str(tmp_path / "deck.pdf"), modality="page", image=a, page=3),
        HitRef(score=0.7, name="notes", source=str(tmp_path / "n.txt"), modality="text"),
        HitRef(score=0.6, name="photo", source=photo, modality="image", image=photo),
        HitRef(
            score=0.5, name="unshown", source=str(tmp_path / "x.pdf"), modality="page", image="/x", page=1
        ),
    )
    board = EvidenceBoard()
    assert board.apply(SearchResults(step=1, content="q", hits=hits, shown=(0, 1, 2))) == a
    assert list(board.pages) == [a, photo]
    assert board.pages[a].page == 3 and board.pages[photo].page is None
    board.apply(Answer(step=2, content="y", evidence=(Evidence(source=photo, image=photo),)))
    assert board.answer_evidence() == [(photo, None)] and board.pages[photo].cited


def test_remote_page_fetched_to_a_local_copy_is_one_page(tmp_path: Path) -> None:
    """With an HTTP searcher VRAG crops a local copy: the results' path and ImageShown.raw differ."""
    local = _page(tmp_path, "abcd-01-raw.jpg", (500, 700))
    src = "/server/docs/a.pdf"
    hit = HitRef(score=1.0, name="a_1", source=src, modality="page", image="/server/img/a_1.jpg", page=1)
    board = EvidenceBoard.from_events(
        [
            SearchResults(step=1, content="q", hits=(hit,), shown=(0,)),
            ImageShown(step=1, image="seen.jpg", raw=local, width=100, height=140, source=src, page=1),
            Crop(step=2, region=(1, 2, 3, 4), raw=local, image="c.jpg", source=src, page=1),
        ]
    )
    assert list(board.pages) == [local]
    assert board.pages[local].steps == [1] and board.pages[local].size() == (500, 700)


def test_missing_image_has_no_size(tmp_path: Path) -> None:
    board = EvidenceBoard.from_events(
        [
            ImageShown(
                step=1, image="", raw=str(tmp_path / "gone.jpg"), width=10, height=10, source="s", page=1
            )
        ]
    )
    assert board.pages[str(tmp_path / "gone.jpg")].size() is None


def test_saved_run_round_trip(tmp_path: Path) -> None:
    events, _ = _run(tmp_path)
    store = RunStore(tmp_path / "runs")
    with store.recorder("vrag", "q") as rec:
        for e in events:
            rec.record(e)
    replayed = EvidenceBoard.from_events(store.events(rec.id))
    live = EvidenceBoard.from_events(events)
    assert replayed.answer_evidence() == live.answer_evidence()
    assert [(k, r.region, r.cited) for k, r in replayed.regions()] == [
        (k, r.region, r.cited) for k, r in live.regions()
    ]


# ---------------------------------------------------------------------- viewer_command
def _which(*installed: str):  # type: ignore[no-untyped-def]
    return lambda name: f"/usr/bin/{name}" if name in installed else None


@pytest.mark.parametrize(
    ("viewer", "expected"),
    [
        ("evince", ["/usr/bin/evince", "-i", "7", "/d/a.pdf"]),
        ("okular", ["/usr/bin/okular", "-p", "7", "/d/a.pdf"]),
        ("zathura", ["/usr/bin/zathura", "-P", "7", "/d/a.pdf"]),
        ("qpdfview", ["/usr/bin/qpdfview", "/d/a.pdf#7"]),
        ("mupdf", ["/usr/bin/mupdf", "/d/a.pdf", "7"]),
    ],
)
def test_viewer_command_pdf_viewers(viewer: str, expected: list[str]) -> None:
    assert viewer_command("/d/a.pdf", 7, platform="linux", which=_which(viewer, "xdg-open")) == expected


def test_viewer_command_preference_and_fallbacks() -> None:
    both = _which("mupdf", "okular", "xdg-open")
    assert viewer_command("/d/a.pdf", 2, "linux", both) == ["/usr/bin/okular", "-p", "2", "/d/a.pdf"]
    assert viewer_command("/d/A.PDF", 2, "linux", _which("zathura")) == [
        "/usr/bin/zathura",
        "-P",
        "2",
        "/d/A.PDF",
    ]
    # no page, or not a PDF, or no page-capable viewer: the desktop's default opener
    assert viewer_command("/d/a.pdf", None, "linux", both) == ["/usr/bin/xdg-open", "/d/a.pdf"]
    assert viewer_command("/d/p.jpg", 3, "linux", both) == ["/usr/bin/xdg-open", "/d/p.jpg"]
    assert viewer_command("/d/a.pdf", 2, "linux", _which("xdg-open")) == ["/usr/bin/xdg-open", "/d/a.pdf"]
    assert viewer_command("/d/a.pdf", 0, "linux", both) == ["/usr/bin/xdg-open", "/d/a.pdf"]
    assert viewer_command("/d/a.pdf", 2, "freebsd14", _which("evince")) == [
        "/usr/bin/evince",
        "-i",
        "2",
        "/d/a.pdf",
    ]
    assert viewer_command("/d/a.pdf", 2, "linux", _which()) is None
    assert viewer_command("/d/a.pdf", None, "linux", _which("evince")) is None


def test_viewer_command_macos_and_windows() -> None:
    assert viewer_command("/d/a.pdf", 4, "darwin", _which("open", "evince")) == ["/usr/bin/open", "/d/a.pdf"]
    assert viewer_command("/d/a.pdf", 4, "darwin", _which()) == ["/usr/bin/open", "/d/a.pdf"]
    assert viewer_command("C:/d/a.pdf", 4, "win32", _which("evince", "xdg-open")) is None
