"""Every way a listed index file can be unusable, for the base and for a segment alike: missing,
unreadable, truncated, longer than written, overwritten (checksum), and not an index at all (format 1,
no checksum). Pins the exact damage a reader reports (and that it writes nothing), what a writer
repairs on open, and that a reader whose snapshot moved under it re-reads instead of reporting
damage. Why: base and segments share one path in core/index/snapshot.py, checked here case by case.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

DIM = 8
META = "store.json"


def _store(folder: Path) -> tuple[str, str]:
    """A format-2 store: a base of 20 vectors (ids 0-19) and a segment of 10 (ids 20-29)."""
    from vrag_desktop.core.index.store import VectorStore

    v = np.random.default_rng(0).normal(size=(30, DIM)).astype(np.float32)
    s = VectorStore(folder, DIM)
    s.add(np.arange(20), v[:20])
    s.checkpoint()
    s.compact()
    s.add(np.arange(20, 30), v[20:])
    s.checkpoint()
    meta = json.loads((folder / META).read_text())
    return meta["base"]["file"], meta["segments"][0]["file"]


def _truncate(p: Path) -> str:
    size = p.stat().st_size
    os.truncate(p, size // 2)
    return f"truncated: {size // 2} of {size} bytes"


def _lengthen(p: Path) -> str:
    size = p.stat().st_size
    with open(p, "ab") as f:
        f.write(b"\0" * 7)
    return f"longer than written: {size + 7} of {size} bytes"


def _overwrite(p: Path) -> str:
    with open(p, "r+b") as f:
        f.seek(p.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    return "checksum mismatch (damaged on disk)"


def _remove(p: Path) -> str:
    p.unlink()
    return "missing"


def _loop(p: Path) -> str:
    """A symlink to itself: stat and open fail with ELOOP (as root, unlike a chmod 000 file)."""
    p.unlink()
    os.symlink(p.name, p)
    return "cannot be read (Too many levels of symbolic links)"


DAMAGE: dict[str, Callable[[Path], str]] = {
    "missing": _remove,
    "unreadable": _loop,
    "truncated": _truncate,
    "longer": _lengthen,
    "overwritten": _overwrite,
}


def _snapshot(folder: Path) -> dict[str, object]:
    return {
        p.name: (os.readlink(p) if p.is_symlink() else p.read_bytes())
        for p in folder.iterdir()
        if p.is_symlink() or p.is_file()
    }


@pytest.mark.parametrize("which", ["base", "segment"])
@pytest.mark.parametrize("how", list(DAMAGE))
def test_each_damage_is_reported_by_a_reader_and_repaired_by_a_writer(
    tmp_path: Path, which: str, how: str
) -> None:
    from vrag_desktop.core.index.store import Damage, VectorStore

    base, seg = _store(tmp_path)
    name, vectors, left = (base, 20, 10) if which == "base" else (seg, 10, 20)
    problem = DAMAGE[how](tmp_path / name)
    before = _snapshot(tmp_path)
    reader = VectorStore(tmp_path, DIM, read_only=True)
    assert reader.damage == [Damage(name, problem, vectors)]
    assert reader.ntotal == left
    assert _snapshot(tmp_path) == before  # a reader never writes
    writer = VectorStore(tmp_path, DIM)
    assert writer.repaired == [Damage(name, problem, vectors)] and writer.ntotal == left
    assert name not in writer.files() and not os.path.lexists(tmp_path / name)
    assert VectorStore(tmp_path, DIM, read_only=True).damage == []


@pytest.mark.parametrize("which", ["base", "segment"])
def test_format1_file_that_is_not_an_index_is_reported(tmp_path: Path, which: str) -> None:
    """No size or checksum to catch it: reading it is what fails, with its own message."""
    import faiss

    from vrag_desktop.core.index.store import VectorStore

    v = np.random.default_rng(1).normal(size=(30, DIM)).astype(np.float32)
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(DIM))
    index.add_with_ids(v[:20], np.arange(20))
    faiss.write_index(index, str(tmp_path / "base.faiss"))
    np.savez(tmp_path / "seg-00000001.npz", ids=np.arange(20, 30), vecs=v[20:])
    (tmp_path / META).write_text(json.dumps({"dim": DIM, "format": 1}))
    name = "base.faiss" if which == "base" else "seg-00000001.npz"
    (tmp_path / name).write_bytes(b"not an index at all")
    reader = VectorStore(tmp_path, DIM, read_only=True)
    [found] = reader.damage
    want = "not a readable FAISS index (" if which == "base" else "not a readable segment ("
    assert found.file == name and found.problem.startswith(want) and found.vectors is None
    assert reader.ntotal == (10 if which == "base" else 20)


@pytest.mark.parametrize("gone", ["base", "segment"])
def test_reader_whose_snapshot_moved_rereads_instead_of_reporting_damage(tmp_path: Path, gone: str) -> None:
    """A writer's compaction removes the files a reader's catalogue lists: missing, but moved."""
    import dataclasses

    from vrag_desktop.core.index.store import VectorStore

    base, seg = _store(tmp_path)
    reader = VectorStore(tmp_path, DIM, read_only=True)
    old = reader._cat if gone == "base" else dataclasses.replace(reader._cat, base=None)
    writer = VectorStore(tmp_path, DIM)
    writer.compact()
    assert not (tmp_path / base).exists() and not (tmp_path / seg).exists()
    index, loaded = reader._load(old)  # the load a reader starts just before the compaction commits
    assert reader.damage == [] and index.ntotal == 30 and loaded == set(writer.files())


def test_reader_whose_base_changed_under_it_rereads_instead_of_calling_it_unreadable(tmp_path: Path) -> None:
    """The base a reader's catalogue lists is there but not as listed (a writer's commit came in
    between): that is a moved snapshot too, not "not a readable FAISS index"."""
    import dataclasses

    from vrag_desktop.core.index.store import VectorStore

    _store(tmp_path)
    reader = VectorStore(tmp_path, DIM, read_only=True)
    writer = VectorStore(tmp_path, DIM)
    writer.compact()
    new = VectorStore(tmp_path, DIM, read_only=True)._cat
    assert new.base is not None
    stale = dataclasses.replace(new.base, size=(new.base.size or 0) + 1)
    old = dataclasses.replace(reader._cat, base=stale, segments=())
    index, loaded = reader._load(old)  # the load a reader starts just before the compaction commits
    assert reader.damage == [] and index.ntotal == 30 and loaded == set(writer.files())
