"""Evaluations over corpora holding copies of one file (issue 31, item 4): each page counts once, the
reward's NDCG stays within [0, 1], a renamed copy of the evidence file is the evidence, and copies
match a dataset item as one file."""

from __future__ import annotations

from test_search_copies import REPORT, two_corpora  # noqa: F401 - the fixture

from vrag_desktop.core.datasets import DatasetItem
from vrag_desktop.core.eval.matching import CorpusFile, corpus_files, match_dataset
from vrag_desktop.core.eval.metrics import copies_key
from vrag_desktop.core.eval.retrieval import score_dataset, score_hits
from vrag_desktop.core.search import SearchEngine
from vrag_desktop.core.search.hit import Hit, Location

ITEMS = [
    DatasetItem(f"q{p}", text, "x", "northwind_annual_report_2024.pdf", (p,))
    for p, text in enumerate(REPORT, 1)
]


def test_an_evaluation_over_both_corpora_counts_each_page_once(two_corpora, minilm) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    engine = SearchEngine(two_corpora, None, embedder=minilm)
    try:
        match = match_dataset(ITEMS, corpus_files(engine.corpora))
        assert [m.item.uid for m in match.matched] == ["q1", "q2", "q3"] and not match.problems
        assert all(m.note == "" for m in match.matched)  # copies of one file: not "fits 2 files"
        summary, rows = score_dataset(match, engine.search_batch, ks=(1, 3, 5))
    finally:
        engine.close()
    for r in rows:
        assert len(r["retrieved"]) == len(set(r["retrieved"])), r["retrieved"]  # no page twice
        assert 0 <= r["ndcg_original"] <= 1 and r["ndcg_original"] == r["ndcg@5"] == 1.0, r
        assert r["rank"] == 1
    assert summary["overall"]["ndcg_original"] == 1.0  # was 1.631 a row: each page listed per corpus


def test_a_hit_led_by_a_renamed_copy_is_the_evidence() -> None:
    golden = {"report_2"}
    copy = Hit(
        score=0.03,
        name="my copy_2",
        source="/b/my copy.pdf",
        modality="page",
        page=2,
        also_in=(Location("sample", "/a/report.pdf", 4),),
    )
    assert copy.sources == ("/b/my copy.pdf", "/a/report.pdf")
    assert copies_key(copy.sources, 2, golden) == "report_2"
    assert copies_key(copy.sources, 3, golden) == "my copy_3"  # not the evidence: its own key
    match = match_dataset(
        [DatasetItem("q1", "q", "r", "report.pdf", (2,))], [CorpusFile("/a/report.pdf", "sample", 4)]
    )
    row = score_hits(match.matched[0], [copy], [1])
    assert row["retrieved"] == ["report_2"] and row["rank"] == 1 and row["hit@1"] == 1.0


def test_the_rewards_ndcg_counts_a_key_once_even_when_hits_repeat_it() -> None:
    """Two clips of an evidence video named without pages are one key: the reward's NDCG of the
    retrieval evaluation is computed over each key once (as the agents and the trainer do)."""
    match = match_dataset([DatasetItem("v", "q", "r", "tour.mp4")], [CorpusFile("/a/tour.mp4", "a")])
    clips = [
        Hit(score=0.03 - i / 100, name=f"tour_{i}", source="/a/tour.mp4", modality="clip", clip=i)
        for i in (1, 2)
    ]
    row = score_hits(match.matched[0], clips, [1, 3])
    assert row["retrieved"] == ["tour", "tour"] and row["ndcg_original"] == 1.0 and row["ndcg@3"] == 1.0


def test_two_different_files_of_one_name_still_say_so() -> None:
    files = [
        CorpusFile("/a/report.pdf", "a", 4, "aaa"),
        CorpusFile("/b/report.pdf", "b", 4, "bbb"),
        CorpusFile("/c/report.pdf", "c", 4, None),
    ]
    item = [DatasetItem("q1", "q", "r", "report.pdf", (1,))]
    assert "a hit on any counts" in match_dataset(item, files[:2]).matched[0].note
    assert match_dataset(item, [files[0], CorpusFile("/b/x/report.pdf", "b", 4, "aaa")]).matched[0].note == ""
    assert (
        "a hit on any counts"
        in match_dataset(item, [files[2], CorpusFile("/d/report.pdf", "d", 4, None)]).matched[0].note
    )
