"""Per-step agent overhead, excluding model time: what VRAG Desktop adds around each model call.

Measured on a 2000×2800 page (a typical 200-dpi render), with the agents' real code paths:
- VRAG search step: decode the page JPEG, resize to the model's pixel bounds, JPEG-encode as a data URI
- VRAG crop step: parse the reply's tags and bbox, map the box to raw pixels (56-px pad), crop the raw
  page, resize (zoom) and encode
- VimRAG graph step: add a search node and memorize an item (validation, energy)
- VimRAG context rebuild with 20 search nodes and their image memory: action graph JSON, energy-based
  selection of the top 5 items, each re-encoded at its pixel budget (≤ 38 KB)

Target (issue 3): ≤ 20 ms p50 per step on the 2-core development machine.

    .venv/bin/python bench/agent_overhead.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from PIL import Image, ImageDraw  # noqa: E402

from vrag_desktop.core.agents import vrag_protocol as vp  # noqa: E402
from vrag_desktop.core.agents.memory_graph import Frame, MemoryEntry  # noqa: E402
from vrag_desktop.core.agents.vimrag import VimRAGAgent, _Run  # noqa: E402


def make_page(path: Path, seed: int = 0) -> None:
    """A text-heavy 2000×2800 page (realistic JPEG entropy, unlike a blank image)."""
    rng = np.random.default_rng(seed)
    img = Image.new("RGB", (2000, 2800), "white")
    d = ImageDraw.Draw(img)
    for y in range(120, 2700, 44):
        x = 120
        while x < 1850:
            w = int(rng.integers(30, 160))
            d.rectangle([x, y, x + w, y + 22], fill=(20, 20, 20))
            x += w + int(rng.integers(12, 30))
    d.rectangle([300, 900, 1700, 1500], outline=(0, 0, 200), width=6)
    img.save(path, quality=90)


def timed(fn, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "agent_overhead.json")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="vrag-overhead-"))
    pages = []
    for i in range(21):
        p = tmp / f"page_{i}.jpg"
        make_page(p, i)
        pages.append(p)

    def vrag_search_step() -> None:  # as VRAGAgent's show_page: reduced-scale decode, exact resize, encode
        decoded, raw_size = vp.open_for_pixels(pages[0].read_bytes(), vp.MAX_PIXELS)
        size = vp.fit_pixels(*raw_size)
        shown = decoded if decoded.size == size else decoded.resize(size, Image.Resampling.BICUBIC)
        vp.encode_image(shown)

    reply = "<think>The table in the middle holds the figure.</think>\n<bbox>[80, 190, 460, 330]</bbox>"

    raw_cache: dict[str, Image.Image] = {}

    def vrag_crop_step() -> None:  # as VRAGAgent's crop: the run keeps the decoded page it zooms into
        turn = vp.parse_turn(reply)
        if str(pages[0]) not in raw_cache:
            with Image.open(pages[0]) as im:
                raw_cache[str(pages[0])] = im.convert("RGB")
        raw = raw_cache[str(pages[0])]
        view = vp.View(vp.fit_pixels(*raw.size), raw.size)
        box = vp.parse_bbox(turn.argument or "", view.shown_size)
        region, crop_view = view.zoom(box)
        crop = raw.crop(region).resize(crop_view.shown_size, Image.Resampling.BICUBIC)
        vp.encode_image(crop)

    agent = VimRAGAgent(model=None, searcher=None, image_dir=tmp)  # type: ignore[arg-type]

    def fresh_run(n_nodes: int) -> _Run:
        run = _Run(agent, "What was the revenue by region?")
        for i in range(n_nodes):
            nid = f"search {i}"
            parents = ["root"] if i == 0 else [f"search {max(0, i - 1 - (i % 3))}"]
            run.graph.add_search(nid, parents, f"query number {i} about revenue", created_at=i)
            entry = MemoryEntry(
                information_id="Picture 1",
                modality="image",
                priority=1 + i % 5,
                frames=[Frame(path=str(pages[i % len(pages)]))],
            )
            run.graph.memorize(nid, f"summary of search {i}", [entry])
        return run

    counter = iter(range(10_000))

    def vimrag_graph_step() -> None:
        run = fresh_run(0)
        i = next(counter)
        run.graph.add_search(f"n{i}", ["root"], "q")
        run.graph.memorize(f"n{i}", "s", [MemoryEntry("Picture 1", "image", 4, [Frame(path=str(pages[1]))])])

    def vimrag_rebuild_20() -> None:
        run = fresh_run(20)  # new graph → new budgets → every selected image re-encoded (worst case)
        run.build_context()

    steady = fresh_run(20)
    steady.build_context()
    grow = iter(range(20, 10_000))

    def vimrag_rebuild_step() -> None:  # one real step of a 20+-node run: new node + memory, rebuild
        i = next(grow)
        steady.graph.add_search(f"search {i}", [f"search {i - 1}"], f"query {i}", created_at=i)
        steady.graph.memorize(
            f"search {i}", "s", [MemoryEntry("Picture 1", "image", 3, [Frame(path=str(pages[i % 21]))])]
        )
        steady.build_context()

    results = {}
    for name, fn in [
        ("vrag_search_step", vrag_search_step),
        ("vrag_crop_step", vrag_crop_step),
        ("vimrag_graph_step", vimrag_graph_step),
        ("vimrag_context_rebuild_20_nodes", vimrag_rebuild_20),
        ("vimrag_context_rebuild_per_step", vimrag_rebuild_step),
    ]:
        fn()  # warm-up
        ms = timed(fn, args.repeat)
        results[name] = {
            "p50_ms": statistics.median(ms),
            "p90_ms": float(np.percentile(ms, 90)),
            "max_ms": max(ms),
            "n": len(ms),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print("| step (2000×2800 page) | p50 ms | p90 ms | max ms | target p50 |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['p50_ms']:.1f} | {r['p90_ms']:.1f} | {r['max_ms']:.1f} | ≤ 20 |")


if __name__ == "__main__":
    main()
