#!/usr/bin/env python
"""Search latency and recall of :class:`vrag_desktop.core.index.store.VectorStore` at 10k / 100k / 1M vectors.

What it measures, per corpus size N (d = 2048, the GVE-3B / Qwen3-VL-Embedding-2B dimension):

* **exact ground truth** – the store while it is still flat (``IndexIDMap2(IndexFlatIP)``), batched;
* **single-query latency** – one query per ``VectorStore.search`` call, like a person typing queries
  (p50 / p99 over ``--queries`` queries), and **batched** per-query time (all queries in one call);
* **recall@10** against the exact top 10, for an nprobe sweep (the store's default nprobe is marked);
* build times (generation, ``add``, ``compact()``), peak resident memory, and how much CPU other
  processes took meanwhile (this machine is shared; that share is reported, not hidden).

Data: a synthetic, clustered, anisotropic set meant to resemble real embeddings (isotropic Gaussian
vectors are useless for this: every ANN method fails on them). See :class:`MixtureGenerator`; its
parameters and summary statistics (random-pair cosine, top-1/top-10 neighbour cosine, relative
contrast, PCA energy) are written into the JSON. Queries are *held-out draws* from the same
distribution (never copies of database points), plus a smaller set of *harder* queries (noisier
draws, a stand-in for text queries against page embeddings) for which only recall is reported.

How the index is built:

* N <= ``--product-path-max`` (default 100k): exactly the product path – ``store.add`` in chunks, then
  ``store.compact()``, which switches to IVF above ``ann_threshold`` using store.py's ``ivf_nlist`` /
  ``default_nprobe`` and faiss' IVF training defaults (10 k-means iterations on 64·nlist points).
* larger N (1M): the product's ``compact()`` does not fit in memory here: it copies the flat index
  out with ``reconstruct_n``, builds the IVF beside it, then serialises the index to a bytes object
  and copies that again (and, called directly, still holds the copy of every vector ``add`` kept for
  the next checkpoint). Measured peak RSS: 3.9 GiB at 100k (0.76 GiB of vectors), 11.1 GiB at 300k
  (2.3 GiB) – 3.8-4.2x the vectors without that copy, ~5x with it – i.e. ~30-37 GiB at 1M on a 23.5 GiB
  machine. So the bench builds the flat store with ``store.add`` (exact search and the ground truth
  go through the product code), frees it, and builds *the index ``_to_ivf`` builds* – ``IndexIVFFlat``
  over an ``IndexFlatIP`` quantizer, inner product, ``nlist = ivf_nlist(N)``, the same training
  sample (``default_rng(0).choice(N, 64·nlist)``), faiss' default training, ``nprobe =
  default_nprobe(nlist)`` – from the vectors streamed from disk in chunks, then installs it in a
  ``VectorStore`` so searches go through ``VectorStore.search``. ``--train-niter`` /
  ``--train-per-list`` shrink that training for quick runs (``--validate-training`` then also
  measures the shrunk training at the product-path sizes, to compare).
* "grown" rows (``--grown-from``, default 16,384): an IVF converted once, at the first compaction
  past the threshold (``nlist = ivf_nlist(n0)`` cells trained on the first n0 vectors), then grown
  to N by appends and *never re-trained* – what store.py did before it re-trained indexes that
  outgrow their cells (``ivf_nlist(n) >= 4 * nlist`` at compaction).

``--nlist`` / ``--nprobe-default`` monkeypatch store.py's ``ivf_nlist`` / ``default_nprobe`` for a
what-if run (store.py itself is not edited).

Run:  .venv/bin/python bench/search_latency.py                 # 10k, 100k, 1M (~15 min, < 20 GB)
      .venv/bin/python bench/search_latency.py --sizes 10k     # quick check
Writes bench/out/search_latency.json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import faiss  # noqa: E402

from vrag_desktop.core.index import store as store_mod  # noqa: E402
from vrag_desktop.core.index.store import VectorStore  # noqa: E402

D = 2048
K = 10
CHUNK = 50_000


# ============================================================================ machine / contention
def machine_info() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    import numpy

    return {
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "ram_gib": mem_gib,
        "gpu": "none",
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "faiss": faiss.__version__,
        "faiss_omp_threads": faiss.omp_get_max_threads(),
        "platform": platform.platform(),
        "loadavg_at_start": os.getloadavg(),
    }


def _proc_stat() -> tuple[float, float]:
    """(busy seconds, steal seconds) summed over all CPUs since boot."""
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    v = [int(x) for x in parts]
    hz = os.sysconf("SC_CLK_TCK")
    user, nice, system, _idle, _iowait, irq, softirq = v[:7]
    steal = v[7] if len(v) > 7 else 0
    return (user + nice + system + irq + softirq) / hz, steal / hz


def _self_cpu() -> float:
    t = os.times()
    return t.user + t.system


class Phase:
    """Wall time, own CPU time, and the CPU other processes used meanwhile (shared machine)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> Phase:
        self.busy0, self.steal0 = _proc_stat()
        self.cpu0 = _self_cpu()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.t0
        busy, steal = _proc_stat()
        own = _self_cpu() - self.cpu0
        other = max(0.0, busy - self.busy0 - own)
        ncpu = os.cpu_count() or 1
        self.info = {
            "seconds": round(self.seconds, 3),
            "own_cpu_s": round(own, 2),
            "other_cpu_share": round(other / (ncpu * self.seconds), 3) if self.seconds > 0 else 0.0,
            "steal_s": round(steal - self.steal0, 2),
        }


def wait_quiet(max_wait: float, threshold: float = 0.15, window: float = 2.0) -> dict:
    """Wait (at most ``max_wait`` s) until other processes use < ``threshold`` of the CPUs."""
    t0 = time.perf_counter()
    share = 1.0
    while True:
        with Phase("probe") as p:
            time.sleep(window)
        share = p.info["other_cpu_share"]
        if share < threshold or time.perf_counter() - t0 >= max_wait:
            return {"waited_s": round(time.perf_counter() - t0, 1), "other_cpu_share": share}


def reset_peak_rss() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss_gib() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM"):
                return round(int(line.split()[1]) / 2**20, 2)
    except OSError:
        pass
    return float("nan")


def rss_gib() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS"):
                return round(int(line.split()[1]) / 2**20, 2)
    except OSError:
        pass
    return float("nan")


# ============================================================================ data
class MixtureGenerator:
    """Clustered, anisotropic, L2-normalised vectors that look like real embeddings.

    * an ``r``-dimensional subspace of R^d (random orthonormal basis) holds the signal, with a
      power-law spectrum (axis j has scale ∝ j^-alpha), so variance is concentrated in few directions;
    * two-level mixture: ``n_topics`` topic centres, ``n_centres`` cluster centres around them
      (spread ``centre_spread``), Zipf-distributed cluster sizes (exponent 0.8, so a few big clusters
      and a long tail), points around their centre with spread ``within``;
    * plus isotropic full-dimensional noise (``noise``) and a common mean direction (``mean_shift``),
      as real embedding spaces are a narrow cone (random pairs have cosine > 0);
    * then L2-normalised (the store uses inner product = cosine).

    Deterministic: ``sample(n, seed)`` with the same seed gives the same rows.
    """

    def __init__(
        self,
        d: int = D,
        r: int = 256,
        n_topics: int = 64,
        n_centres: int = 4096,
        alpha: float = 0.6,
        centre_spread: float = 0.55,
        within: float = 0.6,
        noise: float = 0.25,
        mean_shift: float = 0.6,
        seed: int = 1234,
    ) -> None:
        self.params = dict(
            d=d,
            r=r,
            n_topics=n_topics,
            n_centres=n_centres,
            alpha=alpha,
            centre_spread=centre_spread,
            within=within,
            noise=noise,
            mean_shift=mean_shift,
            seed=seed,
            cluster_size_zipf=0.8,
        )
        rng = np.random.default_rng(seed)
        q, _ = np.linalg.qr(rng.standard_normal((d, r)))
        self.basis = np.ascontiguousarray(q.T, dtype=np.float32)  # (r, d), orthonormal rows
        s = np.arange(1, r + 1, dtype=np.float64) ** -alpha
        s /= np.sqrt((s**2).mean())
        self.s = s.astype(np.float32)
        topics = rng.standard_normal((n_topics, r)) * s
        parent = rng.integers(0, n_topics, n_centres)
        self.centres = (topics[parent] + rng.standard_normal((n_centres, r)) * s * centre_spread).astype(
            np.float32
        )
        w = np.arange(1, n_centres + 1, dtype=np.float64) ** -0.8
        self.w = rng.permutation(w / w.sum())
        m = rng.standard_normal(d)
        self.mean = (m / np.linalg.norm(m)).astype(np.float32)
        self.d, self.r = d, r
        self.within, self.noise, self.mean_shift = within, noise, mean_shift
        self.scale = math.sqrt(r)

    def sample(self, n: int, seed: int, within_mult: float = 1.0, noise_mult: float = 1.0) -> np.ndarray:
        rng = np.random.default_rng(seed)
        c = rng.choice(len(self.centres), n, p=self.w)
        sub = rng.standard_normal((n, self.r), dtype=np.float32)
        sub *= self.s * (self.within * within_mult)
        sub += self.centres[c]
        x = sub @ self.basis
        del sub
        e = rng.standard_normal((n, self.d), dtype=np.float32)
        e *= self.noise * noise_mult * self.scale / math.sqrt(self.d)
        x += e
        del e
        x += self.mean * (self.mean_shift * self.scale)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return x


def chunk_seed(i: int) -> int:
    return 1_000_003 + i  # chunk i of the database; queries use other seeds


QUERY_SEED = 7
HARD_QUERY_SEED = 8
HARD = dict(within_mult=1.5, noise_mult=2.0)


class DiskVectors:
    """The database as raw float32 rows in a file, read back in chunks with plain reads (not mmap), so
    the rows this process holds are only the ones it asked for (page cache is not counted as ours)."""

    def __init__(self, path: Path, n: int) -> None:
        self.path, self.n = path, n

    def __len__(self) -> int:
        return self.n

    def read(self, a: int, b: int) -> np.ndarray:
        with open(self.path, "rb") as f:
            f.seek(a * D * 4)
            return np.fromfile(f, dtype=np.float32, count=(b - a) * D).reshape(b - a, D)

    def chunks(self):  # type: ignore[no-untyped-def]
        for a in range(0, self.n, CHUNK):
            b = min(self.n, a + CHUNK)
            yield a, b, self.read(a, b)

    def gather(self, idx: np.ndarray) -> np.ndarray:
        """Rows ``idx`` (sorted), chunk by chunk."""
        out = np.empty((len(idx), D), dtype=np.float32)
        pos = 0
        for a, b, x in self.chunks():
            sel = idx[(idx >= a) & (idx < b)]
            out[pos : pos + len(sel)] = x[sel - a]
            pos += len(sel)
        return out


def write_database(gen: MixtureGenerator, n: int, path: Path) -> DiskVectors:
    """Generate the database chunk by chunk into a file (keeps peak memory small)."""
    with open(path, "wb") as f:
        for i, a in enumerate(range(0, n, CHUNK)):
            b = min(n, a + CHUNK)
            gen.sample(b - a, chunk_seed(i)).tofile(f)
    return DiskVectors(path, n)


def data_stats(db: DiskVectors, q: np.ndarray, gt_scores: np.ndarray) -> dict:
    """Summary statistics that say how hard / realistic the set is."""
    rng = np.random.default_rng(0)
    rows = db.gather(np.sort(rng.choice(len(db), min(len(db), 4000), replace=False)))
    sims = (q[:500] @ rows.T).ravel()
    d_mean = np.sqrt(np.maximum(2 - 2 * (q[:500] @ rows.T), 0)).mean(1)
    d_nn = np.sqrt(np.maximum(2 - 2 * gt_scores[:500, 0], 0))
    sv = np.linalg.svd(rows - rows.mean(0), compute_uv=False) ** 2
    sv /= sv.sum()
    return {
        "query_random_cosine_mean": round(float(sims.mean()), 3),
        "query_random_cosine_p99": round(float(np.quantile(sims, 0.99)), 3),
        "query_top1_cosine_mean": round(float(gt_scores[:, 0].mean()), 3),
        "query_top10_cosine_mean": round(float(gt_scores[:, K - 1].mean()), 3),
        "relative_contrast": round(float(np.mean(d_mean / np.maximum(d_nn, 1e-9))), 2),
        "pca_energy_top10": round(float(sv[:10].sum()), 3),
        "pca_energy_top100": round(float(sv[:100].sum()), 3),
    }


# ============================================================================ measuring
def recall_at_k(found: np.ndarray, truth: np.ndarray) -> float:
    hits = [len(set(f.tolist()) & set(t.tolist())) for f, t in zip(found[:, :K], truth[:, :K], strict=True)]
    return float(np.sum(hits)) / (K * len(truth))


def measure(
    store: VectorStore,
    q: np.ndarray,
    gt: np.ndarray,
    qh: np.ndarray,
    gth: np.ndarray,
    nprobe: int | None,
    n_single: int,
    batched: bool = True,
) -> dict:
    # warm up (first touches of the lists, thread pools)
    for i in range(min(5, len(q))):
        store.search(q[i : i + 1], K, nprobe=nprobe)
    lat = np.empty(n_single)
    found = np.empty((n_single, K), dtype=np.int64)
    with Phase("single") as ph:
        for i in range(n_single):
            qi = q[i : i + 1]
            t0 = time.perf_counter_ns()
            _, ids = store.search(qi, K, nprobe=nprobe)
            lat[i] = (time.perf_counter_ns() - t0) / 1e6
            found[i] = ids[0]
    out: dict = {"recall_at_10": round(recall_at_k(found, gt[:n_single]), 4)}
    if batched:
        t0 = time.perf_counter()
        _, ids_b = store.search(q, K, nprobe=nprobe)
        batched_ms = (time.perf_counter() - t0) * 1000 / len(q)
        _, ids_h = store.search(qh, K, nprobe=nprobe)
        out |= {
            "recall_at_10_batched": round(recall_at_k(ids_b, gt), 4),
            "recall_at_10_hard_queries": round(recall_at_k(ids_h, gth), 4),
            "batched_ms_per_query": round(batched_ms, 3),
        }
    return out | {
        "p50_ms": round(float(np.percentile(lat, 50)), 3),
        "p90_ms": round(float(np.percentile(lat, 90)), 3),
        "p99_ms": round(float(np.percentile(lat, 99)), 3),
        "mean_ms": round(float(lat.mean()), 3),
        "n_single_queries": n_single,
        "single_phase": ph.info,
    }


def measure_quietest(args: argparse.Namespace, fn) -> dict:  # type: ignore[no-untyped-def]
    """Run a measurement; while other processes took more than ``--max-other-share`` of the CPUs
    during it, run it again (up to ``--max-attempts``) and keep the least disturbed attempt."""
    best = None
    for attempt in range(1, args.max_attempts + 1):
        wq = wait_quiet(min(args.wait_quiet, 30.0)) if args.wait_quiet else None
        r = fn()
        r["attempt"] = attempt
        if wq:
            r["wait_quiet"] = wq
        if best is None or r["single_phase"]["other_cpu_share"] < best["single_phase"]["other_cpu_share"]:
            best = r
        if best["single_phase"]["other_cpu_share"] <= args.max_other_share:
            break
    best["attempts"] = attempt
    return best


def exact_ground_truth(store: VectorStore, q: np.ndarray, qh: np.ndarray) -> tuple[np.ndarray, ...]:
    assert store.kind == "flat"
    s, gt = store.search(q, K)
    sh, gth = store.search(qh, K)
    return s, gt, sh, gth


def build_flat(db: DiskVectors, tmp: Path, drop_pending: bool) -> tuple[VectorStore, dict]:
    store = VectorStore(tmp / "index", D)
    with Phase("add") as ph:
        for a, b, x in db.chunks():
            store.add(np.arange(a, b, dtype=np.int64), x)
            del x
            if drop_pending:  # the second copy kept for the next checkpoint (see module docstring)
                store._pending_ids.clear()
                store._pending_vecs.clear()
    return store, ph.info


def build_ivf_streamed(
    db: DiskVectors, tmp: Path, niter: int | None, per_list: int
) -> tuple[VectorStore, dict]:
    """Build the index _to_ivf builds, streaming the vectors in chunks (see module docstring)."""
    n = len(db)
    nlist = store_mod.ivf_nlist(n)
    info: dict = {"nlist": nlist}
    rng = np.random.default_rng(0)  # same sample rule as VectorStore._to_ivf
    idx = np.arange(n) if n <= nlist * 64 else np.sort(rng.choice(n, nlist * 64, replace=False))
    if per_list < 64 and len(idx) > nlist * per_list:
        idx = np.sort(np.random.default_rng(1).choice(idx, nlist * per_list, replace=False))
    info["train_points"] = len(idx)
    quantizer = faiss.IndexFlatIP(D)
    ivf = faiss.IndexIVFFlat(quantizer, D, nlist, faiss.METRIC_INNER_PRODUCT)
    if niter:
        ivf.cp.niter = niter
    info["train_niter"] = int(ivf.cp.niter)
    with Phase("train") as ph:
        sample = db.gather(idx)
        ivf.train(sample)
        del sample
    info["train"] = ph.info
    with Phase("add") as ph:
        for a, b, x in db.chunks():
            ivf.add_with_ids(x, np.arange(a, b, dtype=np.int64))
            del x
    info["add"] = ph.info
    ivf.nprobe = store_mod.default_nprobe(nlist)
    store = VectorStore(tmp / "ivf", D)
    store._index = ivf  # searched through VectorStore.search (lock, nprobe handling) like the product
    return store, info


def build_ivf_grown(db: DiskVectors, tmp: Path, n0: int) -> tuple[VectorStore, dict]:
    """An IVF that *grew* to N without re-training: ``compact()`` switches to IVF at the first
    compaction past ``ann_threshold`` (e.g. after 32 checkpoints of 512 items = 16,384 vectors),
    training ``nlist = ivf_nlist(n0)`` cells on those first ``n0`` vectors; without a re-train every
    vector added afterwards goes into those few cells (store.py before it re-trained outgrown indexes)."""
    nlist = store_mod.ivf_nlist(n0)
    quantizer = faiss.IndexFlatIP(D)
    ivf = faiss.IndexIVFFlat(quantizer, D, nlist, faiss.METRIC_INNER_PRODUCT)
    info: dict = {"n0": n0, "nlist": nlist, "train_niter": int(ivf.cp.niter)}
    with Phase("train") as ph:
        first = db.read(0, n0)
        rng = np.random.default_rng(0)  # _to_ivf's sample rule on the first n0 vectors
        sample = first if n0 <= nlist * 64 else first[rng.choice(n0, nlist * 64, replace=False)]
        ivf.train(np.ascontiguousarray(sample))
        del first, sample
    info["train"] = ph.info
    with Phase("add") as ph:
        for a, b, x in db.chunks():
            ivf.add_with_ids(x, np.arange(a, b, dtype=np.int64))
            del x
    info["add"] = ph.info
    sizes = np.array([ivf.invlists.list_size(i) for i in range(nlist)])
    info["list_size_mean"] = round(float(sizes.mean()), 1)
    info["list_size_max"] = int(sizes.max())
    ivf.nprobe = store_mod.default_nprobe(nlist)
    store = VectorStore(tmp / "grown", D)
    store._index = ivf
    return store, info


def run_size(
    n: int, args: argparse.Namespace, gen: MixtureGenerator, q: np.ndarray, qh: np.ndarray, workdir: Path
) -> dict:
    res: dict = {"n": n, "d": D}
    tmp = Path(tempfile.mkdtemp(prefix=f"vs{n}-", dir=workdir))
    try:
        reset_peak_rss()
        print(f"\n## N = {n:,}: generating", flush=True)
        with Phase("generate") as ph:
            db = write_database(gen, n, tmp / "db.f32")
        res["generate"] = ph.info
        product_path = n <= args.product_path_max
        res["build_path"] = (
            "product: store.add + store.compact()"
            if product_path
            else (
                "store.add (flat, exact GT) then streamed _to_ivf-equivalent IVF build (memory/time limits)"
            )
        )
        store, res["add"] = build_flat(db, tmp, drop_pending=not product_path)
        print(
            f"   flat store: {store.ntotal:,} vectors, rss {rss_gib()} GiB; exact ground truth ...",
            flush=True,
        )
        with Phase("gt") as ph:
            gt_s, gt, _, gth = exact_ground_truth(store, q, qh)
        res["ground_truth"] = ph.info
        res["data_stats"] = data_stats(db, q, gt_s)
        print(f"   data: {res['data_stats']}", flush=True)
        # exact search latency: what a flat store would cost at this N
        est_s = n * D * 4 / 10e9  # ~10 GB/s scan: bound this part to ~10 s
        n_flat = int(min(args.queries, max(10, 10 / est_s)))
        res["flat"] = measure_quietest(
            args, lambda: measure(store, q, gt, qh, gth, None, n_flat, batched=False)
        )
        res["flat"] |= {
            "kind": "flat",
            "recall_at_10_hard_queries": 1.0,
            "batched_ms_per_query": round(res["ground_truth"]["seconds"] * 1000 / (len(q) + len(qh)), 3),
        }
        print(f"   flat exact: p50 {res['flat']['p50_ms']} ms", flush=True)

        rows = []
        if product_path:
            peak_flat = peak_rss_gib()
            with Phase("compact") as ph:
                reset_peak_rss()
                rss0 = rss_gib()
                store.compact()
            res["compact"] = ph.info | {"rss_before_gib": rss0, "peak_rss_gib": peak_rss_gib()}
            res["peak_rss_flat_phase_gib"] = peak_flat
            builds = [("product", lambda st=store: st)]
            if store.kind == "ivf" and args.validate_training:
                # same index with the reduced training used at 1M, to measure its effect on recall
                builds.append(("reduced training", lambda: _streamed(res, "reduced_training_build")))
            del store
        else:
            del store
            gc.collect()
            builds = [("streamed", lambda: _streamed(res, "ivf_build"))]
        if args.grown_from and args.grown_from < n:
            builds.append((f"grown from {args.grown_from // 1000}k", lambda: _grown(res)))

        def _streamed(res: dict, key: str) -> VectorStore:
            print(f"   building IVF (streamed), rss {rss_gib()} GiB ...", flush=True)
            st, res[key] = build_ivf_streamed(db, tmp, args.train_niter, args.train_per_list)
            return st

        def _grown(res: dict) -> VectorStore:
            print(
                f"   building IVF as grown from {args.grown_from:,} vectors, rss {rss_gib()} GiB ...",
                flush=True,
            )
            st, res["grown_build"] = build_ivf_grown(db, tmp, args.grown_from)
            return st

        for label, make in builds:
            st = make()
            if st.kind != "ivf":
                rows.append({"build": label, "kind": "flat", "nprobe": None, **res["flat"]})
                continue
            ivf = faiss.extract_index_ivf(st._index)
            nlist = int(ivf.nlist)
            dflt = store_mod.default_nprobe(nlist)
            sweep = sorted({p for p in args.nprobe if p <= nlist} | {dflt})
            n_q = args.queries
            if label == "reduced training":
                sweep = [p for p in sweep if p in (4, 8, dflt)] or [dflt]
            elif label.startswith("grown"):
                sweep = sorted({p for p in (4, 8) if p <= nlist} | {dflt})
                n_q = min(args.queries, 300)  # slow (large cells): fewer single queries
            for p in sweep:
                r = measure_quietest(args, lambda p=p, st=st, n_q=n_q: measure(st, q, gt, qh, gth, p, n_q))
                r |= {"build": label, "kind": "ivf", "nlist": nlist, "nprobe": p, "default": p == dflt}
                rows.append(r)
                print(
                    f"   {label:>16} nlist {nlist} nprobe {p:4d}{'*' if p == dflt else ' '} recall@10 "
                    f"{r['recall_at_10']:.3f} (hard {r['recall_at_10_hard_queries']:.3f}) p50 {r['p50_ms']:.2f} ms "
                    f"p99 {r['p99_ms']:.2f} ms batched {r['batched_ms_per_query']:.3f} ms/q",
                    flush=True,
                )
            del st, ivf
            gc.collect()
        res["rows"] = rows
        res["peak_rss_gib"] = max(peak_rss_gib(), res.get("peak_rss_flat_phase_gib", 0.0))
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _source(fn) -> str:  # type: ignore[no-untyped-def]
    import inspect

    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return repr(fn)


def parse_size(s: str) -> int:
    s = s.strip().lower()
    mult = {"k": 1_000, "m": 1_000_000}.get(s[-1], 1)
    return int(float(s[:-1] if s[-1] in "km" else s) * mult)


def best_under_target(rows: list[dict], recall: float) -> dict | None:
    ok = [
        r
        for r in rows
        if r.get("kind") == "ivf" and r["build"] in ("product", "streamed") and r["recall_at_10"] >= recall
    ]
    return min(ok, key=lambda r: r["p50_ms"]) if ok else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10k,100k,1M")
    ap.add_argument(
        "--queries", type=int, default=1000, help="held-out queries (single-query latency + recall)"
    )
    ap.add_argument("--hard-queries", type=int, default=300)
    ap.add_argument("--nprobe", default="1,2,4,8,16,32,64,128", help="nprobe sweep (default_nprobe is added)")
    ap.add_argument(
        "--product-path-max",
        type=parse_size,
        default=100_000,
        help="largest N built with the product's own store.compact()",
    )
    ap.add_argument(
        "--train-niter",
        type=int,
        default=None,
        help="k-means iterations for the streamed (1M) build (default: faiss' default, as the product)",
    )
    ap.add_argument(
        "--train-per-list",
        type=int,
        default=64,
        help="training points per cell for the streamed build (64 = the product's sample)",
    )
    ap.add_argument(
        "--validate-training",
        action="store_true",
        help="at product-path sizes also build with --train-niter/--train-per-list, to compare",
    )
    ap.add_argument(
        "--grown-from",
        type=parse_size,
        default=16_384,
        help="also measure an IVF trained once at this size and grown to N without re-training "
        "(0 = skip), for every N larger than this",
    )
    ap.add_argument("--nlist", type=int, default=None, help="what-if: monkeypatch store.ivf_nlist to this")
    ap.add_argument(
        "--nprobe-default", type=int, default=None, help="what-if: monkeypatch store.default_nprobe"
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--max-other-share",
        type=float,
        default=0.05,
        help="a latency measurement during which other processes used more of the CPUs than "
        "this is repeated (the machine may be shared); the least disturbed attempt is kept",
    )
    ap.add_argument("--max-attempts", type=int, default=3)
    ap.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        help="wait up to this many seconds for other processes to go quiet before each size",
    )
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "search_latency.json"))
    args = ap.parse_args()
    args.nprobe = [int(x) for x in args.nprobe.split(",") if x]
    sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    faiss.omp_set_num_threads(args.threads)
    if args.nlist:
        store_mod.ivf_nlist = lambda n, _v=args.nlist: _v  # type: ignore[assignment]
    if args.nprobe_default:
        store_mod.default_nprobe = lambda nlist, _v=args.nprobe_default: _v  # type: ignore[assignment]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    workdir = out.parent / "tmp"
    workdir.mkdir(exist_ok=True)

    gen = MixtureGenerator()
    q = gen.sample(args.queries, QUERY_SEED)
    qh = gen.sample(args.hard_queries, HARD_QUERY_SEED, **HARD)
    result = {
        "benchmark": "search_latency",
        "machine": machine_info(),
        "k": K,
        "ann_threshold": store_mod.DEFAULT_ANN_THRESHOLD,
        # the rules measured (store.py changes; keep what this run used)
        "store_rules": {
            "ivf_nlist": _source(store_mod.ivf_nlist),
            "default_nprobe": _source(store_mod.default_nprobe),
        },
        "what_if": {"nlist": args.nlist, "nprobe_default": args.nprobe_default},
        "args": {k: v for k, v in vars(args).items() if k != "out"},
        "generator": {
            "description": MixtureGenerator.__doc__,
            "params": gen.params,
            "queries": f"{args.queries} held-out draws (seed {QUERY_SEED}); never database rows",
            "hard_queries": f"{args.hard_queries} draws with within-cluster spread x{HARD['within_mult']} and "
            f"isotropic noise x{HARD['noise_mult']} (seed {HARD_QUERY_SEED})",
        },
        "target": {"n": 1_000_000, "p50_ms_max": 5.0, "recall_at_10_min": 0.95},
        "sizes": [],
    }
    t_start = time.perf_counter()
    for n in sizes:
        if args.wait_quiet:
            wq = wait_quiet(args.wait_quiet)
            print(
                f"(waited {wq['waited_s']} s for a quiet machine; others now use {wq['other_cpu_share']:.0%})"
            )
        t0 = time.perf_counter()
        r = run_size(n, args, gen, q, qh, workdir)
        if args.wait_quiet:
            r["wait_quiet"] = wq
        r["total_seconds"] = round(time.perf_counter() - t0, 1)
        result["sizes"].append(r)
        out.write_text(json.dumps(result, indent=2))
    result["total_seconds"] = round(time.perf_counter() - t_start, 1)
    out.write_text(json.dumps(result, indent=2))
    print_table(result)
    print(f"\nwrote {out}")


def print_table(result: dict) -> None:
    print(
        "\n| N | index | nlist | nprobe | recall@10 | recall@10 (hard q) | p50 ms | p99 ms | batched ms/q "
        "| others' CPU |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in result["sizes"]:
        f = s["flat"]
        print(
            f"| {s['n']:,} | flat (exact, before compact) | – | – | 1.000 | 1.000 | {f['p50_ms']:.2f} | "
            f"{f['p99_ms']:.2f} | {f['batched_ms_per_query']:.3f} | {f['single_phase']['other_cpu_share']:.0%} |"
        )
        for r in s["rows"]:
            if r["kind"] != "ivf":
                continue
            label = "IVFFlat" + ("" if r["build"] in ("product", "streamed") else f" ({r['build']})")
            mark = " (default)" if r["default"] else ""
            print(
                f"| {s['n']:,} | {label} | {r['nlist']} | {r['nprobe']}{mark} | {r['recall_at_10']:.3f} | "
                f"{r['recall_at_10_hard_queries']:.3f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                f"{r['batched_ms_per_query']:.3f} | {r['single_phase']['other_cpu_share']:.0%} |"
            )
    print(
        "\n| N | build path | generate s | add s | compact/IVF build s | peak RSS GiB "
        "| others' CPU share (single-query phase, median) |"
    )
    print("|---|---|---|---|---|---|---|")
    for s in result["sizes"]:
        if "compact" in s:
            b = s["compact"]["seconds"]
        elif "ivf_build" in s:
            b = round(s["ivf_build"]["train"]["seconds"] + s["ivf_build"]["add"]["seconds"], 1)
        else:
            b = "–"
        shares = [r["single_phase"]["other_cpu_share"] for r in s["rows"]]
        share = f"{np.median(shares):.0%}" if shares else "–"
        print(
            f"| {s['n']:,} | {s['build_path']} | {s['generate']['seconds']:.0f} | {s['add']['seconds']:.1f} | {b} | "
            f"{s['peak_rss_gib']} | {share} |"
        )
    for s in result["sizes"]:
        best = best_under_target(s["rows"], 0.95)
        if best:
            print(
                f"\nN={s['n']:,}: fastest setting with recall@10 >= 0.95: "
                f"nlist {best['nlist']} nprobe {best['nprobe']} "
                f"-> p50 {best['p50_ms']:.2f} ms, p99 {best['p99_ms']:.2f} ms"
            )
        elif any(r.get("nlist") for r in s["rows"]):
            print(f"\nN={s['n']:,}: no swept setting reaches recall@10 >= 0.95")
        else:
            print(f"\nN={s['n']:,}: below the IVF threshold; the store stays exact (flat)")


if __name__ == "__main__":
    main()
