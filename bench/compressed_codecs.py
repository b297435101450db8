#!/usr/bin/env python
"""Which compressed codec for 384-d vectors (issue 33): the cost of scanning one code and the
recall@10 after exact re-scoring, per FAISS factory, on the same vectors and queries.

The store's compressed base (vrag_desktop/core/index/compressed.py) ranks by codes, then re-scores
``refine × k`` candidates from the full vectors. Its latency is dominated by the codes scanned
(``nprobe / nlist × N``), so the CPU per scanned code, measured here on a small set in one process
(one thread, one query per call, as the app searches), predicts the large sizes; the winner is then
measured for real with bench/compressed_index.py.

Vectors: ``--real FILE.npy`` (e.g. MiniLM embeddings written by bench/minilm_vectors.py) or the
synthetic clustered set of bench/search_latency.py's ``MixtureGenerator``. Queries: held-out rows.

Run:  nice -n 10 .venv/bin/python bench/compressed_codecs.py --n 300000 --dim 384
      nice -n 10 .venv/bin/python bench/compressed_codecs.py --real bench/out/minilm.npy
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

K = 10


def exact(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    out = []
    for a in range(0, len(q), 100):
        s = q[a : a + 100] @ x.T
        top = np.argpartition(-s, K, axis=1)[:, :K]
        o = np.argsort(-np.take_along_axis(s, top, 1), axis=1)
        out.append(np.take_along_axis(top, o, 1))
    return np.concatenate(out)


def make(faiss, codec: str, dim: int, nlist: int, x: np.ndarray):  # type: ignore[no-untyped-def]
    """``codec``: 'SQ4', 'PQ96x4fs', 'PCA192,SQ8' (uncentred PCA, as the store trains it)."""
    dred = 0
    if codec.startswith("PCA"):
        head, codec = codec.split(",", 1)
        dred = int(head[3:])
    index = faiss.index_factory(dred or dim, f"IVF{nlist},{codec}", faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(0)
    sample = x[np.sort(rng.choice(len(x), min(len(x), nlist * 39), replace=False))]
    faiss.extract_index_ivf(index).cp.niter = 10
    if dred:
        pca = faiss.PCAMatrix(dim, dred, 0, False)
        few = sample[:20_000]
        pca.train(np.concatenate([few, -few]))
        index = faiss.IndexPreTransform(pca, index)
    t = time.process_time()
    index.train(sample)
    train_s = time.process_time() - t
    t = time.process_time()
    for a in range(0, len(x), 50_000):
        index.add_with_ids(x[a : a + 50_000], np.arange(a, min(len(x), a + 50_000), dtype=np.int64))
    return index, train_s, time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--real", default=None, help=".npy of float32 rows (normalised here)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--nlist", type=int, default=0, help="default: the store's choose_spec")
    ap.add_argument("--nprobe", default="16,32")
    ap.add_argument("--refine", default="0,5,10")
    ap.add_argument("--codecs", default="SQ4,PCA192,SQ8,PQ96x4fs,PQ48x4fs,PQ192x4fs")
    args = ap.parse_args()

    from vrag_desktop.core.index.compressed import choose_spec
    from vrag_desktop.core.index.faiss_lib import load_faiss

    faiss = load_faiss()
    faiss.omp_set_num_threads(1)
    if args.real:
        allx = np.load(args.real).astype(np.float32)
        allx /= np.linalg.norm(allx, axis=1, keepdims=True)
        rng = np.random.default_rng(1)
        perm = rng.permutation(len(allx))
        q, x = allx[perm[: args.queries]], np.ascontiguousarray(allx[perm[args.queries :]])
        source = f"real {args.real}"
    else:
        from search_latency import MixtureGenerator

        gen = MixtureGenerator(d=args.dim, r=min(256, args.dim // 2))
        x = np.concatenate(
            [
                gen.sample(min(args.n, a + 50_000) - a, 1_000_003 + i)
                for i, a in enumerate(range(0, args.n, 50_000))
            ]
        )
        q = gen.sample(args.queries, 7)
        source = "synthetic MixtureGenerator"
    n, dim = x.shape
    nlist = args.nlist or choose_spec(n, dim).nlist
    truth = exact(x, q)
    print(f"# {source}: {n:,} × {dim}, nlist {nlist}, {len(q)} queries", flush=True)
    codecs = []
    i = 0
    parts = args.codecs.split(",")
    while i < len(parts):  # 'PCA192,SQ8' is one codec
        if parts[i].startswith("PCA"):
            codecs.append(parts[i] + "," + parts[i + 1])
            i += 2
        else:
            codecs.append(parts[i])
            i += 1
    results = []
    for codec in codecs:
        index, train_s, add_s = make(faiss, codec, dim, nlist, x)
        ivf = faiss.extract_index_ivf(index)
        code_size = ivf.code_size
        for nprobe in (int(p) for p in args.nprobe.split(",")):
            ivf.nprobe = nprobe
            sizes = np.array([ivf.invlists.list_size(j) for j in range(nlist)])
            for refine in (int(r) for r in args.refine.split(",")):
                kb = max(K, refine * K)
                for v in q[:20]:
                    index.search(v[None], kb)
                cpu, scanned, found = [], 0, []
                for v in q:
                    t = time.thread_time()
                    _, ci = index.search(v[None], kb)
                    ids = ci[0][ci[0] >= 0]
                    if refine:
                        s = x[ids] @ v  # the store reads these rows with pread; in RAM here
                        ids = ids[np.argsort(-s, kind="stable")[:K]]
                    cpu.append(time.thread_time() - t)
                    found.append(ids[:K])
                    _, cells = ivf.quantizer.search(
                        (index.chain.at(0).apply_py(v[None]) if hasattr(index, "chain") else v[None]), nprobe
                    )
                    scanned += int(sizes[cells[0]].sum())
                recall = float(
                    np.mean(
                        [
                            len(set(f.tolist()) & set(t.tolist())) / K
                            for f, t in zip(found, truth, strict=True)
                        ]
                    )
                )
                row = {
                    "codec": codec,
                    "bytes": int(code_size),
                    "train_cpu_s": round(train_s, 1),
                    "add_cpu_s": round(add_s, 1),
                    "nprobe": nprobe,
                    "refine": refine,
                    "cpu_p50_ms": round(float(np.percentile(cpu, 50)) * 1000, 3),
                    "codes_per_query": scanned // len(q),
                    "ns_per_code": round(float(np.mean(cpu)) * 1e9 / max(1, scanned / len(q)), 1),
                    "recall_at_10": round(recall, 4),
                }
                results.append(row)
                print(json.dumps(row), flush=True)
        del index
    out = ROOT / "bench" / "out" / f"compressed_codecs-{'real' if args.real else 'synth'}-{n}x{dim}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps({"source": source, "n": n, "dim": dim, "nlist": nlist, "rows": results}, indent=1)
    )


if __name__ == "__main__":
    main()
