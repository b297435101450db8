#!/usr/bin/env python
"""The store's compressed index (issue 33 item 5): build time and memory, search latency, recall@10
against exact search, and the resident memory of a process that loads the index and searches.

Per size N × d:

* **data**: a synthetic, clustered, anisotropic set shaped like real embeddings (bench/search_latency.py's
  ``MixtureGenerator``: a low-rank subspace with a power-law spectrum, two-level Zipf-sized cluster
  mixture, isotropic noise, a common mean direction, L2-normalised) generated chunk by chunk into a
  raw float32 file (never all in RAM); queries are held-out draws of the same distribution.
  Isotropic Gaussian vectors would be a poor proxy (no cluster structure).
* **exact ground truth**: the top 10 by inner product over every vector, streamed from the file.
* **build** (a child process): :func:`vrag_desktop.core.index.compressed.build` — the code the
  store's compaction runs — over the file's vectors (ids 0..N-1) with the store's own
  :func:`choose_spec`, then the catalogue is written as the store writes it. Wall time, CPU time and
  the child's peak RSS (VmHWM) are reported. (In the app this is the compaction that re-trains;
  the first compression runs at ~1 GiB of vectors, later compactions add to the trained codes.)
* **search** (a fresh child process): ``VectorStore(dir, read_only=True)`` — the app's reader, which
  verifies both files' checksums on open — then one query per ``search`` call at k = 10, for a few
  (nprobe, refine) settings; p50/p95 latency, recall@10 against exact, and the child's RSS read
  from /proc/self/status after the searches (VmRSS, VmHWM, and RssAnon = memory that is the
  process's own; the full vectors are read with pread, so page cache is not counted as ours).

Run:  nice -n 10 .venv/bin/python bench/compressed_index.py --n 1000000 --dim 2048
      nice -n 10 .venv/bin/python bench/compressed_index.py --n 3000000 --dim 384
Writes bench/out/compressed_index-<N>x<d>.json and prints a markdown row per setting.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

K = 10
CHUNK = 50_000


def status_kib() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key = line.split(":")[0]
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = int(line.split()[1])
    return out


def generate(n: int, dim: int, path: Path) -> None:
    from search_latency import MixtureGenerator

    gen = MixtureGenerator(d=dim, r=min(256, dim // 2))
    tmp = path.with_suffix(".part")
    with open(tmp, "wb") as f:
        for i, a in enumerate(range(0, n, CHUNK)):
            gen.sample(min(n, a + CHUNK) - a, 1_000_003 + i).tofile(f)
    with open(str(path) + ".q", "wb") as f:
        gen.sample(1000, 7).tofile(f)
    tmp.rename(path)


def read_rows(path: Path, dim: int, a: int, b: int) -> np.ndarray:
    with open(path, "rb") as f:
        f.seek(a * dim * 4)
        return np.fromfile(f, dtype=np.float32, count=(b - a) * dim).reshape(b - a, dim)


def ground_truth(path: Path, n: int, dim: int, q: np.ndarray) -> np.ndarray:
    best_s = np.full((len(q), K), -np.inf, dtype=np.float32)
    best_i = np.full((len(q), K), -1, dtype=np.int64)
    for a in range(0, n, CHUNK):
        b = min(n, a + CHUNK)
        s = q @ read_rows(path, dim, a, b).T
        top = np.argpartition(-s, K, axis=1)[:, :K]
        cs = np.concatenate([best_s, np.take_along_axis(s, top, 1)], axis=1)
        ci = np.concatenate([best_i, top + a], axis=1)
        o = np.argsort(-cs, axis=1)[:, :K]
        best_s, best_i = np.take_along_axis(cs, o, 1), np.take_along_axis(ci, o, 1)
    return best_i


def child_build(args: argparse.Namespace) -> None:
    from vrag_desktop.core.index.catalogue import FORMAT, Catalogue, write_catalogue
    from vrag_desktop.core.index.compressed import Source, build, choose_spec

    path, n, dim, out = Path(args.data), args.n, args.dim, Path(args.store)
    out.mkdir(parents=True, exist_ok=True)
    spec = with_override(choose_spec(n, dim), args.spec)
    source = Source(np.arange(n, dtype=np.int64), lambda a, b: read_rows(path, dim, a, b))
    t0, c0 = time.perf_counter(), time.process_time()
    phases: dict[str, float] = {}
    steps = build(out, 1, dim, source, spec)
    last, t_last = None, t0
    try:
        while True:
            phase, _, _ = next(steps)
            if phase != last:
                now = time.perf_counter()
                if last:
                    phases[last] = phases.get(last, 0) + now - t_last
                last, t_last = phase, now
    except StopIteration as stop:
        built = stop.value
    write_catalogue(out, dim, Catalogue(FORMAT, 1, built.base, (), full=built.full))
    res = {
        "spec": spec.__dict__ | {"factory": spec.factory(dim)},
        "build_s": round(time.perf_counter() - t0, 1),
        "build_cpu_s": round(time.process_time() - c0, 1),
        "phases_s": {k: round(v, 1) for k, v in phases.items()},
        "build_peak_rss_gib": round(status_kib()["VmHWM"] / 2**20, 2),
        "base_bytes": built.base.size,
        "full_bytes": built.full.size,
    }
    print(json.dumps(res), flush=True)


def with_override(spec, override: str | None):  # type: ignore[no-untyped-def]
    """``--spec DRED,CODEC`` (e.g. ``192,SQ8``): another codec than choose_spec's, same cells."""
    if not override:
        return spec
    from vrag_desktop.core.index.compressed import Spec

    dred, codec = override.split(",")
    return Spec(spec.nlist, int(dred), codec, spec.refine, spec.nprobe)


def child_search(args: argparse.Namespace) -> None:
    from vrag_desktop.core.index.store import VectorStore

    dim = args.dim
    q = np.fromfile(str(args.data) + ".q", dtype=np.float32).reshape(-1, dim)[: args.queries]
    truth = np.load(args.truth)[: args.queries]
    t0 = time.perf_counter()
    store = VectorStore(Path(args.store), dim, read_only=True)
    load_s = time.perf_counter() - t0
    rss_loaded = status_kib()
    rows = []
    for setting in args.settings.split(";"):
        nprobe, refine = (int(x) for x in setting.split(","))
        store._index.refine = refine  # the bench's knob; the app uses choose_spec's refine
        for x in q[:20]:  # warm-up
            store.search(x, K, nprobe=nprobe)
        if args.cold:  # the full vectors out of the page cache, as where RAM cannot hold them
            evict_full(store)
        times, cpu, found = [], [], []
        for x in q:
            t, c = time.perf_counter(), time.thread_time()
            _, ids = store.search(x, K, nprobe=nprobe)
            times.append(time.perf_counter() - t)
            cpu.append(time.thread_time() - c)
            found.append(ids[0])
        recall = float(
            np.mean([len(set(f.tolist()) & set(t.tolist())) / K for f, t in zip(found, truth, strict=True)])
        )
        ms = np.array(times) * 1000
        rows.append(
            {
                "nprobe": nprobe,
                "refine": refine,
                "p50_ms": round(float(np.percentile(ms, 50)), 2),
                "p95_ms": round(float(np.percentile(ms, 95)), 2),
                # CPU time of the searching thread: what the query costs, less the waits for a
                # core that a loaded machine adds to the wall clock
                "cpu_p50_ms": round(float(np.percentile(np.array(cpu) * 1000, 50)), 2),
                "cpu_p95_ms": round(float(np.percentile(np.array(cpu) * 1000, 95)), 2),
                "recall_at_10": round(recall, 4),
            }
        )
    st = status_kib()
    res = {
        "kind": store.kind,
        "ntotal": store.ntotal,
        "load_s": round(load_s, 1),
        "rss_after_load_gib": round(rss_loaded["VmRSS"] / 2**20, 2),
        "rss_gib": round(st["VmRSS"] / 2**20, 2),
        "hwm_gib": round(st["VmHWM"] / 2**20, 2),
        "rss_anon_gib": round(st["RssAnon"] / 2**20, 2),
        "rss_file_gib": round(st["RssFile"] / 2**20, 2),
        "rows": rows,
    }
    print(json.dumps(res), flush=True)


def evict_full(store) -> None:  # type: ignore[no-untyped-def]
    """Drop the full-vectors file's pages from the page cache (clean pages: no privilege needed)."""
    fd = os.open(store._index.full.path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def run_child(mode: str, args: argparse.Namespace, extra: list[str]) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--n", str(args.n), "--dim", str(args.dim)]
    cmd += ["--data", str(args.data), "--store", str(args.store), *extra] + (["--cold"] if args.cold else [])
    if args.spec:
        cmd += ["--spec", args.spec]
    t = time.perf_counter()
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    r2 = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["wall_s"] = round(time.perf_counter() - t, 1)
    res["child_cpu_s"] = round(r2.ru_utime + r2.ru_stime - r.ru_utime - r.ru_stime, 1)
    return res  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--work", default="/tmp/cidx")
    ap.add_argument("--data", default=None, help="raw float32 rows (generated if missing)")
    ap.add_argument("--store", default=None)
    ap.add_argument("--truth", default=None)
    ap.add_argument("--settings", default=None, help="'nprobe,refine;…' (default: around choose_spec's)")
    ap.add_argument("--child", choices=["build", "search"], default=None)
    ap.add_argument("--spec", default=None, help="'DRED,CODEC' instead of choose_spec's (e.g. 192,SQ8)")
    ap.add_argument("--keep", action="store_true", help="keep the data and the index")
    ap.add_argument(
        "--cold", action="store_true", help="evict the full vectors from the page cache before each setting"
    )
    args = ap.parse_args()
    if args.child == "build":
        return child_build(args)
    if args.child == "search":
        return child_search(args)

    from vrag_desktop.core.index.compressed import choose_spec

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    tag = f"{args.n}x{args.dim}"
    args.data = Path(args.data or work / f"db_{tag}.f32")  # shared by every --spec
    truth = Path(args.truth or work / f"truth_{tag}.npy")
    if args.spec:
        tag += "-" + args.spec.replace(",", "")
    args.store = Path(args.store or work / f"store_{tag}")
    res: dict = {
        "n": args.n,
        "dim": args.dim,
        "queries": args.queries,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB",  # noqa: E501
        "load_avg_start": os.getloadavg(),
    }
    if not args.data.exists():
        t = time.perf_counter()
        generate(args.n, args.dim, args.data)
        res["generate_s"] = round(time.perf_counter() - t, 1)
    if not truth.exists():
        t = time.perf_counter()
        q = np.fromfile(str(args.data) + ".q", dtype=np.float32).reshape(-1, args.dim)[: args.queries]
        np.save(truth, ground_truth(args.data, args.n, args.dim, q))
        res["truth_s"] = round(time.perf_counter() - t, 1)
    built = ROOT / "bench" / "out" / f"compressed_index-{tag}.json"
    out = built.with_name(built.stem + "-cold.json") if args.cold else built
    if (args.store / "store.json").exists() and built.exists():  # searched again: keep its build's figures
        res["build"] = json.loads(built.read_text()).get("build", {})
    if not (args.store / "store.json").exists():
        shutil.rmtree(args.store, ignore_errors=True)
        res["build"] = run_child("build", args, [])
        print(json.dumps(res["build"]), flush=True)
    spec = choose_spec(args.n, args.dim)
    settings = args.settings or ";".join(
        f"{p},{r}"
        for p, r in [
            (spec.nprobe // 2, spec.refine),
            (spec.nprobe, spec.refine),
            (spec.nprobe * 2, spec.refine),
            (spec.nprobe, 0),
            (spec.nprobe, 5),
        ]
    )
    res["search"] = run_child(
        "search", args, ["--truth", str(truth), "--queries", str(args.queries), "--settings", settings]
    )
    res["load_avg_end"] = os.getloadavg()
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    s = res["search"]
    b = res.get("build", {})
    for row in s["rows"]:
        factory = b.get("spec", {}).get("factory", "?")
        print(
            f"| {args.n:,} × {args.dim} | {factory} | nprobe {row['nprobe']}, refine {row['refine']}×k "
            f"| {b.get('build_s', '?')} s | {b.get('build_peak_rss_gib', '?')} GiB "
            f"| {row['p50_ms']} / {row['p95_ms']} ms (CPU {row['cpu_p50_ms']} / {row['cpu_p95_ms']}) "
            f"| {row['recall_at_10']} "
            f"| {s['rss_gib']} GiB (anon {s['rss_anon_gib']}, peak {s['hwm_gib']}) |"
        )
    if not args.keep:
        shutil.rmtree(args.store, ignore_errors=True)


if __name__ == "__main__":
    main()
