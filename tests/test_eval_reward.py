"""The composite training reward against hand-computed values."""

from __future__ import annotations

import math

import pytest

from vrag_desktop.core.eval.reward import RewardParts, RewardWeights, composite_reward, needs_judge

pytestmark = pytest.mark.timeout(30)


def test_original_weights() -> None:
    w = RewardWeights()
    assert (w.judge, w.format, w.ndcg) == (0.7, 0.1, 0.2)


def test_composite_values() -> None:
    # 0.7*1 + 0.1*1 + 0.2*0.5 = 0.7 + 0.1 + 0.1 = 0.9
    assert composite_reward(RewardParts(format=1.0, judge=True, ndcg=0.5)) == pytest.approx(0.9)
    # 0.7*0 + 0.1*1 + 0.2*1 = 0.3
    assert composite_reward(RewardParts(1.0, False, 1.0)) == pytest.approx(0.3)
    # 0.7*1 + 0.1*1 + 0.2*1 = 1.0
    assert composite_reward(RewardParts(1.0, 1, 1.0)) == pytest.approx(1.0)
    # 0 + 0.1 + 0 = 0.1
    assert composite_reward(RewardParts(1.0, False, 0.0)) == pytest.approx(0.1)


def test_format_gate() -> None:
    assert not needs_judge(0.0)
    assert needs_judge(1.0)
    # format 0: reward 0 whatever the judge and NDCG say
    assert composite_reward(RewardParts(0.0, True, 1.0)) == 0.0
    assert composite_reward(RewardParts(0.0, None, 1.0)) == 0.0
    assert not RewardParts(0.0, None, 1.0).judge_failed  # the judge was not needed


def test_failed_judge_counts_as_zero_and_is_reported() -> None:
    parts = RewardParts(1.0, None, 0.5)
    # 0.7*0 + 0.1*1 + 0.2*0.5 = 0.2
    assert composite_reward(parts) == pytest.approx(0.2)
    assert parts.judge_failed
    assert not RewardParts(1.0, False, 0.5).judge_failed


def test_custom_weights_are_not_renormalised() -> None:
    # judge only (the original's validation reward): 1*1 = 1
    assert composite_reward(RewardParts(1.0, True, 0.3), RewardWeights(1.0, 0.0, 0.0)) == 1.0
    # weights summing to 2: 1*1 + 0.5*1 + 0.5*0.4 = 1.7
    w = RewardWeights(judge=1.0, format=0.5, ndcg=0.5)
    assert composite_reward(RewardParts(1.0, True, 0.4), w) == pytest.approx(1.7)


@pytest.mark.parametrize(
    "kw",
    [
        {"judge": -0.1},
        {"ndcg": math.nan},
        {"format": math.inf},
        {"judge": 0.0, "format": 0.0, "ndcg": 0.0},
    ],
)
def test_weights_validated(kw: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RewardWeights(**kw)


def test_parts_validated() -> None:
    with pytest.raises(ValueError):
        RewardParts(1.0, True, 1.5)
    with pytest.raises(ValueError):
        RewardParts(math.nan, True, 0.5)
    with pytest.raises(ValueError):
        RewardParts(1.0, 2.0, 0.5)
    # float error just above 1 (an NDCG computed as x / x) is tolerated and clamped
    assert composite_reward(RewardParts(1.0, True, 1.0 + 1e-12)) == pytest.approx(1.0)
