"""The store's compressed base (issue 33 item 5): it takes over past its size threshold, answers
like exact search, stays exact while too few vectors to train it, refuses a compaction that does
not fit in memory before writing anything, and survives kill -9 mid-build."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from vrag_desktop.core.index.compressed import CompactionRefused, choose_spec
from vrag_desktop.core.index.store import VectorStore

DIM = 48
N = 6000  # ivf_nlist(6000)//2 = 64 cells: 2,496 training vectors needed


def _clustered(n: int, seed: int = 0) -> np.ndarray:
    """Clustered, normalised vectors (like embeddings; isotropic noise has no neighbours)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIM)).astype(np.float32)
    x = centres[rng.integers(0, 40, n)] + 0.5 * rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _recall(store: VectorStore, x: np.ndarray, ids: np.ndarray, q: np.ndarray) -> float:
    _, found = store.search(q, 10)
    exact = ids[np.argsort(-(q @ x.T), axis=1)[:, :10]]
    return float(
        np.mean([len(set(f) & set(e)) / 10 for f, e in zip(found.tolist(), exact.tolist(), strict=True)])
    )


def _listing(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def test_compressed_base_takes_over_and_answers_like_exact_search(tmp_path: Path) -> None:
    x = _clustered(N + 300)
    ids = np.arange(10, 10 + len(x), dtype=np.int64) * 3  # ids are not row numbers
    store = VectorStore(tmp_path, DIM, compress_threshold=1000)
    store.add(ids[:N], x[:N])
    store.checkpoint()
    assert store.kind == "flat"
    store.compact()
    assert store.kind == "compressed" and store.ntotal == N
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["base-00000002.faiss", "full-00000002.f32", "store.json"]
    q = _clustered(50, seed=1)
    assert _recall(store, x[:N], ids[:N], q) >= 0.95
    # Added after the base: searched exactly beside it, durable as a segment, seen by a reader.
    store.add(ids[N:], x[N:])
    store.checkpoint()
    reader = VectorStore(tmp_path, DIM, read_only=True)
    assert reader.kind == "compressed" and reader.ntotal == N + 300
    assert _recall(reader, x, ids, q) >= 0.95
    _, top = reader.search(x[N + 5], 1)
    assert top[0, 0] == ids[N + 5]
    assert np.allclose(reader.vectors([ids[7], ids[N + 7]]), x[[7, N + 7]])
    # Removed: gone at once and after the compaction the checkpoint runs.
    store.remove([int(ids[3]), int(ids[N + 3])])
    store.checkpoint()
    assert store.kind == "compressed" and store.ntotal == N + 298
    reader.refresh()
    assert reader.ntotal == N + 298 and ids[3] not in reader.ids() and ids[N + 3] not in reader.ids()
    _, top = reader.search(x[3], 3)
    assert ids[3] not in top[0]


def test_too_few_vectors_to_train_stays_exact_until_there_are_enough(tmp_path: Path) -> None:
    x = _clustered(N)
    need = choose_spec(500, DIM).min_train()
    assert need == 16 * 39  # the fewest cells, 39 training vectors each
    store = VectorStore(tmp_path, DIM, compress_threshold=1000)
    store.add(np.arange(500), x[:500])
    store.compact()
    assert store.kind == "flat"
    assert store.compress_pending == f"500 vectors are too few to train a compressed index ({need} needed)"
    assert _recall(store, x[:500], np.arange(500), _clustered(20, seed=2)) == 1.0
    store.add(np.arange(500, N), x[500:])
    store.compact()
    assert store.kind == "compressed" and store.compress_pending is None and store.ntotal == N


def test_compaction_that_does_not_fit_in_memory_is_refused_before_it_starts(tmp_path: Path) -> None:
    x = _clustered(N)
    avail = 1 << 20
    store = VectorStore(tmp_path, DIM, compress_threshold=1000, memory=lambda: avail)
    store.add(np.arange(N), x)
    store.checkpoint()
    before = _listing(tmp_path)
    with pytest.raises(CompactionRefused) as err:
        store.compact()
    msg = str(err.value)
    assert "needs about 0." in msg and "only 0.00 GiB is available; nothing was changed" in msg
    assert _listing(tmp_path) == before  # nothing written, nothing removed
    assert store.kind == "flat" and store.ntotal == N
    avail = 64 << 30
    store.compact()
    assert store.kind == "compressed"


CHILD = """
import sys, time
import numpy as np
from vrag_desktop.core.index.store import VectorStore
x = np.load(sys.argv[2])
store = VectorStore(sys.argv[1], x.shape[1], compress_threshold=1000)
store.add(np.arange(len(x)), x)
store.checkpoint()
for phase, done, total in store.compact_steps():
    if phase == "encode":
        print("mid-build", flush=True)
        time.sleep(60)
"""


def test_kill_9_during_the_compressed_build_loses_nothing_and_resumes(tmp_path: Path) -> None:
    x = _clustered(N)
    np.save(tmp_path / "x.npy", x)
    folder = tmp_path / "index"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(folder), str(tmp_path / "x.npy")], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "mid-build"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert any(p.name.startswith(".base-") or p.name.startswith("full-") for p in folder.iterdir())
    store = VectorStore(folder, DIM, compress_threshold=1000)  # the writer reopens: old catalogue
    assert store.kind == "flat" and store.ntotal == N
    assert sorted(p.name for p in folder.iterdir()) == ["seg-00000001.npz", "store.json"]  # leftovers gone
    t = time.perf_counter()
    store.compact()
    assert store.kind == "compressed" and store.ntotal == N
    assert time.perf_counter() - t < 30
    assert _recall(VectorStore(folder, DIM, read_only=True), x, np.arange(N), _clustered(30, seed=3)) >= 0.95


def _compressed_with_a_segment(folder: Path) -> np.ndarray:
    """A compressed base of N vectors and a segment of 5 more (ids N..N+4); returns the base's."""
    x = _clustered(N)
    store = VectorStore(folder, DIM, compress_threshold=1000)
    store.add(np.arange(N), x)
    store.compact()
    store.add(np.arange(N, N + 5), x[:5])
    store.checkpoint()
    return x


def _damage_full_vectors(folder: Path) -> Path:
    full = next(folder.glob("full-*.f32"))
    with open(full, "r+b") as f:
        f.seek(4000)
        f.write(b"\xff\xff")
    return full


def test_damaged_full_vectors_drop_their_base_and_are_reported(tmp_path: Path) -> None:
    _compressed_with_a_segment(tmp_path)
    full = _damage_full_vectors(tmp_path)
    reader = VectorStore(tmp_path, DIM, read_only=True)
    problems = {d.file: d.problem for d in reader.damage}
    assert problems[full.name] == "checksum mismatch (damaged on disk)"
    assert problems["base-00000001.faiss"].startswith(f"its full vectors ({full.name}) are checksum mismatch")
    assert reader.ntotal == 5  # only the segment: the corpus re-embeds the rest
    writer = VectorStore(tmp_path, DIM, compress_threshold=1000)
    assert writer.ntotal == 5 and {d.file for d in writer.repaired} == {full.name, "base-00000001.faiss"}
    assert sorted(p.name for p in (tmp_path / "damaged").iterdir())[0].endswith("base-00000001.faiss")


def test_a_reader_checks_large_full_vectors_in_the_background_and_takes_in_the_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past LATE_CHECK_BYTES a reader searches at once and checks the full vectors beside it; damage
    found so is taken in by the next search (reported, left out) or by an integrity check, which
    waits for the check. A whole file passes unnoticed; a writer still checks before it opens."""
    from vrag_desktop.core.index import snapshot

    monkeypatch.setattr(snapshot, "LATE_CHECK_BYTES", 0)
    x = _compressed_with_a_segment(tmp_path)
    whole = VectorStore(tmp_path, DIM, read_only=True)
    whole.finish_checks()
    assert whole.damage == [] and whole.ntotal == N + 5 and whole._late_check is None
    full = _damage_full_vectors(tmp_path)
    reader = VectorStore(tmp_path, DIM, read_only=True)
    assert reader.damage == [] and reader.ntotal == N + 5  # opened without reading the file through
    check = reader._late_check
    assert check is not None
    check.join()
    _, ids = reader.search(x[:1], 3)  # the next search takes in what the check found
    problems = {d.file: d.problem for d in reader.damage}
    assert problems[full.name] == "checksum mismatch (damaged on disk)"
    assert reader.ntotal == 5 and set(ids[0].tolist()) <= set(range(N, N + 5)) | {-1}
    other = VectorStore(tmp_path, DIM, read_only=True)
    other.finish_checks()
    assert full.name in {d.file for d in other.damage} and other.ntotal == 5
    closing = VectorStore(tmp_path, DIM, read_only=True)
    check = closing._late_check
    assert check is not None
    closing.stop_checks()  # its store closed: the check stops and takes nothing in
    check.join(timeout=30)
    assert not check.is_alive() and closing._late_check is None
    writer = VectorStore(tmp_path, DIM, compress_threshold=1000)  # checks first, whatever the size
    assert writer.ntotal == 5 and full.name in {d.file for d in writer.repaired}


@pytest.mark.parametrize("fadvise", [True, False], ids=["posix_fadvise", "without it"])
def test_full_vectors_read_scattered_and_dense_rows_with_or_without_fadvise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fadvise: bool
) -> None:
    """Re-scoring reads scattered rows (each queued with a read hint first) or one dense range; the
    hints are only hints: where the system has none (Windows, macOS) the rows read the same."""
    from vrag_desktop.core.index.compressed import FullVectors

    if not fadvise:
        monkeypatch.delattr(os, "posix_fadvise", raising=False)
    x = _clustered(1000, seed=3)
    path = tmp_path / "full.f32"
    x.tofile(path)
    full = FullVectors(path, DIM, np.arange(1000, dtype=np.int64) * 2)  # ids 0, 2, 4, …
    try:
        scattered = np.array([917, 3, 500, 42, 999, 0])
        assert np.array_equal(full.rows(scattered), x[scattered])
        dense = np.array([101, 100, 103, 102])
        assert np.array_equal(full.rows(dense), x[dense])
        assert full.positions(np.array([4, 5, 1998])).tolist() == [2, -1, 999]
    finally:
        full.close()
