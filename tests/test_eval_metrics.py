"""Retrieval metrics against values worked out by hand, including the original reward's NDCG quirks."""

from __future__ import annotations

import math

import pytest

from vrag_desktop.core.eval.metrics import (
    golden_keys,
    hit_at_k,
    mrr,
    ndcg_at_k,
    ndcg_original,
    page_key,
    recall_at_k,
    retrieved_key,
)

L2, L3, L4 = math.log2(2), math.log2(3), math.log2(4)  # 1, 1.585, 2


def test_keys_follow_the_originals_naming() -> None:
    assert page_key("annual_report.pdf", 3) == "annual_report_3"
    assert page_key("docs/2024/annual.report.pdf", 1) == "annual.report_1"
    assert page_key("C:\\docs\\scan.pdf", 2) == "scan_2"
    assert page_key("lighthouse.jpg") == "lighthouse"
    assert golden_keys("a.pdf", [2, 5, 2]) == ["a_2", "a_5"]  # repeats dropped, order kept
    assert golden_keys("tour.mp4", []) == ["tour"]  # no page: the whole file
    assert golden_keys("", [1]) == []
    # a hit on a page of a file the dataset names as a whole counts as that file
    assert retrieved_key("/data/tour.mp4", 3, {"tour"}) == "tour"
    assert retrieved_key("/data/a.pdf", 3, {"a_2"}) == "a_3"
    assert retrieved_key("/data/photo.png", None) == "photo"


def test_recall_hit_and_mrr() -> None:
    retrieved = ["a_1", "b_4", "a_2", "c_1", "a_3"]
    golden = {"a_2", "a_3", "z_9"}
    assert recall_at_k(retrieved, golden, 1) == 0.0
    assert recall_at_k(retrieved, golden, 3) == pytest.approx(1 / 3)
    assert recall_at_k(retrieved, golden, 5) == pytest.approx(2 / 3)
    assert hit_at_k(retrieved, golden, 2) == 0.0 and hit_at_k(retrieved, golden, 3) == 1.0
    assert mrr(retrieved, golden) == pytest.approx(1 / 3)
    assert mrr(retrieved, golden, k=2) == 0.0
    assert recall_at_k(retrieved, set(), 5) == 0.0 and mrr([], golden) == 0.0
    with pytest.raises(ValueError, match="k must be at least 1"):
        recall_at_k(retrieved, golden, 0)


def test_ndcg_at_k_by_hand() -> None:
    # golden {g1, g2}; retrieved [x, g1, g2]: DCG = 1/log2(3) + 1/log2(4); IDCG@3 = 1/log2(2) + 1/log2(3)
    got = ndcg_at_k(["x", "g1", "g2"], {"g1", "g2"}, 3)
    assert got == pytest.approx((1 / L3 + 1 / L4) / (1 / L2 + 1 / L3))  # (0.6309 + 0.5) / 1.6309
    assert got == pytest.approx(0.69343, abs=1e-5)
    # a golden key retrieved twice counts once; k cuts the ideal list too
    assert ndcg_at_k(["g1", "g1"], {"g1", "g2"}, 2) == pytest.approx(1 / (1 + 1 / L3))
    assert ndcg_at_k(["g1"], {"g1", "g2", "g3"}, 1) == 1.0
    assert ndcg_at_k(["x"], set(), 1) == 0.0


def test_ndcg_original_reproduces_the_rewards_quirks() -> None:
    # As in the original: rel per position (duplicates count), IDCG over [1]*|golden| + [0]*(n - |golden|).
    # retrieved [x, g1]: DCG = 1/log2(3); golden {g1}: IDCG = 1/log2(2) = 1 → 0.6309
    assert ndcg_original(["x", "g1"], {"g1"}) == pytest.approx(1 / L3)
    # a page retrieved twice counts twice: DCG = 1 + 1/log2(3) = 1.631 > IDCG = 1 → above 1
    assert ndcg_original(["g1", "g1"], {"g1"}) == pytest.approx(1 + 1 / L3)
    # more golden pages than retrieved ones: IDCG = 1 + 1/log2(3) + 1/log2(4) over 3 golden for 1 retrieved
    assert ndcg_original(["g1"], {"g1", "g2", "g3"}) == pytest.approx(1 / (1 + 1 / L3 + 1 / L4))
    # the textbook form cuts the ideal list at k and reaches 1 there
    assert ndcg_at_k(["g1"], {"g1", "g2", "g3"}, 1) == 1.0
    assert ndcg_original([], {"g1"}) == 0.0  # IDCG = 1, DCG = 0
    assert ndcg_original(["x"], set()) == 0.0  # IDCG = 0 → 0, as the original


def test_a_page_shown_twice_counts_once_for_the_reward() -> None:
    """VimRAG can retrieve a page again; the reward's NDCG stays in [0, 1]."""
    from vrag_desktop.core.eval.metrics import first_seen, ndcg_original

    shown = ["a_1", "b_2", "a_1"]
    assert first_seen(shown) == ["a_1", "b_2"]
    assert ndcg_original(shown, {"a_1"}) > 1  # the original's formula, fed repeats
    assert ndcg_original(first_seen(shown), {"a_1"}) == 1.0
