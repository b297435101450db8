#!/usr/bin/env python
"""Ingest + index throughput (pages/s) on a real PDF corpus, against two baselines, in one run.

All three use the same :class:`MiniLMEmbedder` instance (the offline default text embedder over
each page's text layer) with the same batch size (``--batch-size``, default the embedder's 32):

(b) **embedder alone** – page texts extracted beforehand and held in memory; only
    ``embed_items`` is timed (batches of ``batch_size`` pages). The upper limit for any pipeline.
(a) **naive sequential pipeline**, like the original VRAG's: render every page at 200 dpi to a JPEG
    file (pymupdf), then extract every page's text, embed all pages, and build a
    ``faiss.IndexFlatIP``; one stage after the other.
(c) **our pipeline**: ``Corpus.scan`` + ``Corpus.build`` into a fresh data directory (derive and
    embed overlapped in two threads, manifest + durable index checkpoints, OCR of pages without a
    text layer). Reports ``BuildReport.embed_seconds`` / ``wait_seconds``, and per-stage times of
    the derive thread (text extraction, render, JPEG encode, write, OCR), measured by wrapping those
    calls, plus the commit time (index segment + manifest) on the embedding thread.

(d) (diagnostic, in the default order) our pipeline with OCR off (``build(..., ocr=False)``, the
    CLI's ``--no-ocr``): the baselines do no OCR, and OCR of the few pages without a text layer
    competes with the embedder for the two CPUs.

Targets: (c) >= 2x (a) and (c) >= 0.9x (b), in pages/s. By default (b) and (c) run twice (order
b, a, c, d, b, c); each run is reported, ratios use each one's fastest run, plus (c)/(b) per pair.
A run during which other processes took more than ``--max-other-share`` of the CPUs is repeated
(up to ``--max-attempts``, while the bench has run less than ``--retry-budget`` s); the contended
attempts stay in the JSON under ``discarded_runs``. The machine is shared with other work, so
each phase also records how much CPU other processes used meanwhile (``other_cpu_share``).

Corpus: bench/get_pdf_corpus.sh (real Debian documentation manuals, 449 pages), fetched on demand.

Run:  .venv/bin/python bench/ingest.py
Writes bench/out/ingest.json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402


# ============================================================================ machine / contention
def machine_info() -> dict:
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    mem = None
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = round(int(line.split()[1]) / 2**20, 1)
    info = {
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "ram_gib": mem,
        "gpu": "none",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "loadavg_at_start": os.getloadavg(),
    }
    import importlib

    for name, attr in (
        ("torch", "__version__"),
        ("transformers", "__version__"),
        ("faiss", "__version__"),
        ("pymupdf", "VersionBind"),
        ("PIL", "__version__"),
    ):
        try:  # a benchmark that needs only some of them runs where the others are missing
            info[name] = getattr(importlib.import_module(name), attr)
        except ImportError:
            info[name] = None
    if info["torch"]:
        import torch

        info["torch_threads"] = torch.get_num_threads()
    return info


def _proc_busy() -> float:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = v[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _self_cpu() -> float:
    t = os.times()
    return t.user + t.system


class Phase:
    """Wall time, own CPU time and the CPU share other processes took meanwhile."""

    def __enter__(self) -> Phase:
        self.busy0, self.cpu0, self.t0 = _proc_busy(), _self_cpu(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.t0
        own = _self_cpu() - self.cpu0
        other = max(0.0, _proc_busy() - self.busy0 - own)
        n = os.cpu_count() or 1
        self.info = {
            "seconds": round(self.seconds, 2),
            "own_cpu_s": round(own, 1),
            "own_cpu_cores": round(own / self.seconds, 2) if self.seconds else 0.0,
            "other_cpu_share": round(other / (n * self.seconds), 3) if self.seconds else 0.0,
        }


def wait_quiet(max_wait: float, threshold: float = 0.15) -> dict:
    t0 = time.perf_counter()
    while True:
        with Phase() as p:
            time.sleep(2.0)
        if p.info["other_cpu_share"] < threshold or time.perf_counter() - t0 >= max_wait:
            return {
                "waited_s": round(time.perf_counter() - t0, 1),
                "other_cpu_share": p.info["other_cpu_share"],
            }


# ============================================================================ corpus
def corpus_pdfs(folder: Path | None) -> list[Path]:
    if folder is None:
        out = subprocess.run(
            [str(ROOT / "bench" / "get_pdf_corpus.sh")], check=True, capture_output=True, text=True
        )
        folder = Path(out.stdout.strip().splitlines()[-1])
    pdfs = sorted(folder.glob("*.pdf"))
    if not pdfs:
        raise SystemExit(f"no PDFs in {folder}")
    return pdfs


def page_texts(pdfs: list[Path]) -> list[str]:
    import pymupdf

    texts = []
    for p in pdfs:
        with pymupdf.open(p) as doc:
            texts += [page.get_text("text").strip() for page in doc]
    return texts


def batches(seq: list, n: int):  # type: ignore[no-untyped-def]
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


# ============================================================================ (b) embedder alone
def run_embedder_alone(embedder, texts: list[str], bs: int) -> dict:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.embedders.base import EmbedInput

    inputs = [EmbedInput(kind="text", text=t) for t in texts]
    n_vec = 0
    with Phase() as ph:
        for b in batches(inputs, bs):
            n_vec += sum(len(v) for v in embedder.embed_items(b))
    return {
        "pages": len(texts),
        "vectors": n_vec,
        **ph.info,
        "pages_per_s": round(len(texts) / ph.seconds, 2),
    }


# ============================================================================ (a) naive sequential
def run_naive(embedder, pdfs: list[Path], bs: int, workdir: Path) -> dict:  # type: ignore[no-untyped-def]
    import faiss
    import pymupdf

    from vrag_desktop.core.embedders.base import EmbedInput

    img_dir = workdir / "naive_images"
    img_dir.mkdir(parents=True)
    stages = {}
    with Phase() as total:
        with Phase() as ph:  # 1. every page to a 200 dpi JPEG on disk
            n_pages = 0
            for p in pdfs:
                with pymupdf.open(p) as doc:
                    for i, page in enumerate(doc):
                        page.get_pixmap(dpi=200).save(img_dir / f"{p.stem}_{i + 1}.jpg")
                        n_pages += 1
        stages["render_200dpi_jpeg"] = ph.info
        with Phase() as ph:  # 2. text of every page
            texts = page_texts(pdfs)
        stages["text_extraction"] = ph.info
        with Phase() as ph:  # 3. embed all pages
            vecs = []
            for b in batches([EmbedInput(kind="text", text=t) for t in texts], bs):
                vecs += embedder.embed_items(b)
        stages["embed"] = ph.info
        with Phase() as ph:  # 4. the index
            index = faiss.IndexFlatIP(embedder.dim)
            index.add(np.ascontiguousarray(np.concatenate(vecs), dtype=np.float32))
        stages["index"] = ph.info
    image_bytes = sum(f.stat().st_size for f in img_dir.iterdir())
    return {
        "pages": n_pages,
        "vectors": int(index.ntotal),
        **total.info,
        "pages_per_s": round(n_pages / total.seconds, 2),
        "stages": stages,
        "image_megabytes": round(image_bytes / 1e6, 1),
    }


# ============================================================================ (c) our pipeline
class StageTimer:
    """Wrap functions to accumulate their wall time per (stage, thread)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._undo: list[tuple[object, str, object]] = []
        self._lock = threading.Lock()

    def wrap(self, owner: object, attr: str, stage: str) -> None:
        orig = getattr(owner, attr, None)
        if orig is None:  # the code under test changed shape: time what is there
            return

        @functools.wraps(orig)
        def timed(*a, **kw):  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            try:
                return orig(*a, **kw)
            finally:
                dt = time.perf_counter() - t0
                key = f"{stage} [{threading.current_thread().name}]"
                with self._lock:
                    self.seconds[key] += dt
                    self.calls[key] += 1

        self._undo.append((owner, attr, orig))
        setattr(owner, attr, timed)

    def restore(self) -> None:
        for owner, attr, orig in reversed(self._undo):
            setattr(owner, attr, orig)
        self._undo.clear()

    def report(self) -> dict:
        return {k: {"seconds": round(v, 2), "calls": self.calls[k]} for k, v in sorted(self.seconds.items())}


def run_ours(embedder, pdf_dir: Path, workdir: Path, ocr: bool | None = None) -> dict:  # type: ignore[no-untyped-def]
    import pymupdf

    from vrag_desktop.core.corpus import corpus as corpus_mod
    from vrag_desktop.core.corpus import derive as derive_mod
    from vrag_desktop.core.corpus import ocr as ocr_mod
    from vrag_desktop.core.corpus.library import Library

    timer = StageTimer()
    timer.wrap(pymupdf.Page, "get_text", "text extraction")
    timer.wrap(pymupdf.Page, "get_pixmap", "render")
    timer.wrap(pymupdf.Pixmap, "tobytes", "jpeg encode (pymupdf)")
    timer.wrap(derive_mod, "_save_jpeg", "jpeg encode + write (Pillow)")
    timer.wrap(derive_mod, "_atomic_write", "write file")
    timer.wrap(ocr_mod, "ocr_image", "ocr")
    timer.wrap(corpus_mod.Corpus, "_commit", "commit (index segment + manifest)")
    try:
        lib = Library(workdir / "data")
        c = lib.open("bench", create=True)
        try:
            c.lock()
            c.add_paths([pdf_dir])
            with Phase() as total:
                with Phase() as ph:
                    gen = c.scan()
                    while True:
                        try:
                            next(gen)
                        except StopIteration as stop:
                            scan_report = stop.value
                            break
                scan_info = ph.info
                with Phase() as ph:
                    gen = c.build(embedder, ocr=ocr)
                    while True:
                        try:
                            next(gen)
                        except StopIteration as stop:
                            rep = stop.value
                            break
                build_info = ph.info
            stats = c.stats()
        finally:
            c.close()
    finally:
        timer.restore()
    pages = int(stats["items"])
    return {
        "pages": pages,
        "vectors": int(stats["vectors"]),
        "failed_items": rep.failed_items,
        **total.info,
        "pages_per_s": round(pages / total.seconds, 2),
        "scan": scan_info | {"added": scan_report.added},
        "build": build_info | {"pages_per_s": round(pages / build_info["seconds"], 2)},
        "build_report": {
            "seconds": round(rep.seconds, 2),
            "embed_seconds": round(rep.embed_seconds, 2),
            "wait_seconds": round(rep.wait_seconds, 2),
            "items": rep.items,
        },
        "stages": timer.report(),
    }


# ============================================================================ main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--pdfs", type=Path, default=None, help="folder of PDFs (default: bench/get_pdf_corpus.sh)"
    )
    ap.add_argument(
        "--batch-size", type=int, default=None, help="items per embed_items call (default: embedder's)"
    )
    ap.add_argument(
        "--order",
        default="b,a,c,d,b,c",
        help="order of the runs (a, b, c, d; a letter may repeat: b and c twice by default, "
        "as their ratio is the close one)",
    )
    ap.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        help="before each run wait up to this many seconds for other processes to go quiet",
    )
    ap.add_argument(
        "--max-other-share",
        type=float,
        default=0.05,
        help="a run during which other processes used more of the CPUs than this is repeated",
    )
    ap.add_argument("--max-attempts", type=int, default=3, help="attempts per run (see --max-other-share)")
    ap.add_argument(
        "--retry-budget",
        type=float,
        default=600.0,
        help="no repeats once the benchmark has run this many seconds (keeps it < 15 min)",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "ingest.json")
    args = ap.parse_args()

    from vrag_desktop.core.embedders.base import EmbedInput
    from vrag_desktop.core.embedders.minilm import MiniLMEmbedder

    pdfs = corpus_pdfs(args.pdfs)
    pdf_dir = pdfs[0].parent
    print(f"corpus: {len(pdfs)} PDFs in {pdf_dir}", flush=True)
    t_load = time.perf_counter()
    embedder = MiniLMEmbedder(device="cpu")
    load_s = time.perf_counter() - t_load
    if args.batch_size:
        embedder.batch_size = args.batch_size
    bs = embedder.batch_size
    texts = page_texts(pdfs)  # for (b), held in memory; also warms the page cache
    n_windows = sum(len(embedder.windows(t)) for t in texts)
    embedder.embed_items([EmbedInput(kind="text", text=t) for t in texts[:bs]])  # warm-up, not timed
    import pymupdf

    docs = []
    for p in pdfs:
        with pymupdf.open(p) as d:
            docs.append(
                {"file": p.name, "pages": d.page_count, "megabytes": round(p.stat().st_size / 1e6, 2)}
            )
    result: dict = {
        "benchmark": "ingest",
        "machine": machine_info(),
        "embedder": {
            "id": embedder.info.id,
            "model": embedder.info.model,
            "dim": embedder.dim,
            "device": "cpu",
            "batch_size": bs,
            "load_seconds": round(load_s, 1),
        },
        "corpus": {
            "folder": str(pdf_dir),
            "documents": docs,
            "pages": len(texts),
            "token_windows": n_windows,
            "windows_per_page": round(n_windows / len(texts), 2),
            "pages_without_text_layer": sum(len("".join(t.split())) < 20 for t in texts),
        },
        "targets": {"ours_vs_naive_min": 2.0, "ours_vs_embedder_alone_min": 0.9},
        "runs": {},
    }
    names = {"a": "naive", "b": "embedder_alone", "c": "ours", "d": "ours_no_ocr"}
    workroot = args.out.parent / "tmp"
    workroot.mkdir(parents=True, exist_ok=True)
    t_bench = time.perf_counter()
    result["discarded_runs"] = []
    for i, key in enumerate(x.strip() for x in args.order.split(",") if x.strip()):
        attempt = 0
        while True:
            attempt += 1
            wq = wait_quiet(args.wait_quiet) if args.wait_quiet else None
            print(f"run ({key}) {names[key]} ...", flush=True)
            work = Path(tempfile.mkdtemp(prefix=f"ingest-{key}-", dir=workroot))
            try:
                if key == "a":
                    r = run_naive(embedder, pdfs, bs, work)
                elif key == "b":
                    r = run_embedder_alone(embedder, texts, bs)
                elif key == "c":
                    r = run_ours(embedder, pdf_dir, work)
                else:
                    r = run_ours(embedder, pdf_dir, work, ocr=False)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            if wq:
                r["wait_quiet"] = wq
            r["order"], r["attempt"] = i, attempt
            print(
                f"   {r['pages']} pages in {r['seconds']:.1f} s = {r['pages_per_s']:.2f} pages/s "
                f"(others used {r['other_cpu_share']:.0%} of the CPUs)",
                flush=True,
            )
            busy = r["other_cpu_share"] > args.max_other_share
            if busy and attempt < args.max_attempts and time.perf_counter() - t_bench < args.retry_budget:
                # another process competed for the 2 CPUs: keep the record, measure again
                print(
                    f"   others used more than {args.max_other_share:.0%} of the CPUs: run again", flush=True
                )
                result["discarded_runs"].append({"run": names[key], **r})
                continue
            r["contended"] = busy
            break
        result["runs"].setdefault(names[key], []).append(r)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2))
    result["bench_seconds"] = round(time.perf_counter() - t_bench, 1)

    # with repeated runs (--order b,a,c,b,a,c) each is summarised by its fastest run
    best = {k: max(v, key=lambda r: r["pages_per_s"]) for k, v in result["runs"].items()}
    if "ours_no_ocr" in best and "embedder_alone" in best:
        result["ours_no_ocr_vs_embedder_alone"] = round(
            best["ours_no_ocr"]["pages_per_s"] / best["embedder_alone"]["pages_per_s"], 3
        )
    if "ours" in best:
        o = best["ours"]["pages_per_s"]
        if "naive" in best:
            result["ours_vs_naive"] = round(o / best["naive"]["pages_per_s"], 3)
        if "embedder_alone" in best:
            result["ours_vs_embedder_alone"] = round(o / best["embedder_alone"]["pages_per_s"], 3)
            b = best["embedder_alone"]
            br = best["ours"]["build_report"]
            derive_busy = sum(v["seconds"] for k, v in best["ours"]["stages"].items() if "[vrag-derive]" in k)
            result["analysis"] = {
                "embed_seconds_in_pipeline": br["embed_seconds"],
                "embed_seconds_alone": b["seconds"],
                "embed_slowdown_seconds": round(br["embed_seconds"] - b["seconds"], 2),
                "derive_thread_busy_seconds": round(derive_busy, 2),
                "embedder_wait_seconds": br["wait_seconds"],
            }
    bs_, cs_ = result["runs"].get("embedder_alone", []), result["runs"].get("ours", [])
    if len(bs_) > 1 and len(bs_) == len(cs_):  # i-th (c) against the i-th (b): run-to-run spread
        result["ours_vs_embedder_alone_per_pair"] = [
            round(c["pages_per_s"] / b["pages_per_s"], 3) for b, c in zip(bs_, cs_, strict=True)
        ]
    if "naive" in best and "embedder_alone" in best:
        # A pipeline can at best run at the embedder's own speed: the highest ratio to naive possible.
        result["ceiling_ours_vs_naive"] = round(
            best["naive"]["seconds"] / best["embedder_alone"]["seconds"], 3
        )
    args.out.write_text(json.dumps(result, indent=2))
    print_table(result)
    print(f"\nwrote {args.out}")


def print_table(result: dict) -> None:
    c = result["corpus"]
    print(
        f"\ncorpus: {c['pages']} pages, {len(c['documents'])} PDFs, {c['windows_per_page']} MiniLM windows/page; "
        f"batch size {result['embedder']['batch_size']}"
    )
    print("\n| run | pages | seconds | pages/s | others' CPU share | notes |")
    print("|---|---|---|---|---|---|")
    for name, runs in result["runs"].items():
        for r in runs:
            note = ""
            if name == "naive":
                st = r["stages"]
                note = ", ".join(f"{k} {v['seconds']:.1f}s" for k, v in st.items())
            elif name in ("ours", "ours_no_ocr"):
                br = r["build_report"]
                note = (
                    f"scan {r['scan']['seconds']:.1f}s, build {r['build']['seconds']:.1f}s "
                    f"(embed {br['embed_seconds']:.1f}s, wait {br['wait_seconds']:.1f}s)"
                )
            flag = " (contended)" if r.get("contended") else ""
            print(
                f"| {name} | {r['pages']} | {r['seconds']:.1f} | {r['pages_per_s']:.2f} | "
                f"{r['other_cpu_share']:.0%}{flag} | {note} |"
            )
    if result.get("discarded_runs"):
        print(
            f"\n({len(result['discarded_runs'])} run(s) repeated because other processes competed for the "
            "CPUs; kept in the JSON under discarded_runs)"
        )
    if "ours_vs_naive" in result:
        print(f"\nours / naive = {result['ours_vs_naive']:.2f}x (target >= 2.0x)")
    if "ours_vs_embedder_alone" in result:
        print(f"ours / embedder alone = {result['ours_vs_embedder_alone']:.2f}x (target >= 0.9x)")
    if "ours_no_ocr_vs_embedder_alone" in result:
        print(
            f"ours with OCR off / embedder alone = {result['ours_no_ocr_vs_embedder_alone']:.2f}x (diagnostic)"
        )
    if "ours_vs_embedder_alone_per_pair" in result:
        print(f"  per (b, c) pair: {result['ours_vs_embedder_alone_per_pair']}")
    if "ceiling_ours_vs_naive" in result:
        print(
            f"ceiling for ours / naive (a pipeline exactly as fast as the embedder alone) = "
            f"{result['ceiling_ours_vs_naive']:.2f}x"
        )
    if "analysis" in result:
        a = result["analysis"]
        print(
            f"embedding took {a['embed_seconds_in_pipeline']:.1f} s inside the pipeline vs "
            f"{a['embed_seconds_alone']:.1f} s alone; the derive thread was busy "
            f"{a['derive_thread_busy_seconds']:.1f} s; "
            f"the embedder waited {a['embedder_wait_seconds']:.1f} s for input"
        )
    for name in ("ours", "ours_no_ocr"):
        for r in result["runs"].get(name, []):
            print(f"\n{name}, per stage (thread):")
            for k, v in r["stages"].items():
                print(f"  {k:60s} {v['seconds']:7.1f} s  ({v['calls']} calls)")


if __name__ == "__main__":
    main()
