#!/usr/bin/env python
"""Where the offline embedder's NumPy pass stops paying: each input size through both passes.

The NumPy pass (:mod:`vrag_desktop.core.embedders.bert_numpy`) needs no torch; the torch pass
(transformers' ``BertModel``) needs ``import torch`` plus transformers' model classes first, paid
once per process. For ``rows × tokens`` from a single query to a full indexing batch this prints
the NumPy time, the torch time (model already loaded) and the one-off load cost, so
``minilm.NUMPY_TOKENS`` sits where NumPy's extra time stays well under that load cost.

Run:  .venv/bin/python bench/minilm_paths.py [--repeat 3]
Writes bench/out/minilm_paths.json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vrag_desktop.core.embedders.minilm import NUMPY_TOKENS, MiniLMEmbedder  # noqa: E402

SIZES = [(1, 12), (4, 32), (1, 256), (8, 64), (8, 256), (16, 128), (32, 128), (32, 256)]


def _best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    t0 = time.perf_counter()
    emb = MiniLMEmbedder(device="cpu")
    numpy_load = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    batches = {(r, t): (rng.integers(1000, 29000, (r, t)), np.ones((r, t), dtype=np.int64)) for r, t in SIZES}
    np_times = {k: _best(lambda k=k: emb._forward_numpy(*batches[k]), args.repeat) for k in SIZES}
    t0 = time.perf_counter()
    emb._load_torch()
    torch_load = time.perf_counter() - t0
    torch_times = {k: _best(lambda k=k: emb._forward_torch(*batches[k]), args.repeat) for k in SIZES}
    rows = [
        {"rows": r, "tokens": t, "numpy_s": np_times[(r, t)], "torch_s": torch_times[(r, t)]}
        for r, t in SIZES
    ]
    result = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "numpy_load_s": numpy_load,
        "torch_load_s": torch_load,
        "numpy_tokens_threshold": NUMPY_TOKENS,
        "sizes": rows,
    }
    out = ROOT / "bench" / "out" / "minilm_paths.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(
        f"NumPy weights load {numpy_load:.2f} s; torch + transformers import and model load {torch_load:.2f} s"
    )
    print("| rows × tokens | NumPy | torch (loaded) | NumPy − torch |")
    print("|---|---|---|---|")
    for row in rows:
        n, t = row["numpy_s"], row["torch_s"]
        mark = " ← threshold" if row["rows"] * row["tokens"] == NUMPY_TOKENS else ""
        size = f"{row['rows']} × {row['tokens']}{mark}"
        print(f"| {size} | {n * 1000:.0f} ms | {t * 1000:.0f} ms | {(n - t) * 1000:+.0f} ms |")
    print(f"(median NumPy/torch ratio {statistics.median(r['numpy_s'] / r['torch_s'] for r in rows):.1f})")


if __name__ == "__main__":
    main()
