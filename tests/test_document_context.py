"""Document context in every chunk (issue 33, item 1): look-alike pages of different documents are
told apart by their document's identity, for the embedder and for BM25; a document whose first page
says nothing falls back to its file name; corpora indexed before keep searching as they were built."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import drain

from vrag_desktop.core.corpus.context import (
    CONTEXT_DOCUMENT,
    CONTEXT_META,
    CONTEXT_NONE,
    context_mode,
    document_context,
    settle_context_mode,
)

COVER = """UNITED STATES SECURITIES AND EXCHANGE COMMISSION
FORM 10-Q
For the quarterly period ended
July 1, 2023
Commission File Number: 001-36743
{name}
(Exact name of Registrant as specified in its charter)
"""
# the same statement in every company's report: only the document says whose it is
BODY = (
    "Condensed consolidated statements of cash flows. Net cash from operating activities 1,204. "
    "Capital expenditures 310."
)


def test_the_header_names_issuer_form_and_period() -> None:
    header = document_context("/docs/filing-7b9b.pdf", COVER.format(name="Beta Widgets Inc."))
    assert (
        header
        == "Document: filing-7b9b.pdf · Beta Widgets Inc. · Form 10-Q · quarterly period ended July 1, 2023"
    )
    # no registrant line: a company-like line near the top, and a title line for other documents
    assert "ACME HOLDINGS" in document_context("a.pdf", "Annual report\nACME HOLDINGS\nFORM 10-K")
    assert document_context("deck.pdf", "12\nQuarterly business review\nSlide one") == (
        "Document: deck.pdf · Quarterly business review"
    )


@pytest.mark.parametrize("first_page", [None, "", "   \n\n", "12 34\n--- 5 ---\n%%"])
def test_a_document_whose_metadata_cannot_be_read_is_named_by_its_file(first_page: str | None) -> None:
    assert document_context("/scans/2023/scan-0042.pdf", first_page) == "Document: scan-0042.pdf"
    assert document_context(r"C:\scans\scan-0042.pdf", first_page) == "Document: scan-0042.pdf"
    # the embedded header too: the file name is all there is
    assert document_context("/scans/scan-0042.pdf", first_page, with_name=False) == "Document: scan-0042.pdf"


def test_every_window_of_a_long_page_carries_the_header(minilm) -> None:  # type: ignore[no-untyped-def]
    header = "Document: f.pdf · Beta Widgets Inc. · Form 10-Q"
    head = minilm._tok.encode(header, add_special_tokens=False).ids
    windows = minilm.windows(" ".join(f"word{i}" for i in range(900)), header)
    assert len(windows) > 2
    assert all(w[1 : 1 + len(head)] == head and len(w) <= 256 for w in windows)
    # the whole text is still covered: the last window ends with the text's last token
    text_ids = minilm._tok.encode(" ".join(f"word{i}" for i in range(900)), add_special_tokens=False).ids
    assert windows[-1][-2] == text_ids[-1]
    # a page without text stays an empty window: a header alone would match every name query
    assert minilm.windows("", header) == minilm.windows("")


def _filings(folder: Path) -> Path:
    import pymupdf

    folder.mkdir()
    for i, name in enumerate(("Alpha Foods Corporation", "Beta Widgets Inc.", "Gamma Mining Ltd.")):
        with pymupdf.open() as doc:
            doc.new_page().insert_text((40, 60), COVER.format(name=name), fontsize=9)
            doc.new_page().insert_text((40, 60), BODY, fontsize=7)
            doc.save(folder / f"filing-{i}.pdf")
    return folder


def _build(library, minilm, name: str, docs: Path, mode: str | None) -> None:  # type: ignore[no-untyped-def]
    corpus = library.open(name, create=True)
    if mode is not None:
        corpus.manifest.set_meta(CONTEXT_META, mode)  # as a corpus indexed before document context
    corpus.add_paths([docs])
    drain(corpus.scan())
    drain(corpus.build(minilm))
    corpus.close()


def test_lookalike_pages_are_told_apart_by_their_document(library, minilm, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The question names the company; the page that answers it does not. With document context
    both the dense and the keyword ranking put that company's statement first; without it the three
    statements are indistinguishable (the same vector)."""
    from vrag_desktop.core.search import SearchEngine
    from vrag_desktop.core.search.lexical import LexicalIndex

    docs = _filings(tmp_path / "docs")
    _build(library, minilm, "new", docs, None)
    _build(library, minilm, "old", docs, CONTEXT_NONE)
    query = "Beta Widgets cash flows from operating activities"
    for hybrid in (False, True):
        engine = SearchEngine(library, ["new"], embedder=minilm, hybrid=hybrid)
        try:
            assert context_mode(engine.corpora[0].manifest) == CONTEXT_DOCUMENT
            statements = [h for h in engine.search(query, 6) if h.page == 2]
            assert Path(statements[0].source).name == "filing-1.pdf", [h.source for h in statements]
            if not hybrid:
                assert statements[0].score > statements[1].score + 0.01
        finally:
            engine.close()
    old = SearchEngine(library, ["old"], embedder=minilm, hybrid=False)
    try:
        statements = [h for h in old.search(query, 6) if h.page == 2]
        assert len({round(h.score, 5) for h in statements}) == 1  # nothing tells them apart
        manifest = old.corpora[0].manifest
        # BM25 of an old corpus reads the plain page text too: "Beta" is on the cover only
        hits = LexicalIndex.build(manifest).search("Beta Widgets", 6)
        assert {manifest.item(i).ordinal for _, i in hits} == {1}  # type: ignore[union-attr]
    finally:
        old.close()
    new = library.open("new", shared=True, read_only=True)
    try:
        hits = LexicalIndex.build(new.manifest).search("Beta Widgets", 6)
        found = {(Path(new.manifest.source(new.manifest.item(i).source_id).path).name) for _, i in hits}  # type: ignore[union-attr]
        assert found == {"filing-1.pdf"} and len(hits) == 2  # both pages of Beta's report, no other
    finally:
        new.close()


def test_a_corpus_indexed_before_keeps_its_chunk_text_until_reindexed(library, minilm, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A corpus that holds vectors but no record of its chunk text was built before document
    context: a later build (new files) embeds plainly too, so one corpus never mixes the two, and
    its status says to re-index it."""
    from vrag_desktop.core.corpus.status import read_summary

    docs = _filings(tmp_path / "docs")
    _build(library, minilm, "c", docs, None)
    assert not read_summary(library.corpus_dir("c")).plain_chunks
    corpus = library.open("c")
    try:
        assert corpus.manifest.get_meta(CONTEXT_META) == CONTEXT_DOCUMENT
        corpus.manifest._db.execute("DELETE FROM meta WHERE key=?", (CONTEXT_META,))  # as an old corpus
        assert context_mode(corpus.manifest) == CONTEXT_NONE
        assert settle_context_mode(corpus.manifest) == CONTEXT_NONE
        assert corpus.manifest.get_meta(CONTEXT_META) == CONTEXT_NONE
    finally:
        corpus.close()
    old = read_summary(library.corpus_dir("c"))
    assert old.plain_chunks and "re-index it to find pages by their document" in old.details()
    fresh = library.open("fresh", create=True)
    try:
        assert settle_context_mode(fresh.manifest) == CONTEXT_DOCUMENT
    finally:
        fresh.close()


def test_a_query_names_the_documents_whose_headers_hold_its_rare_words() -> None:
    import math

    from vrag_desktop.core.search.fusion import Fusion
    from vrag_desktop.core.search.lexical import DocumentNames

    names = DocumentNames(
        {
            1: "Document: filing-1.pdf · Apple Inc. · Form 10-Q · quarterly period ended July 1, 2023",
            2: "Document: filing-2.pdf · Apple Inc. · Form 10-Q · quarterly period ended April 1, 2023",
            3: "Document: filing-3.pdf · AMAZON.COM, INC. · Form 10-Q · quarterly period ended June 30, 2023",
            4: "Document: filing-4.pdf · NVIDIA CORPORATION · Form 10-Q · quarterly period ended July 30, 2023",
        }
    )
    assert names.named("What did Apple's latest 10-Q say about foreign exchange?") == {
        1: pytest.approx(math.log(2)),
        2: pytest.approx(math.log(2)),
    }
    assert names.named("nvidia july") == {
        4: pytest.approx(math.log(4) + math.log(2)),
        1: pytest.approx(math.log(2)),
    }
    assert names.named("the quarterly form 10-Q of 2023") == {}  # words of most headers name nothing
    assert DocumentNames({1: "Document: a.pdf · Apple Inc."}).named("apple") == {}  # one document: no choice
    # the named documents' candidates get a third vote; without it, the plain fusion
    fused = Fusion(names_weight=1).fuse(["b", "a"], ["b", "a"], named=["a"])
    assert max(fused, key=fused.__getitem__) == "a"
    plain = Fusion(names_weight=0).fuse(["b", "a"], ["b", "a"], named=["a"])
    assert plain == Fusion().fuse(["b", "a"], ["b", "a"]) and max(plain, key=plain.__getitem__) == "b"
    # stop words in a title name nothing ("Field Guide to the Alps" is not named by "the")
    guide = DocumentNames({1: "Document · Field Guide to the Alps", 2: "Document · Annual report", 3: "x"})
    assert guide.named("what is the guide") == {1: pytest.approx(math.log(3))}


def test_the_first_page_carries_no_copy_of_its_own_title() -> None:
    """The header is read from page 1, which says it already; page 1 adds only the file name."""
    from vrag_desktop.core.corpus.context import page_header

    cover = COVER.format(name="Beta Widgets Inc.")
    assert page_header("/d/f.pdf", cover, 2, with_name=False) == document_context(
        "/d/f.pdf", cover, with_name=False
    )
    assert page_header("/d/f.pdf", cover, 1, with_name=False) is None
    assert page_header("/d/f.pdf", cover, 1) == "Document: f.pdf"  # BM25: a query may name the file
    assert (
        page_header("/d/scan.pdf", "", 1, with_name=False) == "Document: scan.pdf"
    )  # the name is all there is
