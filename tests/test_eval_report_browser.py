"""The evaluation report as a person sees it: a real retrieval evaluation writes ``report.html``, a
real headless browser (Debian's Chromium) renders it, and the screenshot shows every plot drawn.

Why a browser and not an HTML parser: the report is hand-written SVG inside a flex layout, and
what can go wrong (a plot of zero size, an empty frame, a viewBox that puts the marks outside,
CSS that hides it) only shows once something lays it out and paints it. The screenshot is kept
in the test's tmp dir; ``VRAG_REPORT_SCREENSHOT=<path>`` also copies it there (the one in
docs/screenshots/evaluation-report.png was made so). Install the browser with
``scripts/display-deps.sh --browser`` (Debian/Ubuntu: ``apt-get install chromium``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import drain, index_paths
from PIL import Image

from vrag_desktop.core.datasets import DatasetItem, write_unified
from vrag_desktop.core.endpoints.profiles import ProfileStore
from vrag_desktop.core.eval.jobs import EvalRequest, open_job
from vrag_desktop.core.eval.report import CSS, H, W, page

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FRAME_FILL = (0xFB, 0xFC, 0xFD)  # report.py's plot background
MARKS = ((0x4B, 0x8B, 0xC4), (0x2A, 0x6F, 0xB0))  # its bars and its line


def _browser() -> str | None:
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


needs_browser = pytest.mark.skipif(
    _browser() is None,
    reason="no Chromium on PATH: install it to render the HTML report in a real browser "
    "(scripts/display-deps.sh --browser, or apt-get install chromium)",
)


def screenshot(html: Path, png: Path, profile: Path, width: int = 1200, height: int = 1300) -> np.ndarray:
    """Render ``html`` in headless Chromium at device scale 1 and return the screenshot's RGB."""
    browser = _browser()
    assert browser is not None
    args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
    args += ["--disable-extensions", "--disable-background-networking", "--disable-component-update"]
    args += ["--force-device-scale-factor=1", f"--window-size={width},{height}", f"--user-data-dir={profile}"]
    proc = subprocess.run(
        [*args, f"--screenshot={png}", html.as_uri()], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and png.exists(), f"Chromium could not render {html}: {proc.stderr[-2000:]}"
    return np.asarray(Image.open(png).convert("RGB"))


def _runs(row: np.ndarray, min_len: int) -> list[tuple[int, int]]:
    """The [start, end) spans of True in ``row`` at least ``min_len`` long."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], row.astype(np.int8), [0]))))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True) if b - a >= min_len]


def plot_frames(rgb: np.ndarray) -> list[tuple[int, int, int, int]]:
    """The boxes (x0, y0, x1, y1) inside the report's plot frames. A frame's inside is the plot's
    fill colour, whole in its top and bottom rows (the marks and labels keep off the margins), with
    some fill in every row between, and no fill in the rows just outside it."""
    fill = np.all(rgb == FRAME_FILL, axis=2)
    boxes: list[tuple[int, int, int, int]] = []
    for y in range(1, fill.shape[0]):
        for x0, x1 in _runs(fill[y], W - 12):
            if fill[y - 1, x0:x1].any():
                continue  # not a top edge
            rows = fill[y:, x0:x1].any(axis=1)
            if rows.all():
                continue
            y1 = y + int(np.argmin(rows))  # the first row without fill
            if abs((y1 - y) - H) <= 6 and fill[y1 - 1, x0:x1].all():
                boxes.append((x0, y, x1, y1))
    return boxes


def ink(rgb: np.ndarray, box: tuple[int, int, int, int]) -> tuple[float, int]:
    """Inside ``box``: the share of pixels that are not the frame's fill, and the count of pixels
    in a plot mark's colour (bars, line, points)."""
    x0, y0, x1, y1 = box
    inner = rgb[y0:y1, x0:x1].astype(int)
    not_fill = np.any(inner != FRAME_FILL, axis=2).mean()
    marks = sum(int((np.abs(inner - c).sum(axis=2) <= 24).sum()) for c in MARKS)
    return float(not_fill), marks


@pytest.fixture
def report(library, data_dir: Path, make_pdf, minilm, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    """A retrieval evaluation of a small real corpus, run as the app runs one (``open_job``)."""
    topics = {
        "harbour.pdf": ["The harbour of Tromsø freezes in January.", "Ferries leave the harbour at dawn."],
        "mill.pdf": ["The paper mill employs 240 people.", "The mill's turbine produces 3 MW."],
        "orchard.pdf": ["Apple trees in the orchard bloom in May.", "The orchard sells cider in autumn."],
    }
    paths = [make_pdf(name, pages) for name, pages in topics.items()]
    index_paths(library, "town", paths, minilm)
    items = [
        DatasetItem("q1", "When does the harbour freeze?", "January", "harbour.pdf", (1,), query_type="fact"),
        DatasetItem("q2", "When do ferries leave?", "dawn", "harbour.pdf", (2,), query_type="fact"),
        DatasetItem("q3", "How many people work at the mill?", "240", "mill.pdf", (1,), query_type="number"),
        DatasetItem(
            "q4", "How much power does the turbine make?", "3 MW", "mill.pdf", (2,), query_type="number"
        ),
        DatasetItem("q5", "When do the apple trees bloom?", "May", "orchard.pdf", (1,), query_type="fact"),
        DatasetItem("q6", "What does the orchard sell?", "cider", "orchard.pdf", (2,), query_type="fact"),
    ]
    dataset = tmp_path / "town.json"
    write_unified(dataset, items)
    out = tmp_path / "evaluation"
    job = open_job(
        EvalRequest("retrieval", str(dataset), out=str(out)),
        library,
        data_dir,
        ProfileStore(data_dir / "config"),
    )
    try:
        summary = drain(job.run(None))
    finally:
        job.close()
    assert summary["items"] == 6 and summary["complete"]
    return out / "report.html"


@needs_browser
def test_the_report_renders_in_a_browser_with_every_plot_drawn(report: Path, tmp_path: Path) -> None:
    html = report.read_text()
    assert html.count("<svg") == 3  # recall@k, recall by query type, search time
    png = tmp_path / "evaluation-report.png"
    rgb = screenshot(report, png, tmp_path / "chromium-profile")
    boxes = plot_frames(rgb)
    assert len(boxes) == 3, f"expected the report's 3 plot frames in {png}, found {boxes}"
    for box in boxes:
        share, marks = ink(rgb, box)
        assert share >= 0.005 and marks >= 150, (
            f"plot at {box} looks blank in {png}: {share:.3f} inked, {marks} mark px"
        )
    # The page itself drew: its title and the per-question table are text on white.
    assert (rgb[:120] < 100).all(axis=2).sum() > 200, f"no title text in {png}"
    if keep := os.environ.get("VRAG_REPORT_SCREENSHOT"):
        shutil.copyfile(png, keep)


@needs_browser
def test_the_blank_check_fails_on_an_empty_plot(tmp_path: Path) -> None:
    """The check above can fail: a report whose plots have no data shows frames without marks."""
    from vrag_desktop.core.eval.report import bars_svg, line_svg

    empty = tmp_path / "empty.html"
    empty.write_text(
        page("Empty", ['<div class="plots">', line_svg("none", [], []), bars_svg("none", [], []), "</div>"])
    )
    assert CSS in empty.read_text()
    rgb = screenshot(empty, tmp_path / "empty.png", tmp_path / "chromium-profile", height=700)
    boxes = plot_frames(rgb)
    assert len(boxes) == 2
    assert all(ink(rgb, b)[1] == 0 and ink(rgb, b)[0] < 0.005 for b in boxes)


def test_histograms_count_in_whole_numbers_and_equal_values_make_one_bar() -> None:
    """Seen in the browser: six questions timed as one batch drew ten bins labelled "6.00", "0.00"."""
    from vrag_desktop.core.eval.report import histogram_svg

    same = histogram_svg("s", [342.0] * 6)
    assert same.count("<rect x=") == 1 and ">6</text>" in same and ">342</text>" in same
    spread = histogram_svg("s", [1.0, 2.0, 2.0, 9.0], bins=4)
    assert spread.count("<rect x=") == 4 and ">3</text>" in spread and ".00<" not in spread
