"""Cost of the VRAG crop step when the crop is re-made from the source (issue 9), against cutting
the indexed page image (the behaviour before, which gave no new detail), in one run.

Measured with the agent's own code (``_Run.cut``: page image, region → source render or page-image
crop → resize → JPEG → data URI) on a text-heavy A4 PDF of 12 pages indexed by the app's derive step
at a Qwen-VL embedder's budget (200,704 px) and at MiniLM's (1,843,200 px). Regions are what a model
asks for: a third of the page, a table cell, a zoom inside the previous zoom. Cases:

- "PDF, page zoomed before": the usual case — the page is open and verified (same-page check) from
  the first zoom of the run; the render is the whole cost.
- "PDF, first zoom": the first zoom into a page the search just showed. The agent opens the PDF,
  interprets the page and checks it is still the indexed one (text layer, or a 400-px render
  compared with the page image) in the background right after showing the page, while the model
  reads it ("prepared"); "cold" times the zoom immediately after the search, without the seconds a
  model takes, so the crop waits for all of that.
- "page image (before)": the crop cut from the indexed page image, as the agent did before.

Target (issue 9): ≤ 20 ms p50 for a PDF region.

    .venv/bin/python bench/crop_zoom.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_MS = 20.0
PAGES = 12


def make_pdf(path: Path) -> None:
    """Dense pages: a title, 55 lines of 9-pt text, and a ruled table of small numbers."""
    import pymupdf

    doc = pymupdf.open()
    for p in range(PAGES):
        page = doc.new_page(width=595, height=842)
        page.insert_text((50, 60), f"Annual report, section {p + 1}", fontsize=20)
        for i in range(55):
            page.insert_text(
                (50, 90 + 9.5 * i),
                f"{p}.{i} The committee reviewed revenue, costs and risks by region.",
                fontsize=8,
            )
        for r in range(12):
            for c in range(6):
                x, y = 50 + 82 * c, 640 + 14 * r
                page.draw_rect(pymupdf.Rect(x, y, x + 82, y + 14), width=0.4)
                page.insert_text((x + 4, y + 10), f"{(p * 97 + r * 13 + c * 7) % 1000:>4}.{r}{c}", fontsize=6)
    doc.save(str(path))
    doc.close()


def measure(repeat: int) -> dict[str, Any]:
    from vrag_desktop.core.agents import zoom
    from vrag_desktop.core.agents.searchers import SearchHit
    from vrag_desktop.core.agents.vrag import VRAGAgent
    from vrag_desktop.core.agents.vrag import _Run as VragRun
    from vrag_desktop.core.corpus import kinds
    from vrag_desktop.core.corpus.derive import DeriveOptions, derive

    work = Path(tempfile.mkdtemp(prefix="vrag-crop-bench-"))
    (work / "out").mkdir()
    pdf = work / "report.pdf"
    make_pdf(pdf)

    class Local:
        local_files = True

        def load_image(self, path: str) -> bytes:
            return Path(path).read_bytes()

    results: dict[str, Any] = {}
    for budget in (200_704, 1_843_200):
        items = list(
            derive(
                pdf,
                kinds.PDF,
                work / str(budget),
                DeriveOptions(render_pixels=budget, ocr=False),
                set(),
                None,
            )
        )
        hits = [
            SearchHit(1.0, it.name, str(pdf), "page", image=str(it.image_path), page=it.ordinal)
            for it in items
        ]
        # fractions of the shown page: a third of it, a table cell, a band of text
        boxes = [(0.08, 0.08, 0.6, 0.35), (0.1, 0.78, 0.35, 0.82), (0.2, 0.4, 0.9, 0.55)]

        def one(hit: SearchHit, run: Any, page_image: bool, frac: tuple[float, ...], think: bool) -> float:
            if page_image:  # the old behaviour: the hit has no source to zoom into
                hit = SearchHit(1.0, hit.name, "", "page image", image=hit.image)
            run.show_page(hit)
            if think:  # the model reads the page (seconds) while the zoom is prepared
                zoom.settle()
            cur = run.current
            w, h = cur.view.shown_size
            box = (frac[0] * w, frac[1] * h, frac[2] * w, frac[3] * h)
            t = time.perf_counter()  # the agent's work for a <bbox>: padding, region, crop, JPEG
            region, view = cur.view.zoom(box, run.pad(cur))
            run.cut(cur.page_raw, region, view.shown_size)
            dt = (time.perf_counter() - t) * 1000
            if not page_image:
                assert run.last_zoom.origin == "pdf", run.last_zoom.note
            return dt

        samples: dict[str, list[float]] = {}
        for key, first, page_image, think in (
            ("pdf_first_zoom_prepared", True, False, True),
            ("pdf_first_zoom", True, False, False),
            ("pdf_zoomed_before", False, False, True),
            ("page_image_before", False, True, True),
        ):
            samples[key] = []
            for i in range(repeat):
                zoom.clear() if first else None
                run = VragRun(VRAGAgent(model=None, searcher=Local(), image_dir=work / "out"), "q")  # type: ignore[arg-type]
                hit = hits[i % len(hits)]
                if not first:  # the page was zoomed into before in this run: open and verified
                    one(hit, run, page_image, boxes[(i + 1) % len(boxes)], think)
                samples[key].append(one(hit, run, page_image, boxes[i % len(boxes)], think))
        results[str(budget)] = {
            k: {"p50": statistics.median(v), "p90": sorted(v)[int(0.9 * (len(v) - 1))], "n": len(v)}
            for k, v in samples.items()
        }
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    res = measure(args.repeat)
    names = {
        "pdf_zoomed_before": "PDF region, page zoomed before",
        "pdf_first_zoom_prepared": "PDF region, first zoom (prepared, model reading)",
        "pdf_first_zoom": "PDF region, first zoom, cold (no model time)",
        "page_image_before": "page-image crop (before; no new detail)",
    }
    print(f"{'page image budget':>18} | {'case':<50} | {'p50 ms':>7} | {'p90 ms':>7}")
    for budget, cases in res.items():
        for key, label in names.items():
            c = cases[key]
            flag = " ✓" if key.startswith("pdf") and c["p50"] <= TARGET_MS else ""
            print(f"{int(budget):>18,} | {label:<50} | {c['p50']:7.1f} | {c['p90']:7.1f}{flag}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
