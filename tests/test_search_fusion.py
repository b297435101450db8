"""Weighted reciprocal-rank fusion (core/search/fusion.py)."""

from __future__ import annotations

import pytest
from conftest import drain

from vrag_desktop.core.search.fusion import CONFIDENCE, DEFAULT_FUSION, RRF_K, Fusion, margin, rrf


def test_equal_weights_is_plain_rrf() -> None:
    fused = rrf(["a", "b"], ["b", "c"], dense_weight=1.0, lexical_weight=1.0)
    assert fused["a"] == pytest.approx(1 / (RRF_K + 1))
    assert fused["b"] == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1))
    assert fused["c"] == pytest.approx(1 / (RRF_K + 2))
    assert max(fused, key=fused.__getitem__) == "b"


def test_the_heavier_ranking_wins_a_disagreement() -> None:
    lexical_heavy = rrf(["d", "x"], ["l", "y"], dense_weight=1.0, lexical_weight=2.0)
    dense_heavy = rrf(["d", "x"], ["l", "y"], dense_weight=2.0, lexical_weight=1.0)
    assert max(lexical_heavy, key=lexical_heavy.__getitem__) == "l"
    assert max(dense_heavy, key=dense_heavy.__getitem__) == "d"


def test_empty_rankings() -> None:
    assert rrf([], []) == {}
    assert list(rrf(["a"], [])) == ["a"]


def test_margin_is_the_first_scores_lead_relative_to_it() -> None:
    assert margin({"a": 10.0, "b": 5.0, "c": 1.0}) == pytest.approx(0.5)
    assert margin({"a": 0.7, "b": 0.7}) == 0.0  # look-alikes: no confidence
    assert margin({"a": 3.0}) == 1.0 and margin({}) == 1.0  # nothing to tell apart
    assert margin({"a": 0.0, "b": -1.0}) == 0.0
    assert margin({"a": -0.2, "b": -0.4}) == pytest.approx(1.0)  # cosines can be negative


def test_a_confident_ranking_outvotes_one_of_look_alikes() -> None:
    """Dense ranks three near-equal pages (a, c, b); BM25 singles out b. Equal votes follow dense's
    first place; the default's confidence lets BM25's clear first place win (the bank reports'
    case, docs/benchmarks.md §3), and a dense ranking that singles a page out wins the other way."""
    dense = {"a": 0.700, "c": 0.699, "b": 0.698}
    lexical = {"b": 12.0, "a": 3.0, "c": 2.9}
    equal = Fusion(confidence=0).fuse(dense, lexical)
    assert max(equal, key=equal.__getitem__) == "a"
    fused = DEFAULT_FUSION.fuse(dense, lexical)
    assert CONFIDENCE > 0 and max(fused, key=fused.__getitem__) == "b"
    sure_dense = {"a": 0.9, "c": 0.3, "b": 0.2}
    fused = DEFAULT_FUSION.fuse(sure_dense, {"b": 3.1, "a": 3.0, "c": 2.9})
    assert max(fused, key=fused.__getitem__) == "a"
    # the scale stays that of plain votes: a page first in both rankings scores 2 / (k + 1)
    both = DEFAULT_FUSION.fuse({"a": 0.9, "b": 0.1}, {"a": 9.0, "b": 1.0})
    assert both["a"] == pytest.approx(2 / (RRF_K + 1)) and 0 < both["b"] < both["a"]
    dw, lw = DEFAULT_FUSION.weights(dense, lexical)
    assert dw == pytest.approx(1 + CONFIDENCE * (0.001 / 0.7)) and lw == pytest.approx(1 + CONFIDENCE * 0.75)


def test_rankings_without_scores_get_plain_votes() -> None:
    """Keys alone (a search server's or a test's ranking) carry no confidence: plain weighted RRF."""
    assert DEFAULT_FUSION.fuse(["a", "b"], ["b", "c"]) == rrf(["a", "b"], ["b", "c"])
    assert DEFAULT_FUSION.weights(["a"], {"b": 2.0, "c": 1.0}) == (1.0, pytest.approx(1 + CONFIDENCE * 0.5))


def test_the_engine_fuses_by_default(library, minilm, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A question quoting a rare figure finds its page through BM25 even where the sentence vector
    ranks a page on the same topic first; dense-only search stays one argument away."""
    from vrag_desktop.core.search import SearchEngine

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "capital.txt").write_text("Total capital ratio 18.5% at March 31, 2022, up from 18.1%.")
    (docs / "about.txt").write_text("How the bank manages its capital, and why capital ratios matter.")
    corpus = library.open("c", create=True)
    corpus.add_paths([docs])
    drain(corpus.scan())
    drain(corpus.build(minilm))
    corpus.close()
    engine = SearchEngine(library, ["c"], embedder=minilm)
    dense = SearchEngine(library, ["c"], embedder=minilm, hybrid=False)
    try:
        assert engine.hybrid and not dense.hybrid
        hits = engine.search("What was the capital ratio of 18.5%?", 2)
        assert hits[0].lexical_score is not None and hits[0].dense_score is not None
        assert hits[0].source.endswith("capital.txt")
        assert all(h.lexical_score is None for h in dense.search("capital ratio", 2))
    finally:
        engine.close()
        dense.close()


def test_people_see_the_score_that_ranks_and_the_cosine_only_labelled() -> None:
    """A list sorted by the fused vote must read in order (issue 31, item 5): the vote is what is
    shown; the cosine is shown beside it, named."""
    from vrag_desktop.core.search.hit import Hit

    fused = Hit(
        score=0.0328, name="a_1", source="/d/a.pdf", modality="page", dense_score=0.382, lexical_score=9.2
    )
    assert fused.fused and fused.score_text == "0.0328" and fused.cosine_text == "cosine 0.382"
    assert "fused vote" in fused.score_note and "cosine 0.382" in fused.score_note
    bm25_only = Hit(score=0.0161, name="b_2", source="/d/b.pdf", modality="page", lexical_score=3.0)
    assert bm25_only.fused and bm25_only.cosine_text == "" and bm25_only.score_text == "0.0161"
    dense = Hit(score=0.393, name="c", source="/d/c.png", modality="image", dense_score=0.393)
    assert not dense.fused and dense.score_text == "0.393" and dense.cosine_text == ""
    assert "cosine similarity" in dense.score_note
    server = Hit(score=0.64, name="d", source="/d/d.png", modality="image")  # a search server's hit
    assert not server.fused and server.score_text == "0.640" and "search server" in server.score_note
    # the ranks read in order even where the cosines do not (0.382 ranked above 0.393)
    ranked = [
        fused,
        Hit(score=0.0323, name="e", source="/e", modality="page", dense_score=0.393, lexical_score=1.0),
    ]
    assert [h.score_text for h in ranked] == ["0.0328", "0.0323"]
