"""A training sample's settings["training"] mapped onto its reasoning-graph nodes."""

from __future__ import annotations

from vrag_desktop.core.run.training_roles import (
    OFF_PATH,
    VALUABLE,
    NodeRole,
    role_kind,
    sample_training,
)


def _training(segments: list[dict], **kw: object) -> dict:
    return {
        "training": {
            "step": 3,
            "algorithm": "ggpo",
            "reward": 0.3,
            "parts": {"format": 1.0, "judge": False, "ndcg": 1.0},
            "advantage": -0.866,
            "correct": False,
            "answer_path": ["root", "n1", "answer"],
            "segments": segments,
            **kw,
        }
    }


def _seg(node_id: str | None, masked: bool, reason: str = "") -> dict:
    return {"node_id": node_id, "masked": masked, "reason": reason, "tokens": 10, "generated": 5}


def test_not_a_sample() -> None:
    assert sample_training({}, ["root"]) is None
    assert sample_training(None, ["root"]) is None
    assert sample_training({"model": "x"}, ["root"]) is None


def test_vimrag_segments_map_to_their_nodes() -> None:
    settings = _training([_seg("n1", True, VALUABLE), _seg("n2", True, OFF_PATH), _seg("answer", False)])
    t = sample_training(settings, ["root", "n1", "n2", "answer"])
    assert t is not None
    assert t.roles == {
        "n1": NodeRole(True, VALUABLE),
        "n2": NodeRole(True, OFF_PATH),
        "answer": NodeRole(False, ""),
    }
    assert t.role("root") is None  # the question has no segment
    assert [role_kind(t.role(n)) for n in ("root", "n1", "n2", "answer")] == [
        "",
        "valuable",
        "off_path",
        "trained",
    ]
    assert t.describe("n2") == "GGPO: masked — off the answer path (positive rollout)"
    assert t.describe("answer") == "GGPO: trained (advantage -0.87)"
    assert t.describe("root") == ""
    assert t.headline() == "GGPO sample · step 3 · reward 0.30 · incorrect · advantage -0.87"
    assert t.kinds() == {"valuable", "off_path", "trained"}


def test_segment_of_a_node_not_drawn_is_ignored() -> None:
    t = sample_training(_training([_seg("n9", True, OFF_PATH)]), ["root", "answer"])
    assert t is not None and t.roles == {}


def test_vrag_one_segment_marks_every_node() -> None:
    settings = _training([_seg(None, False)], algorithm="grpo", advantage=0.71, correct=True)
    t = sample_training(settings, ["root", "s1-search", "answer"])
    assert t is not None
    assert set(t.roles) == {"s1-search", "answer"}
    assert all(r == NodeRole(False, "") for r in t.roles.values())
    assert t.describe("answer") == "GRPO: trained (advantage +0.71)"
    assert "correct" in t.headline() and "incorrect" not in t.headline()


def test_vrag_masked_rollout_and_bad_values() -> None:
    settings = _training([_seg(None, True, "some other reason")], reward="x", advantage=None, correct=None)
    t = sample_training(settings, ["root", "s1-search"])
    assert t is not None
    assert role_kind(t.role("s1-search")) == "masked"
    assert t.reward == 0.0 and t.advantage == 0.0 and t.correct is None
    assert "correct" not in t.headline()


def test_a_node_trained_by_any_segment_is_trained() -> None:
    t = sample_training(_training([_seg("n1", True, OFF_PATH), _seg("n1", False)]), ["n1"])
    assert t is not None and t.roles["n1"] == NodeRole(False, "")
