"""Cross-corpus copies (issue 31, item 4): a file that is byte-identical in two corpora gives one
result per page, which names the other location; no copy takes a slot of the top k; the search
writes nothing; an item without a content hash (a legacy import) is never merged."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import index_paths
from test_readers_never_write import snapshot

from vrag_desktop.core.search import SearchEngine
from vrag_desktop.core.search.hit import Hit, Location

REPORT = [
    "Northwind annual report 2024. Chairman's letter about the year.",
    "Revenue grew to 4.2 billion dollars in 2024; operating margin 18 percent.",
    "Board of directors and governance of Northwind.",
]


@pytest.fixture
def two_corpora(library, minilm, make_pdf, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Corpus 'sample' holds the report and a memo; corpus 'mine' holds a renamed copy of the report
    and notes of its own."""
    a, b = tmp_path / "a", tmp_path / "b"
    report = make_pdf("northwind_annual_report_2024.pdf", REPORT, folder=a)
    make_pdf("memo.pdf", ["Memo: revenue targets for 2025 and the margin plan."], folder=a)
    b.mkdir()
    shutil.copyfile(report, b / "northwind copy.pdf")
    (b / "notes.txt").write_text("My notes: revenue of the Northwind group, 4.2 billion, margins.")
    for name, folder in (("sample", a), ("mine", b)):
        corpus, _, _ = index_paths(library, name, [folder], minilm)
        corpus.close()
    return library


def _pages(hits: list[Hit]) -> list[tuple[str, int | None]]:
    return [(Path(h.source).name, h.page) for h in hits]


@pytest.mark.parametrize("hybrid", [True, False])
def test_a_page_in_two_corpora_is_one_result_naming_both(two_corpora, minilm, hybrid: bool) -> None:  # type: ignore[no-untyped-def]
    engine = SearchEngine(two_corpora, ["sample", "mine"], embedder=minilm, hybrid=hybrid)
    try:
        hits = engine.search("Revenue grew to 4.2 billion dollars in 2024", 3)
    finally:
        engine.close()
    assert len(hits) == 3
    contents = [h.content_id for h in hits]
    assert all(contents) and len(set(contents)) == 3, _pages(hits)
    page2 = next(h for h in hits if h.page == 2)
    assert len(page2.also_in) == 1
    other = page2.also_in[0]
    assert {page2.corpus, other.corpus} == {"sample", "mine"} and other.item_id
    names = {"sample": "northwind_annual_report_2024.pdf", "mine": "northwind copy.pdf"}
    assert Path(page2.source).name == names[page2.corpus] and Path(other.source).name == names[other.corpus]
    assert f"also in '{other.corpus}' ({other.source})" == page2.also_in_text()
    if not hybrid:  # equal scores: the corpora's order decides which copy leads (BM25 may differ)
        assert page2.corpus == "sample"
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert [h.fused for h in hits] == [hybrid] * 3


def test_the_corpora_order_breaks_a_tie_and_copies_outside_the_candidates_are_found(
    two_corpora, minilm
) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.search.copies import Identities

    engine = SearchEngine(two_corpora, ["mine", "sample"], embedder=minilm, hybrid=False)
    try:
        top = engine.search("Board of directors and governance of Northwind.", 1)
        assert _pages(top) == [("northwind copy.pdf", 3)]  # 'mine' named first: its copy leads the tie
        assert [(x.corpus, Path(x.source).name) for x in top[0].also_in] == [
            ("sample", "northwind_annual_report_2024.pdf")
        ]
        # a copy that no ranking brought up is still named, found by its file's hash
        mine, sample = engine.corpora
        ident = Identities(engine.corpora)
        row = mine.manifest.item(top[0].item_id or 0)
        assert row is not None
        (found,) = ident.copies(mine, row, skip={"mine"})
        assert found == top[0].also_in[0]
        memo = next(s for s in sample.manifest.sources() if s.path.endswith("memo.pdf"))
        assert ident.copies(sample, sample.manifest.items(memo.id)[0], skip={"sample"}) == []
    finally:
        engine.close()


def test_a_search_over_copies_writes_nothing(two_corpora, minilm) -> None:  # type: ignore[no-untyped-def]
    dirs = [two_corpora.corpus_dir(n) for n in ("sample", "mine")]
    before = [snapshot(d) for d in dirs]
    engine = SearchEngine(two_corpora, None, embedder=minilm)
    try:
        engine.search_batch(["Northwind revenue", "governance"], 5)
    finally:
        engine.close()
    assert [snapshot(d) for d in dirs] == before


def test_items_without_a_hash_are_never_merged(two_corpora, minilm) -> None:  # type: ignore[no-untyped-def]
    """An index imported from the original (no file hashes) keeps each item its own result."""
    db = sqlite3.connect(two_corpora.corpus_dir("mine") / "manifest.sqlite")
    db.execute("UPDATE sources SET sha256=NULL")
    db.commit()
    db.close()
    engine = SearchEngine(two_corpora, ["sample", "mine"], embedder=minilm, hybrid=False)
    try:
        hits = engine.search("Board of directors and governance of Northwind.", 2)
    finally:
        engine.close()
    assert sorted(h.corpus for h in hits) == ["mine", "sample"]
    assert _pages(hits)[0][1] == 3 and _pages(hits)[1][1] == 3
    assert all(not h.also_in for h in hits)
    assert next(h for h in hits if h.corpus == "mine").content_id is None


def test_locations_round_trip_and_refuse_garbage() -> None:
    from vrag_desktop.core.agents.events import SearchResults, event_from_dict

    hit = Hit(
        score=0.0325,
        name="r_2",
        source="/a/r.pdf",
        modality="page",
        page=2,
        dense_score=0.38,
        lexical_score=4.0,
        content_id="abc:page:2",
        also_in=(Location("mine", "/b/r.pdf", 7),),
    )
    ev = event_from_dict(SearchResults(content="q", hits=(hit,)).to_dict())
    assert isinstance(ev, SearchResults) and ev.hits == (hit,)
    assert hash(ev.hits[0]) == hash(hit)
    old = event_from_dict(
        {
            "event": "search_results",
            "hits": [{"score": 0.5, "name": "x", "source": "/x", "modality": "image"}],
        }
    )
    assert isinstance(old, SearchResults) and old.hits[0].also_in == () and old.hits[0].content_id is None
    assert Hit(score=1, name="x", source="/x", modality="image", also_in=None).also_in == ()  # type: ignore[arg-type]
    for bad in (
        ["/b/r.pdf"],
        [{"corpus": "mine"}],
        "mine",
        {"corpus": "m", "source": "/s"},
        [{"corpus": 3, "source": "/s"}],
    ):
        with pytest.raises(TypeError, match="also_in"):
            Hit(score=1, name="x", source="/x", modality="image", also_in=bad)  # type: ignore[arg-type]
    many = Hit(
        score=1,
        name="x",
        source="/x",
        modality="image",
        also_in=tuple(Location(f"c{i}", f"/c{i}/x") for i in range(5)),
    )
    assert many.also_in_text(limit=2) == "also in 'c0' (/c0/x), 'c1' (/c1/x) and 3 more"


def test_the_vrag_agent_never_shows_another_corpus_s_copy_of_a_page_it_showed(tmp_path: Path) -> None:
    """Search 1 leads with corpus A's copy, search 2 with corpus B's (BM25 differs per corpus): the
    second is the same page, so the model is told it was shown, not shown it again."""
    from PIL import Image
    from test_vrag_agent import FakeModel, ListSearcher, collect, images_of, texts_of

    from vrag_desktop.core.agents.events import ImageShown
    from vrag_desktop.core.agents.vrag import VRAGAgent

    paths = []
    for corpus in ("a", "b"):
        (tmp_path / corpus).mkdir()
        paths.append(tmp_path / corpus / "report_2.jpg")
        Image.new("RGB", (640, 480), "white").save(paths[-1])
    copies = [
        Hit(
            score=0.03,
            name="report_2",
            source=f"/{c}/report.pdf",
            modality="page",
            page=2,
            image=str(p),
            corpus=c,
            content_id="abc:page:2",
        )
        for c, p in zip(("a", "b"), paths, strict=True)
    ]

    class Alternating(ListSearcher):
        def search(self, query: str, k: int) -> list[Hit]:
            return [copies.pop(0)]

    model = FakeModel(
        [
            "<think>s</think><search>revenue</search>",
            "<think>s</think><search>revenue 2024</search>",
            "<think>a</think><answer>x</answer>",
        ]
    )
    events = collect(VRAGAgent(model, Alternating([]), image_dir=tmp_path / "run"), "Q?")
    assert len([e for e in events if isinstance(e, ImageShown)]) == 1
    second = model.calls[2][-1]
    assert not images_of(second) and "already been shown" in texts_of(second)[0]


def test_server_records_carry_the_copies_and_the_client_reads_them(two_corpora, minilm) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.agents.searchers import parse_search_response
    from vrag_desktop.core.search.server import results

    engine = SearchEngine(two_corpora, None, embedder=minilm)
    try:
        hits = engine.search("Revenue grew to 4.2 billion dollars in 2024", 3)
    finally:
        engine.close()
    back = parse_search_response(results([hits]))
    assert [(h.also_in, h.content_id, h.dense_score, h.lexical_score, h.score) for h in back] == [
        (h.also_in, h.content_id, h.dense_score, h.lexical_score, h.score) for h in hits
    ]
    assert any(h.also_in for h in back) and all(h.fused for h in back)
    # a foreign server's odd fields are dropped, never a failed search
    odd = {
        "results": [
            {
                "score": [0.5],
                "data": [
                    {
                        "type": "image",
                        "file_path": "/x.jpg",
                        "also_in": "elsewhere",
                        "dense_score": "high",
                        "content_id": 7,
                    }
                ],
            }
        ]
    }
    (hit,) = parse_search_response(odd)
    assert hit.also_in == () and hit.dense_score is None and hit.content_id is None and hit.score == 0.5
