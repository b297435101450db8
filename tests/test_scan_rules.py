"""Scan rules (issue 27, items 2 and 8): a copy of a file that failed is indexed in its own right, and
a symbolic link out of the folders added to a corpus is never indexed (so its target can reach
neither search results nor the search server)."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import drain, index_paths

from vrag_desktop.core.corpus.manifest import S_DUPLICATE, S_FAILED, S_INDEXED, S_PENDING
from vrag_desktop.core.search import SearchEngine

REPORT = "The harbour master logged forty trawlers returning before the autumn gale."


def _statuses(corpus) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {Path(s.path).name: s.status for s in corpus.manifest.sources()}


def test_copies_of_a_file_that_fails_while_indexing_are_indexed(
    library, minilm, make_pdf, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """The original is damaged between the scan (which found the copies to be duplicates of it) and
    the build: its copies are still good, and one of them is indexed in the same job."""
    folder = tmp_path / "docs"
    original = make_pdf("a_original.pdf", [REPORT], folder=folder)
    data = original.read_bytes()
    for name in ("b_copy.pdf", "c_copy.pdf", "d_copy.pdf"):
        (folder / name).write_bytes(data)
    corpus = library.open("dups", create=True)
    corpus.add_paths([folder])
    drain(corpus.scan())
    assert _statuses(corpus) == {
        "a_original.pdf": S_PENDING,
        "b_copy.pdf": S_DUPLICATE,
        "c_copy.pdf": S_DUPLICATE,
        "d_copy.pdf": S_DUPLICATE,
    }
    st = original.stat()
    original.write_bytes(b"%PDF-1.7\n" + bytes(len(data) - 9))  # same size, same time: not a PDF now
    os.utime(original, ns=(st.st_atime_ns, st.st_mtime_ns))
    report = drain(corpus.build(minilm))
    assert report.failed_sources == 1
    assert _statuses(corpus) == {
        "a_original.pdf": S_FAILED,
        "b_copy.pdf": S_INDEXED,
        "c_copy.pdf": S_DUPLICATE,
        "d_copy.pdf": S_DUPLICATE,
    }
    copy = corpus.manifest.source_by_path(str(folder / "b_copy.pdf"))
    assert copy is not None
    for name in ("c_copy.pdf", "d_copy.pdf"):  # now duplicates of the copy that was indexed
        dup = corpus.manifest.source_by_path(str(folder / name))
        assert dup is not None and dup.duplicate_of == copy.id
    hits = SearchEngine(library, ["dups"], minilm).search("harbour master trawlers gale", 1)
    assert hits and hits[0].source == str(folder / "b_copy.pdf")
    corpus.close()


def test_rescan_promotes_copies_left_behind_a_failed_original(
    library, minilm, make_pdf, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """A corpus whose copies still point at a failed original (left by an older version) is mended by
    the next rescan."""
    folder = tmp_path / "docs"
    original = make_pdf("a_original.pdf", [REPORT], folder=folder)
    for name in ("b_copy.pdf", "c_copy.pdf"):
        (folder / name).write_bytes(original.read_bytes())
    corpus, _, _ = index_paths(library, "old", [folder], minilm)
    src = corpus.manifest.source_by_path(str(original))
    assert src is not None
    with corpus.manifest.transaction():
        corpus.manifest.clear_items(src.id)
        corpus.manifest.update_source(src.id, status=S_FAILED, error="cannot decode (an older failure)")
    drain(corpus.scan())
    drain(corpus.build(minilm))
    assert _statuses(corpus) == {
        "a_original.pdf": S_FAILED,
        "b_copy.pdf": S_INDEXED,
        "c_copy.pdf": S_DUPLICATE,
    }
    dup_lines = [why for path, _, why in corpus.manifest.failures() if path.endswith("c_copy.pdf")]
    assert dup_lines == [f"duplicate of {folder / 'b_copy.pdf'} (same content; indexed once)"]
    corpus.close()


def test_links_out_of_the_corpus_are_not_indexed(library, minilm, make_pdf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "passwords.txt"
    secret.write_text("root:hunter2 the vault combination is 31-7-42")
    (outside / "more").mkdir()
    (outside / "more" / "notes.txt").write_text("the vault combination is written on the back of the clock")
    root = tmp_path / "docs"
    make_pdf("report.pdf", [REPORT], folder=root)
    (root / "inside.txt").write_text("Lentil soup needs cumin, garlic and a bay leaf.")
    (root / "outside_passwd.txt").symlink_to(secret)  # a file link out
    (root / "elsewhere").symlink_to(outside / "more")  # a folder link out
    (root / "alias.txt").symlink_to(root / "inside.txt")  # a link that stays inside: indexed
    second = tmp_path / "second root"
    second.mkdir()
    (second / "tea.txt").write_text("Green tea steeps for two minutes at eighty degrees.")
    (root / "to_second.txt").symlink_to(second / "tea.txt")  # into another folder of the corpus: fine
    linked_root = tmp_path / "linked"
    linked_root.symlink_to(second)  # a folder added *as* a link is the person's choice
    corpus, _, _ = index_paths(library, "links", [root, second, linked_root], minilm)
    failures = {Path(p).name: why for p, _, why in corpus.manifest.failures()}
    for name in ("outside_passwd.txt", "elsewhere"):
        assert "outside the folders added to this corpus" in failures[name], failures
        assert str(outside) in failures[name]
    kept = {Path(s.path).name for s in corpus.manifest.sources() if s.status in (S_INDEXED, S_DUPLICATE)}
    assert "passwords.txt" not in kept and "notes.txt" not in kept
    # a link that stays inside, or leads into another folder of the corpus, is followed (a copy of
    # its target, indexed once)
    assert {"alias.txt", "inside.txt", "report.pdf", "tea.txt", "to_second.txt"} <= kept
    assert all(outside not in Path(i.media_path or "/").parents for i in corpus.manifest.items())
    corpus.close()
    engine = SearchEngine(library, ["links"], minilm)
    for hit in engine.search("vault combination password", 10):
        assert "vault" not in hit.text
    engine.close()


def test_moved_and_renamed_files_keep_their_vectors(library, minilm, make_pdf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Folder watching's renames and moves: the file keeps its items and vectors under its new name;
    nothing is derived or embedded again."""
    from PIL import Image

    folder = tmp_path / "docs"
    make_pdf("annual.pdf", [REPORT, "Fish prices rose by a tenth over the winter."], folder=folder)
    Image.new("RGB", (64, 48), (10, 120, 200)).save(folder / "boat.png")
    (folder / "notes.txt").write_text("Mend the nets before the herring season opens in May.")
    corpus, _, _ = index_paths(library, "moves", [folder], minilm)
    vectors = sorted(corpus.manifest.vector_ids())
    ids = {Path(s.path).name: s.id for s in corpus.manifest.sources()}
    (folder / "annual.pdf").rename(folder / "annual 2024.pdf")
    (folder / "boat.png").rename(folder / "trawler.png")
    (folder / "archive").mkdir()
    (folder / "notes.txt").rename(folder / "archive" / "notes.txt")
    (folder / "copy of annual.pdf").write_bytes((folder / "annual 2024.pdf").read_bytes())  # a copy too
    scan = drain(corpus.scan())
    assert (scan.renamed, scan.removed, scan.added, scan.duplicates) == (3, 0, 0, 1)
    assert drain(corpus.build(minilm)).items == 0
    assert sorted(corpus.manifest.vector_ids()) == vectors == sorted(corpus.store().ids().tolist())
    now = {Path(s.path).name: (s.id, s.status) for s in corpus.manifest.sources()}
    assert now == {
        "annual 2024.pdf": (ids["annual.pdf"], S_INDEXED),
        "trawler.png": (ids["boat.png"], S_INDEXED),
        "notes.txt": (ids["notes.txt"], S_INDEXED),
        "copy of annual.pdf": (now["copy of annual.pdf"][0], S_DUPLICATE),
    }
    names = {i.name: i for i in corpus.manifest.items()}
    assert {"annual 2024_1", "annual 2024_2", "trawler", "notes"} == set(names)
    assert names["trawler"].media_path == str(folder / "trawler.png")
    assert names["notes"].media_path == str(folder / "archive" / "notes.txt")
    assert Path(names["annual 2024_1"].image_path or "").is_file()
    corpus.close()
    hit = SearchEngine(library, ["moves"], minilm).search("herring nets", 1)[0]
    assert hit.source == str(folder / "archive" / "notes.txt") and hit.name == "notes"


def test_a_data_directory_inside_an_added_folder_is_not_indexed(minilm, make_pdf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.library import Library

    folder = tmp_path / "home"
    make_pdf("report.pdf", [REPORT], folder=folder)
    library = Library(folder / "vrag data")  # not hidden, inside the folder that is indexed
    corpus, _, _ = index_paths(library, "c", [folder], minilm)
    corpus.close()
    again = library.open("c")  # a second scan would meet the first one's page renders
    drain(again.scan())
    paths = [s.path for s in again.manifest.sources()]
    assert paths == [str(folder / "report.pdf")], paths
    again.close()
