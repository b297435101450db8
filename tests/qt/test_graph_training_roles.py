"""A training sample in the reasoning graph: masked nodes drawn apart by reason, a legend with the
sample's reward, correctness and advantage, and the details pane saying what the update did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vrag_desktop.core.agents.events import AgentEvent, Answer, GraphChanged, GraphNode
from vrag_desktop.core.run.store import RunRecorder
from vrag_desktop.core.run.training_roles import OFF_PATH, VALUABLE, sample_training
from vrag_desktop.qt.graph.graph_items import MASKED_OPACITY
from vrag_desktop.qt.graph.graph_view import GraphView
from vrag_desktop.qt.graph.node_details import NodeDetails, link_details

QUESTION = "Where are the Beta headquarters?"


def _events() -> list[AgentEvent]:
    root = GraphNode(id="root", kind="root", label=QUESTION, query=QUESTION)
    n1 = GraphNode(id="n1", kind="search", parents=("root",), label="n1", query="Beta headquarters")
    n2 = GraphNode(id="n2", kind="search", parents=("root",), label="n2", query="Beta offices")
    ans = GraphNode(id="answer", kind="answer", parents=("n1",), label="Oslo", summary="Oslo")
    return [
        GraphChanged(step=0, nodes=(root,)),
        GraphChanged(step=1, time=1.0, nodes=(root, n1)),
        GraphChanged(step=2, time=2.0, nodes=(root, n1, n2)),
        GraphChanged(step=3, time=3.0, nodes=(root, n1, n2, ans)),
        Answer(step=3, time=3.0, content="Oslo"),
    ]


TRAINING = {
    "step": 2,
    "algorithm": "ggpo",
    "reward": 1.3,
    "parts": {"format": 1.0, "judge": True, "ndcg": 1.0},
    "advantage": 0.71,
    "correct": True,
    "answer_path": ["root", "n1", "answer"],
    "segments": [
        {"node_id": "n1", "masked": False, "reason": "", "tokens": 9, "generated": 4},
        {"node_id": "n2", "masked": True, "reason": OFF_PATH, "tokens": 9, "generated": 4},
        {"node_id": "answer", "masked": False, "reason": "", "tokens": 9, "generated": 4},
    ],
}


@pytest.fixture
def view(graph_view: GraphView) -> GraphView:
    return graph_view


def test_scene_marks_masked_nodes_and_the_legend_follows(qtbot: Any, view: GraphView) -> None:
    scene = view.graph_scene()
    details = NodeDetails()
    qtbot.addWidget(details)
    link_details(scene, details)
    scene.load(_events())
    assert not view.legend.isVisible()  # a normal run: no legend, nothing masked
    assert all(not i.masked() and i.training_role == "" for i in scene.node_items())

    scene.set_training(sample_training({"training": TRAINING}, scene.graph.ids()))
    n2, n1 = scene.node_item("n2"), scene.node_item("n1")
    assert n2 is not None and n1 is not None
    assert n2.masked() and n2.training_role == "off_path" and n2.opacity() == pytest.approx(MASKED_OPACITY)
    assert OFF_PATH in n2.toolTip()
    assert not n1.masked() and n1.training_role == "trained" and n1.opacity() == 1.0
    root = scene.node_item("root")
    assert root is not None and root.training_role == ""
    view.grab()  # paints masked items without error

    assert view.legend.isVisible()
    text = view.legend.text()
    for words in (
        "GGPO sample",
        "step 2",
        "reward 1.30",
        "correct",
        "advantage +0.71",
        "off the answer path",
    ):
        assert words in text
    assert "retrieved reference evidence" in text  # GGPO names both reasons

    scene.select_node("n2")
    assert details.fields["training"].text() == f"GGPO: masked — {OFF_PATH}"
    scene.select_node("n1")
    assert details.fields["training"].text() == "GGPO: trained (advantage +0.71)"

    scene.load(_events())  # another run: roles and legend go
    assert not view.legend.isVisible()
    assert all(not i.masked() for i in scene.node_items())
    scene.select_node("n1")
    assert "training" not in details.fields


def test_valuable_masks_on_a_negative_rollout(view: GraphView) -> None:
    scene = view.graph_scene()
    scene.load(_events())
    negative = dict(TRAINING, advantage=-0.5, correct=False, reward=0.3)
    negative["segments"] = [
        {"node_id": "n1", "masked": True, "reason": VALUABLE},
        {"node_id": "answer", "masked": False, "reason": ""},
    ]
    scene.set_training(sample_training({"training": negative}, scene.graph.ids()))
    n1 = scene.node_item("n1")
    assert n1 is not None and n1.training_role == "valuable" and n1.masked()
    assert "incorrect" in view.legend.text() and "advantage -0.50" in view.legend.text()


def _record(root: Path, settings: dict[str, Any]) -> str:
    rec = RunRecorder(root, "vimrag", QUESTION, settings)
    for ev in _events():
        rec.record(ev)
    rec.finish()
    return rec.id


def test_main_window_opens_a_sample_with_roles_and_a_normal_run_without(qtbot: Any, ctx: Any) -> None:
    from vrag_desktop.qt.main_window import MainWindow

    samples = ctx.layout.training / "r" / "samples"
    sample = _record(samples, {"training": TRAINING})
    normal = _record(samples, {})
    win = MainWindow(ctx, first_run=False)
    qtbot.addWidget(win)
    win.show()
    win.open_sample(samples, sample)
    qtbot.waitUntil(lambda: win.graph_scene.training() is not None, timeout=10_000)
    n2 = win.graph_scene.node_item("n2")
    assert n2 is not None and n2.masked() and n2.training_role == "off_path"
    assert win.graph_view.legend.isVisible()
    assert "advantage +0.71" in win.graph_view.legend.text()

    win.open_sample(samples, normal)
    qtbot.waitUntil(lambda: win._current_run == normal, timeout=10_000)
    assert win.graph_scene.training() is None
    assert not win.graph_view.legend.isVisible()
    assert all(not i.masked() for i in win.graph_scene.node_items())
    win.training.shutdown()
