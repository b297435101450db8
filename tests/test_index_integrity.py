"""Damage that is detected and repaired (issue 27, items 4 and 12): checksummed index files, a
truncated or overwritten base, a truncated segment, a truncated manifest, a manifest of a newer
schema, a read-only data directory and a full disk — each through the real command line, each with a
clear message (never a traceback), one corpus's damage never breaking another's listing or search,
and ``corpus check --repair`` bringing back exactly what a clean build gives.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import cli, drain, index_paths

META = "store.json"

QUERIES = [
    "apples and orchards",
    "deep sea submarines",
    "volcanic eruptions",
    "desert camels",
    "antarctic penguins",
    "glaciers and fjords",
]
PAGES = [
    "Apple orchards bloom in spring; pickers arrive in September.",
    "Submarines dive deep under the polar ice with sonar.",
    "Volcanic eruptions spread ash and lava across the island.",
    "Camel caravans cross the Sahara desert at night.",
    "Penguins huddle together through the Antarctic winter.",
    "Glaciers carve fjords into the granite over millennia.",
    "Honeybees dance to tell the hive where the flowers are.",
    "Lighthouses guide ships past the rocky northern coast.",
]


def _corpus(library, minilm, make_pdf, tmp_path: Path, name: str = "c"):  # type: ignore[no-untyped-def]
    """A corpus of two PDFs whose vectors sit in a compacted base and one segment after it."""
    folder = tmp_path / f"docs-{name}"
    make_pdf("first.pdf", PAGES[:5], folder=folder)
    corpus, _, _ = index_paths(library, name, [folder], minilm)
    corpus.store().compact()
    make_pdf("second.pdf", PAGES[5:], folder=folder)
    drain(corpus.scan())
    drain(corpus.build(minilm))
    files = corpus.store().files()
    corpus.close()
    base = next(f for f in files if f.startswith("base-"))
    seg = next(f for f in files if f.startswith("seg-"))
    return library.corpus_dir(name) / "index", base, seg


def _top5(data: Path, minilm, corpus: str = "c") -> list[list[str]]:  # type: ignore[no-untyped-def]
    """The dense top 5 of every query (in-process: a reader, like the CLI's search)."""
    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.search import SearchEngine

    engine = SearchEngine(Library(data), [corpus], minilm, hybrid=False)
    try:
        return [[h.name for h in engine.search(q, 5)] for q in QUERIES]
    finally:
        engine.close()


def _no_traceback(*procs: subprocess.CompletedProcess[str]) -> None:
    for p in procs:
        assert "Traceback" not in p.stderr + p.stdout, p.stderr


def test_catalogue_lists_every_file_with_its_checksum(tmp_path: Path) -> None:
    from vrag_desktop.core.index.store import VectorStore, file_checksum

    v = np.random.default_rng(0).normal(size=(40, 8)).astype(np.float32)
    s = VectorStore(tmp_path, 8)
    s.add(np.arange(20), v[:20])
    s.checkpoint()
    s.compact()
    s.add(np.arange(20, 40), v[20:])
    s.checkpoint()
    meta = json.loads((tmp_path / META).read_text())
    assert meta["format"] == 2 and meta["base"]["vectors"] == 20 and meta["segments"][0]["vectors"] == 20
    for entry in [meta["base"], *meta["segments"]]:
        path = tmp_path / entry["file"]
        assert path.stat().st_size == entry["bytes"] and file_checksum(path) == entry["xxh3_128"]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == sorted(
        [META, meta["base"]["file"], meta["segments"][0]["file"]]
    )


def test_format1_store_is_read_and_upgraded_by_its_writer(tmp_path: Path) -> None:
    """An index written before checksums (base.faiss + seg-*.npz) loads as it is; a reader leaves it
    alone, the next writer upgrades it."""
    import faiss

    from vrag_desktop.core.index.store import VectorStore

    v = np.random.default_rng(1).normal(size=(30, 8)).astype(np.float32)
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(8))
    index.add_with_ids(v[:20], np.arange(20))
    faiss.write_index(index, str(tmp_path / "base.faiss"))
    np.savez(tmp_path / "seg-00000001.npz", ids=np.arange(20, 30), vecs=v[20:])
    (tmp_path / META).write_text(json.dumps({"dim": 8, "format": 1}))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert VectorStore(tmp_path, 8, read_only=True).ntotal == 30
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    writer = VectorStore(tmp_path, 8)
    assert writer.ntotal == 30 and not writer.repaired
    meta = json.loads((tmp_path / META).read_text())
    assert meta["format"] == 2 and meta["base"]["file"] == "base.faiss"
    assert VectorStore(tmp_path, 8, read_only=True).ntotal == 30


@pytest.mark.parametrize("damage", ["truncated", "overwritten"])
def test_damaged_base_is_detected_reported_and_repaired(
    library, minilm, make_pdf, tmp_path: Path, damage: str
) -> None:  # type: ignore[no-untyped-def]
    data = library.data_dir
    index_dir, base, _ = _corpus(library, minilm, make_pdf, tmp_path)
    clean = _top5(data, minilm)
    path = index_dir / base
    raw = bytearray(path.read_bytes())
    if damage == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    else:  # 256 bytes overwritten in the middle of the vectors: same size, different content
        mid = len(raw) // 2
        raw[mid : mid + 256] = bytes(256)
        path.write_bytes(bytes(raw))
    found = cli("search", QUERIES[0], "--corpus", "c", "-k", "5", data_dir=data)
    assert found.returncode == 0, found.stderr
    assert "is damaged" in found.stderr and base in found.stderr and "corpus check" in found.stderr
    assert path.read_bytes() != b"" and len(path.read_bytes()) == (
        len(raw) // 2 if damage == "truncated" else len(raw)
    )
    listed = cli("corpus", "list", data_dir=data)
    if damage == "truncated":  # a listing sees sizes; checksums need every byte (check, search)
        assert "DAMAGED" in listed.stdout and "truncated" in listed.stdout
    checked = cli("corpus", "check", "c", data_dir=data)
    assert checked.returncode == 1
    why = "truncated" if damage == "truncated" else "checksum mismatch"
    assert why in checked.stdout and "--repair" in checked.stdout
    repaired = cli("corpus", "check", "c", "--repair", "--quiet", data_dir=data)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "repaired:" in repaired.stderr and "After repair: no damage found." in repaired.stdout
    _no_traceback(found, listed, checked, repaired)
    assert _top5(data, minilm) == clean
    kept = list((index_dir / "damaged").iterdir())
    assert len(kept) == 1 and kept[0].name.endswith(base)  # the damaged file, kept for a person to see


def test_truncated_segment_is_never_deleted_by_a_reader_and_the_next_index_repairs_it(
    library, minilm, make_pdf, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    data = library.data_dir
    index_dir, _, seg = _corpus(library, minilm, make_pdf, tmp_path)
    clean = _top5(data, minilm)
    path = index_dir / seg
    path.write_bytes(path.read_bytes()[:100])
    before = {p.name: p.read_bytes() for p in index_dir.iterdir() if p.is_file()}
    found = cli("search", "glaciers and fjords", "--corpus", "c", "-k", "8", "--json", data_dir=data)
    assert found.returncode == 0 and "truncated" in found.stderr
    from vrag_desktop.core.search import SearchEngine

    engine = SearchEngine(library, ["c"], minilm)  # a long-lived reader says it too (/health shows it)
    assert len(engine.problems) == 1 and seg in engine.problems[0] and "3 vectors" in engine.problems[0]
    engine.close()
    assert {p.name: p.read_bytes() for p in index_dir.iterdir() if p.is_file()} == before
    again = cli("corpus", "rescan", "c", "--quiet", data_dir=data)  # any writer repairs what it finds
    assert again.returncode == 0, again.stderr
    assert "repaired:" in again.stderr and seg in again.stderr
    _no_traceback(found, again)
    assert _top5(data, minilm) == clean
    assert cli("corpus", "check", "c", data_dir=data).returncode == 0


def test_damaged_manifest_never_breaks_another_corpus_and_is_rebuilt(
    library, minilm, make_pdf, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    data = library.data_dir
    _corpus(library, minilm, make_pdf, tmp_path, "good")
    _corpus(library, minilm, make_pdf, tmp_path, "bad")
    clean = _top5(data, minilm, "bad")
    manifest = library.corpus_dir("bad") / "manifest.sqlite"
    raw = manifest.read_bytes()
    manifest.write_bytes(raw[: len(raw) // 2])
    listed = cli("corpus", "list", data_dir=data)
    assert listed.returncode == 0 and "good" in listed.stdout
    assert "bad" in listed.stdout and "is damaged" in listed.stdout and "corpus check" in listed.stdout
    everywhere = cli("search", "penguins", "-k", "3", data_dir=data)  # all corpora: the good one answers
    assert everywhere.returncode == 0 and "first.pdf" in everywhere.stdout
    assert "'bad' is damaged" in everywhere.stderr
    named = cli("search", "penguins", "--corpus", "bad", data_dir=data)
    assert named.returncode == 1 and "'bad' is damaged" in named.stderr and "--repair" in named.stderr
    indexing = cli("corpus", "rescan", "bad", data_dir=data)
    assert indexing.returncode == 1 and "--repair" in indexing.stderr
    _no_traceback(listed, everywhere, named, indexing)
    repaired = cli("corpus", "check", "bad", "--repair", "--quiet", data_dir=data)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "started afresh with its 1 folder(s)" in repaired.stderr
    assert _top5(data, minilm, "bad") == clean
    aside = [p for p in library.corpora_dir.iterdir() if p.name.startswith(".damaged-bad-")]
    assert len(aside) == 1 and (aside[0] / "manifest.sqlite").exists()
    assert library.names() == ["bad", "good"]
    # A damaged corpus can also simply be removed.
    manifest.write_bytes(b"not a database at all")
    removed = cli("corpus", "remove", "bad", data_dir=data)
    assert removed.returncode == 0, removed.stderr
    assert library.names() == ["good"]


def test_manifest_of_a_newer_schema_is_refused_untouched(library, minilm, make_pdf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = library.data_dir
    _corpus(library, minilm, make_pdf, tmp_path, "old")
    _corpus(library, minilm, make_pdf, tmp_path, "new")
    manifest = library.corpus_dir("new") / "manifest.sqlite"
    db = sqlite3.connect(manifest)
    db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    before = manifest.read_bytes()
    listed = cli("corpus", "list", data_dir=data)
    assert listed.returncode == 0 and "newer VRAG Desktop" in listed.stdout and "old" in listed.stdout
    everywhere = cli("search", "penguins", data_dir=data)
    assert everywhere.returncode == 0 and "newer VRAG Desktop" in everywhere.stderr
    for args in (
        ("search", "penguins", "--corpus", "new"),
        ("corpus", "rescan", "new"),
        ("corpus", "check", "new", "--repair"),  # not damage: never set aside nor rebuilt
    ):
        refused = cli(*args, data_dir=data)
        said = refused.stderr + refused.stdout
        assert refused.returncode == 1 and "newer VRAG Desktop" in said, said
        _no_traceback(refused)
    _no_traceback(listed, everywhere)
    assert manifest.read_bytes() == before


def test_read_only_data_directory_still_searches_and_lists(minilm, make_pdf) -> None:  # type: ignore[no-untyped-def]
    """The data directory on a disk nobody may write (as an unprivileged user when run as root, where
    permissions are not real)."""
    from vrag_desktop.core.corpus.library import Library

    base = Path(tempfile.mkdtemp(prefix="vrag-ro-"))
    try:
        data = base / "data"
        folder = base / "docs"
        make_pdf("first.pdf", PAGES[:5], folder=folder)
        index_paths(Library(data), "c", [folder], minilm)[0].close()
        prefix: list[str] = []
        if os.geteuid() == 0:
            if not shutil.which("setpriv"):
                pytest.skip("needs setpriv to run the command as an unprivileged user")
            prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        os.chmod(base, 0o755)
        for p in [data, *data.rglob("*")]:
            os.chmod(p, 0o555 if p.is_dir() else 0o444)
        before = {str(p): p.read_bytes() for p in data.rglob("*") if p.is_file()}
        env = {**os.environ, "VRAG_DESKTOP_DATA_DIR": str(data), "HOME": str(base)}
        import sys

        for args in (("search", "penguins", "--corpus", "c"), ("corpus", "list"), ("corpus", "check", "c")):
            r = subprocess.run(
                [*prefix, sys.executable, "-m", "vrag_desktop", *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert r.returncode == 0, (args, r.stderr)
            _no_traceback(r)
        assert {str(p): p.read_bytes() for p in data.rglob("*") if p.is_file()} == before
        refused = subprocess.run(
            [*prefix, sys.executable, "-m", "vrag_desktop", "corpus", "rescan", "c"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert refused.returncode == 1 and "cannot write to the data directory" in refused.stderr, (
            refused.stderr
        )
        _no_traceback(refused)
    finally:
        for p in [base, *base.rglob("*")]:
            if not p.is_symlink():
                os.chmod(p, 0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_full_disk_is_a_message_and_the_rerun_finishes(library, minilm, make_pdf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A real ENOSPC from the kernel: the next segment's temporary file is a link to /dev/full."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    data = library.data_dir
    folder = tmp_path / "docs"
    make_pdf("first.pdf", PAGES[:4], folder=folder)
    index_paths(library, "c", [folder], minilm)[0].close()
    make_pdf("second.pdf", PAGES[4:], folder=folder)
    index_dir = library.corpus_dir("c") / "index"
    gen = json.loads((index_dir / META).read_text())["generation"]
    (index_dir / f".seg-{gen + 1:08d}.npz.tmp").symlink_to("/dev/full")
    full = cli("corpus", "rescan", "c", "--quiet", data_dir=data)
    assert full.returncode == 1, full.stderr
    assert "No space left on device" in full.stderr and "run the same command again" in full.stderr
    _no_traceback(full)
    again = cli("corpus", "rescan", "c", "--quiet", data_dir=data)
    assert again.returncode == 0, again.stderr
    clean_data = tmp_path / "clean"
    cli("index", str(folder), "--corpus", "c", "--quiet", data_dir=clean_data, check=True)
    assert _top5(data, minilm) == _top5(clean_data, minilm)
