#!/usr/bin/env python
"""What checksums and read-only readers cost (issue 27), each against its baseline in one run.

* **Open** — a reader opening a store of N vectors × d: the format-2 store (every file's XXH3-128
  checked, then read) against the very same files read as format 1 (no catalogue of checksums: the
  store before issue 27). Warm page cache for both (the files were just written), so the checksum's
  own cost shows rather than the disk's; cold-cache opens add the same read time to both.
* **Per-search refresh** — a long-lived engine checks before each search whether an indexing job
  committed since (a ``stat`` of ``store.json`` and ``PRAGMA data_version``): ``SearchEngine.search``
  p50/p99 with that check against the same engine with the check switched off, on a real MiniLM
  corpus (so the numbers include the embedder's forward pass, as a user's search does).
* **Refresh after a commit** — the time to take in one new segment (512 vectors) into an open
  reader, against reopening the store.

Run:  .venv/bin/python bench/store_integrity.py [--vectors 200000 --dim 768] [--searches 200]
Writes bench/out/store_integrity.json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vrag_desktop.core.index.store import META, VectorStore  # noqa: E402


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def bench_open(n: int, dim: int, repeats: int) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix="vrag-bench-store-"))
    try:
        rng = np.random.default_rng(0)
        store = VectorStore(tmp / "v2", dim)
        for start in range(0, n, 50_000):
            part = rng.standard_normal((min(50_000, n - start), dim), dtype=np.float32)
            store.add(np.arange(start, start + len(part)), part)
        store.compact()
        store.add(np.arange(n, n + 512), rng.standard_normal((512, dim), dtype=np.float32))
        store.checkpoint()
        del store
        # The same files as a format-1 store: no checksums to check.
        shutil.copytree(tmp / "v2", tmp / "v1")
        (tmp / "v1" / META).write_text(json.dumps({"dim": dim, "format": 1}))
        size = sum(p.stat().st_size for p in (tmp / "v2").iterdir())
        times: dict[str, list[float]] = {"checked (format 2)": [], "unchecked (format 1, baseline)": []}
        for _ in range(repeats):
            for label, folder in (("unchecked (format 1, baseline)", "v1"), ("checked (format 2)", "v2")):
                t = time.perf_counter()
                s = VectorStore(tmp / folder, dim, read_only=True)
                times[label].append(time.perf_counter() - t)
                assert s.ntotal == n + 512 and not s.damage
                del s
        # Taking in one new segment, against reopening.
        reader = VectorStore(tmp / "v2", dim, read_only=True)
        writer = VectorStore(tmp / "v2", dim)
        writer.add(np.arange(n + 512, n + 1024), rng.standard_normal((512, dim), dtype=np.float32))
        writer.checkpoint()
        t = time.perf_counter()
        assert reader.refresh() and reader.ntotal == n + 1024
        refresh = time.perf_counter() - t
        t = time.perf_counter()
        VectorStore(tmp / "v2", dim, read_only=True)
        reopen = time.perf_counter() - t
        return {
            "vectors": n,
            "dim": dim,
            "bytes": size,
            "open_ms": {k: [_ms(x) for x in v] for k, v in times.items()},
            "open_median_ms": {k: _ms(statistics.median(v)) for k, v in times.items()},
            "refresh_one_segment_ms": _ms(refresh),
            "reopen_ms": _ms(reopen),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench_search(searches: int) -> dict[str, object]:
    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.embedders.minilm import MiniLMEmbedder
    from vrag_desktop.core.search.engine import SearchEngine

    sample = ROOT / "resources" / "sample_corpus"
    tmp = Path(tempfile.mkdtemp(prefix="vrag-bench-search-"))
    try:
        minilm = MiniLMEmbedder(device="cpu")
        lib = Library(tmp)
        c = lib.open("sample", create=True)
        c.add_paths([sample])
        for _ in c.scan():
            pass
        for _ in c.build(minilm, ocr=False):
            pass
        c.close()
        queries = ["robot payload battery", "annual revenue growth", "alpine flowers", "warehouse safety"]
        out: dict[str, object] = {}
        for label, check in (("without the check (baseline)", False), ("with the per-search check", True)):
            engine = SearchEngine(lib, ["sample"], minilm)
            if not check:
                engine._refresh_all = lambda: None  # type: ignore[method-assign]
            for q in queries:  # warm: BM25 built, first forward pass done
                engine.search(q, 5)
            lat = []
            for i in range(searches):
                t = time.perf_counter()
                engine.search(queries[i % len(queries)], 5)
                lat.append(time.perf_counter() - t)
            engine.close()
            lat.sort()
            out[label] = {"p50_ms": _ms(lat[len(lat) // 2]), "p99_ms": _ms(lat[int(len(lat) * 0.99) - 1])}
        engine = SearchEngine(lib, ["sample"], minilm)
        t = time.perf_counter()
        for _ in range(2000):
            engine.refresh()
        out["check alone (no change), us"] = round((time.perf_counter() - t) / 2000 * 1e6, 1)
        engine.close()
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vectors", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--searches", type=int, default=200)
    args = ap.parse_args()
    result = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "open": bench_open(args.vectors, args.dim, args.repeats),
        "search": bench_search(args.searches),
    }
    out = ROOT / "bench" / "out" / "store_integrity.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    o = result["open"]
    print(f"Open a reader: {o['vectors']} × {o['dim']} ({o['bytes'] / 1e6:.0f} MB), median of {args.repeats}")  # type: ignore[index]
    print("| store | open, ms |\n|---|---|")
    for k, v in o["open_median_ms"].items():  # type: ignore[index, union-attr]
        print(f"| {k} | {v} |")
    print(
        f"\nTake in one new 512-vector segment: {o['refresh_one_segment_ms']} ms (reopen: {o['reopen_ms']} ms)"
    )  # type: ignore[index]
    print("\n| search (sample corpus, MiniLM, hybrid, k=5) | p50, ms | p99, ms |\n|---|---|---|")
    for k, v in result["search"].items():  # type: ignore[union-attr]
        if isinstance(v, dict):
            print(f"| {k} | {v['p50_ms']} | {v['p99_ms']} |")
    print(f"\nThe check alone, nothing changed: {result['search']['check alone (no change), us']} µs")  # type: ignore[index]


if __name__ == "__main__":
    main()
