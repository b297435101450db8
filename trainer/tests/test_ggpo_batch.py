"""GRPO advantages and GGPO masks against hand-computed graphs; rows → TRL's loss batch."""

from __future__ import annotations

import inspect
import math
import re

import pytest
from vrag_trainer.batch import LOSS_KEYS, collate
from vrag_trainer.ggpo import MASK_OFF_PATH, MASK_VALUABLE, Row, group_advantages, mask_reason, training_rows
from vrag_trainer.policy import Segment
from vrag_trainer.rollout import Rollout

from vrag_desktop.core.eval.reward import RewardParts


def _rollout(
    group: int,
    reward: float,
    correct: bool,
    nodes: list[tuple[str | None, list[str]]],
    path: list[str],
    golden: tuple[str, ...] = ("alpha_1",),
    search_errors: int = 0,
) -> Rollout:
    segs = [
        Segment(input_ids=[1, 2, 3], loss_mask=[0, 1, 1], prompt_len=1, node_id=n, retrieved=list(ret))
        for n, ret in nodes
    ]
    return Rollout(
        uid=f"u{group}",
        group=group,
        segments=segs,
        answer="a",
        forced=False,
        parts=RewardParts(format=1.0, judge=correct, ndcg=0.0),
        reward=reward,
        golden=golden,
        retrieved=[k for _, ret in nodes for k in ret],
        answer_path=path,
        error=None,
        seconds=0.0,
        search_errors=search_errors,
    )


def test_group_advantages_match_the_original_estimator() -> None:
    adv = group_advantages([1.0, 0.0, 0.5, 0.5, 0.7], [0, 0, 1, 1, 2])
    s = math.sqrt(0.5)  # unbiased std of (1, 0)
    assert adv[0] == pytest.approx(0.5 / (s + 1e-6)) and adv[1] == pytest.approx(-0.5 / (s + 1e-6))
    assert adv[2] == adv[3] == 0.0  # no spread: no signal
    assert adv[4] == pytest.approx(0.7)  # a group of one: mean 0, std 1
    # a rollout spoiled by the search server is out of its group's statistics and gets nothing
    adv = group_advantages([1.0, 0.0, 0.0], [0, 0, 0], [True, True, False])
    assert adv[2] == 0.0 and adv[0] == pytest.approx(0.5 / (s + 1e-6))


def test_ggpo_mask_positive_rollout_masks_dead_ends() -> None:
    # root -> n1 -> answer ; root -> n2 (dead end) ; an unparsed segment (no node)
    r = _rollout(0, 1.0, True, [("n1", []), ("n2", []), (None, []), ("answer", [])], ["root", "n1", "answer"])
    assert [mask_reason(r, s) for s in r.segments] == ["", MASK_OFF_PATH, MASK_OFF_PATH, ""]


def test_ggpo_mask_negative_rollout_spares_valuable_retrievals() -> None:
    r = _rollout(
        0, 0.0, False, [("n1", ["alpha_1"]), ("n2", ["beta_2"]), ("answer", [])], ["root", "n2", "answer"]
    )
    assert [mask_reason(r, s) for s in r.segments] == [MASK_VALUABLE, "", ""]
    # without reference evidence nothing counts as valuable
    r = _rollout(0, 0.0, False, [("n1", ["alpha_1"])], [], golden=())
    assert mask_reason(r, r.segments[0]) == ""


def test_training_rows_broadcast_the_advantage_and_apply_masks() -> None:
    good = _rollout(0, 1.0, True, [("n1", []), ("n2", []), ("answer", [])], ["root", "n1", "answer"])
    bad = _rollout(0, 0.0, False, [("n1", ["alpha_1"]), ("answer", [])], ["root", "n1", "answer"])
    broken = _rollout(0, 0.0, False, [("n1", [])], [], search_errors=1)
    rows = training_rows([good, bad, broken], "ggpo")
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    assert [(round(r.advantage, 4), r.weight) for r in rows] == [
        (round(a, 4), 1),
        (round(a, 4), 0),
        (round(a, 4), 1),
        (round(-a, 4), 0),
        (round(-a, 4), 1),
        (0.0, 0),
    ]
    grpo = training_rows([good, bad], "grpo")
    assert all(r.weight == 1 for r in grpo) and len(grpo) == 5


def test_collate_builds_what_trl_reads(processor) -> None:  # type: ignore[no-untyped-def]
    import torch

    pad = processor.tokenizer.pad_token_id
    img = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    s1 = Segment(
        input_ids=[50, 60, img, img, 70, 80, 90],
        loss_mask=[0, 0, 0, 0, 1, 1, 0],
        prompt_len=4,
        pixel_values=[torch.ones(8, 3)],
        image_grid_thw=[torch.tensor([1, 2, 4])],
    )
    s2 = Segment(input_ids=[50, 70, 80], loss_mask=[0, 1, 1], prompt_len=1)
    b = collate([Row(s1, 1.5, 1, 0), Row(s2, -0.5, 0, 1)], pad, img)
    assert b["prompt_ids"].tolist() == [[50, 60, img, img], [pad, pad, pad, 50]]
    assert b["prompt_mask"].tolist() == [[1, 1, 1, 1], [0, 0, 0, 1]]
    assert b["completion_ids"].tolist() == [[70, 80, 90], [70, 80, pad]]
    assert b["completion_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert b["tool_mask"].tolist() == [[1, 1, 0], [0, 0, 0]]  # state mask x GGPO weight
    assert b["advantages"].tolist() == [1.5, -0.5]
    assert b["num_images"] == [1, 0] and b["pixel_values"].shape == (8, 3)
    assert b["mm_token_type_ids"].tolist()[0] == [0, 0, 1, 1, 0, 0, 0]
    assert int(b["num_items_in_batch"]) == 2
    assert set(b) <= set(LOSS_KEYS)


def test_trl_version_and_the_keys_its_loss_reads() -> None:
    """The private hook we rely on: pinned TRL, and every key ``_compute_loss`` reads is either
    one we provide or one it treats as optional."""
    import trl
    from trl import GRPOTrainer

    assert trl.__version__ == "1.16.0"
    src = inspect.getsource(GRPOTrainer._compute_loss)
    required = set(re.findall(r'inputs\["(\w+)"\]', src))
    optional = set(re.findall(r'inputs\.get\("(\w+)"', src))
    we_set = set(LOSS_KEYS) | {"ref_per_token_logps"}
    assert required <= we_set, required - we_set  # importance_sampling_ratio included (vLLM)
    assert {"pixel_values", "image_grid_thw", "num_images", "mm_token_type_ids"} <= optional
    sig = inspect.signature(GRPOTrainer._get_per_token_logps_and_entropies)
    assert {"pixel_values", "image_grid_thw", "num_images", "mm_token_type_ids"} <= set(sig.parameters)
