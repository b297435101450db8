"""Weighted reciprocal-rank fusion (core/search/fusion.py)."""

from __future__ import annotations

import pytest
from conftest import drain

from vrag_desktop.core.search.fusion import RRF_K, rrf


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


def test_people_see_the_similarity_not_the_fused_vote() -> None:
    from vrag_desktop.core.search.hit import Hit

    fused = Hit(
        score=0.0328, name="a_1", source="/d/a.pdf", modality="page", dense_score=0.71, lexical_score=9.2
    )
    assert fused.similarity == 0.71 and fused.score == 0.0328
    assert (
        Hit(score=0.64, name="b", source="/d/b.png", modality="image").similarity == 0.64
    )  # no dense score known
