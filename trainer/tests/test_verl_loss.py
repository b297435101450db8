"""GGPO's verl loss and the segment-aware advantages, against hand computations."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from vrag_trainer.verl.loss import compute_policy_loss_ggpo, ggpo_policy_loss, segment_advantages


def test_ggpo_loss_matches_a_hand_computation() -> None:
    old = torch.zeros(3, 3)
    new = torch.tensor([[0.3, 0.3, 0.0], [-0.1, -0.1, -0.1], [0.5, 0.5, 0.5]])
    adv = torch.tensor([[1.0] * 3, [-2.0] * 3, [4.0] * 3])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 0, 0]])  # segment 3 masked by GGPO (no loss tokens)
    loss, m = ggpo_policy_loss(old, new, adv, mask, clip_low=0.2, clip_high=0.2)
    # seg 1: s = e^0.3 = 1.3499 > 1.2 clipped, A = 1 → max(-1.3499, -1.2) = -1.2
    # seg 2: s = e^-0.1 = 0.9048, A = -2 → max(1.8097, 1.8097) = 1.8097
    # seg 3: weight 0; the sum is divided by all 3 segments
    want = (-1.2 + 2 * math.exp(-0.1)) / 3
    assert loss.item() == pytest.approx(want, rel=1e-5)
    assert m["actor/pg_clipfrac"] == pytest.approx(0.5) and m["actor/ggpo_masked_fraction"] == pytest.approx(
        1 / 3
    )
    # explicit weights and verl's global batch size (a micro-batch of a 6-segment step, 2 ranks)
    loss2, _ = ggpo_policy_loss(
        old,
        new,
        adv,
        mask,
        clip_low=0.2,
        clip_high=0.2,
        weight=torch.tensor([0.0, 1.0, 1.0]),
        num_segments=6,
        dp_size=2,
    )
    assert loss2.item() == pytest.approx(2 * math.exp(-0.1) / 6 * 2, rel=1e-5)


def test_gradient_flows_only_through_unclipped_live_segments() -> None:
    old = torch.zeros(2, 2)
    new = torch.tensor([[0.05, 0.05], [0.5, 0.5]], requires_grad=True)
    adv = torch.tensor([[1.0, 1.0], [1.0, 1.0]])
    loss, _ = ggpo_policy_loss(old, new, adv, torch.ones(2, 2), clip_low=0.2, clip_high=0.2)
    loss.backward()
    g = new.grad
    assert g is not None
    # seg 1: d(-s/2)/d lp_t = -s/(2·2) per token; seg 2 is clipped (A>0, s>1.2): no gradient
    assert g[0].tolist() == pytest.approx([-math.exp(0.05) / 4] * 2, rel=1e-5)
    assert g[1].tolist() == [0.0, 0.0]


def test_registry_shim_reads_verl_config() -> None:
    cfg = SimpleNamespace(clip_ratio=0.2, clip_ratio_low=None, clip_ratio_high=0.28, global_batch_info={})
    old, new = torch.zeros(1, 2), torch.full((1, 2), 0.25)
    loss, _ = compute_policy_loss_ggpo(old, new, torch.ones(1, 2), torch.ones(1, 2), config=cfg)
    assert loss.item() == pytest.approx(-1.28, rel=1e-5)  # e^0.25 = 1.284 clipped at 1 + clip_ratio_high


def test_segment_advantages_count_each_rollout_once() -> None:
    # group g: rollout a (3 segments, reward 1), rollout b (1 segment, reward 0); group h: one rollout
    index = ["g::a", "g::a", "g::a", "g::b", "h::c", "g::d::skip"]
    scores = [1.0, 1.0, 1.0, 0.0, 0.7, 5.0]
    adv = segment_advantages(scores, index)
    std = math.sqrt(0.5)  # unbiased std of {1, 0}
    assert adv[:4] == pytest.approx([0.5 / std] * 3 + [-0.5 / std], rel=1e-5)
    assert adv[4] == pytest.approx(0.7) and adv[5] == 0.0  # a group of one: mean 0, std 1; skipped: 0
    # plain uids (VRAG: one row per rollout) behave as verl's GRPO
    assert segment_advantages([1.0, 0.0], ["u", "u"]) == pytest.approx([0.5 / std, -0.5 / std], rel=1e-5)
