"""Readers never write (issue 27, items 1 and 13): a search, a listing, a check or a search server
beside an indexing job changes not one byte of the corpus, and a long-lived reader sees what the job
commits afterwards.

The indexer is paused exactly between writing a segment and committing its items to the manifest —
the moment where a reader that "reconciled" would see vectors the manifest does not list yet and
delete them — and a real ``vrag-desktop search`` runs then.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from conftest import cli, drain, index_paths, serve_search

from vrag_desktop.core.search import SearchEngine


def snapshot(corpus_dir: Path) -> dict[str, str]:
    """Every file under a corpus with a hash of its bytes (SQLite's -shm/-wal excepted: a reader's
    connection may map them, but the database's content is the file itself plus its committed WAL)."""
    out = {}
    for p in sorted(corpus_dir.rglob("*")):
        if p.is_file() and not p.name.endswith(("-shm", "-wal")) and p.name != ".lock":
            out[str(p.relative_to(corpus_dir))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@contextmanager
def at_commit(corpus, readers) -> Iterator[list[object]]:  # type: ignore[no-untyped-def]
    """Run ``readers()`` inside ``corpus``'s next manifest transaction — a build's commit, right after
    its segment was written and before its items are recorded. Yields what ``readers`` returned."""
    real = corpus.manifest.transaction
    seen: list[object] = []

    @contextmanager
    def transaction():  # type: ignore[no-untyped-def]
        if not seen:
            seen.append(readers())
        with real() as db:
            yield db

    corpus.manifest.transaction = transaction
    try:
        yield seen
    finally:
        del corpus.manifest.transaction


def test_search_beside_a_paused_writer_changes_nothing(library, minilm, make_pdf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    make_pdf("alpha.pdf", [f"Alpha report page {i}: orchards and apples." for i in range(4)], folder=folder)
    corpus, _, _ = index_paths(library, "c", [folder], minilm)
    before_vectors = len(corpus.manifest.vector_ids())
    make_pdf("beta.pdf", [f"Beta memo page {i}: submarines dive deep." for i in range(5)], folder=folder)
    drain(corpus.scan())

    def readers() -> dict[str, object]:
        """A real CLI search, a listing and a check while the segment is written, not yet committed."""
        assert any(p.name.startswith("seg-") for p in (corpus.dir / "index").iterdir()), "no segment yet"
        frozen = snapshot(corpus.dir)
        out: dict[str, object] = {
            "search": cli(
                "search", "apples in orchards", "--corpus", "c", "-k", "3", data_dir=library.data_dir
            ),
            "list": cli("corpus", "list", data_dir=library.data_dir),
            "check": cli("corpus", "check", "c", data_dir=library.data_dir),
        }
        after = snapshot(corpus.dir)
        out["unchanged"] = after == frozen
        out["changed"] = sorted(k for k in set(after) | set(frozen) if after.get(k) != frozen.get(k))
        return out

    with at_commit(corpus, readers) as seen:
        drain(corpus.build(minilm))
    assert seen, "the build never committed"
    got = seen[0]
    assert isinstance(got, dict)
    assert got["unchanged"], f"a reader changed the corpus: {got['changed']}"
    found, listed, checked = got["search"], got["list"], got["check"]
    assert found.returncode == 0 and "alpha.pdf" in found.stdout, found.stderr
    assert listed.returncode == 0, listed.stderr
    assert "indexing job is writing" in checked.stdout, checked.stdout
    ids = sorted(corpus.store().ids().tolist())
    assert ids == sorted(corpus.manifest.vector_ids())
    assert len(ids) == before_vectors + 5
    assert sorted(i.name for i in corpus.manifest.items()) == sorted(
        [f"alpha_{i}" for i in range(1, 5)] + [f"beta_{i}" for i in range(1, 6)]
    )
    corpus.close()
    hits = SearchEngine(library, ["c"], minilm).search("submarines dive", 3)
    assert hits and hits[0].source.endswith("beta.pdf")


def test_a_long_lived_engine_sees_what_is_indexed_later(library, minilm, make_pdf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    make_pdf("first.pdf", ["Penguins huddle through the Antarctic winter."], folder=folder)
    corpus, _, _ = index_paths(library, "live", [folder], minilm)
    corpus.close()
    engine = SearchEngine(library, ["live"], minilm)
    assert engine.total_vectors() == 1
    frozen = snapshot(library.corpus_dir("live"))
    assert engine.search("camel caravans", 1)[0].name == "first_1"  # only one thing to find
    assert snapshot(library.corpus_dir("live")) == frozen
    # The indexer adds a file (a segment), then removes the first one (a compaction).
    make_pdf("second.pdf", ["Camel caravans cross the Sahara desert."], folder=folder)
    writer = library.open("live")
    drain(writer.scan())
    drain(writer.build(minilm))
    hits = engine.search("camel caravans in the desert", 2)
    assert hits[0].name == "second_1" and engine.total_vectors() == 2
    assert hits[0].lexical_score is not None  # BM25 was rebuilt for the new item
    (folder / "first.pdf").unlink()
    drain(writer.scan())
    writer.close()
    hits = engine.search("penguins antarctic", 2)
    assert [h.name for h in hits] == ["second_1"] and engine.total_vectors() == 1
    engine.close()


@pytest.mark.timeout(300)
def test_search_server_serves_what_is_indexed_after_it_started(
    library, minilm, make_pdf, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    make_pdf("one.pdf", ["Glaciers carve fjords over millennia."], folder=folder)
    index_paths(library, "srv", [folder], minilm)[0].close()
    with serve_search(library.data_dir) as url:
        health = httpx.get(f"{url}/health").json()
        assert health["vectors"] == 1 and health["problems"] == []
        make_pdf("two.pdf", ["Volcanic islands rise from the ocean floor."], folder=folder)
        added = cli("corpus", "rescan", "srv", "--quiet", data_dir=library.data_dir)
        assert added.returncode == 0, added.stderr
        assert httpx.get(f"{url}/health").json()["vectors"] == 2
        r = httpx.post(f"{url}/search", json={"queries": ["volcanic island ocean"], "top_k": 1})
        assert r.status_code == 200, r.text
        assert r.json()["results"][0]["data"][0]["name"] == "two_1"
