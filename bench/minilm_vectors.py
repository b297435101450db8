#!/usr/bin/env python
"""Real MiniLM vectors for the compressed-index benchmarks (issue 33): the app's offline embedder
(all-MiniLM-L6-v2, :class:`~vrag_desktop.core.embedders.minilm.MiniLMEmbedder`) over text chunks
found on this machine: paragraphs of the documentation files under the Python environment and
/usr/share/doc (READMEs, licences, changelogs, API docs), cut to about 60 words, deduplicated.
No download. Stops after ``--max`` chunks or ``--seconds`` and saves what it has.

Run:  nice -n 10 .venv/bin/python bench/minilm_vectors.py --max 50000 --seconds 900 --out bench/out/minilm.npy
"""

from __future__ import annotations

import argparse
import re
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def chunks(limit: int) -> list[str]:
    roots = [Path(sysconfig.get_paths()["purelib"]), Path("/usr/share/doc")]
    seen: set[str] = set()
    out: list[str] = []
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix.lower() not in (".md", ".rst", ".txt") or not path.is_file():
                continue
            try:
                text = path.read_text(errors="ignore")[:400_000]
            except OSError:
                continue
            for para in re.split(r"\n\s*\n", text):
                words = para.split()
                for a in range(0, len(words), 60):
                    piece = " ".join(words[a : a + 60])
                    if len(piece) < 80 or piece in seen:
                        continue
                    seen.add(piece)
                    out.append(piece)
                    if len(out) >= limit:
                        return out
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=50_000)
    ap.add_argument("--seconds", type=float, default=900)
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "minilm.npy"))
    args = ap.parse_args()
    from vrag_desktop.core.embedders.minilm import MiniLMEmbedder

    texts = chunks(args.max)
    print(f"{len(texts)} chunks", flush=True)
    emb = MiniLMEmbedder(device="cpu")
    t0 = time.perf_counter()
    parts = []
    done = 0
    for a in range(0, len(texts), 512):
        parts.append(emb.embed_queries(texts[a : a + 512]))
        done += len(parts[-1])
        if time.perf_counter() - t0 > args.seconds:
            break
    vecs = np.concatenate(parts).astype(np.float32)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    np.save(args.out, vecs)
    print(f"{done} vectors in {time.perf_counter() - t0:.0f} s -> {args.out}", flush=True)


if __name__ == "__main__":
    main()
