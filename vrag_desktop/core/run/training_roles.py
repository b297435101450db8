"""What a training sample's nodes did in the update: trained, or masked out of the loss and why.

A training sample is an app run whose summary carries ``settings["training"]`` (written by the
trainer): the step, algorithm, reward, advantage, correctness and one entry per trained segment
(``node_id``, ``masked``, ``reason``). VimRAG segments name the memory-graph node they produced, which
is the reasoning graph's node id; VRAG has one segment per rollout (``node_id`` null), so every node
of the run takes that rollout's single role. Nodes without a segment (the question) have no role.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OFF_PATH", "VALUABLE", "NodeRole", "SampleTraining", "role_kind", "sample_training"]

# The trainer's mask reasons (trainer/vrag_trainer/ggpo.py MASK_OFF_PATH, MASK_VALUABLE).
OFF_PATH = "off the answer path (positive rollout)"
VALUABLE = "retrieved reference evidence (negative rollout)"


@dataclass(frozen=True)
class NodeRole:
    """One node's part in the update: ``masked`` (no gradient) with the trainer's ``reason``."""

    masked: bool
    reason: str = ""


def role_kind(role: NodeRole | None) -> str:
    """``"trained"``, ``"off_path"``, ``"valuable"`` or ``"masked"`` (another reason); ``""`` for none."""
    if role is None:
        return ""
    if not role.masked:
        return "trained"
    if role.reason == OFF_PATH:
        return "off_path"
    if role.reason == VALUABLE:
        return "valuable"
    return "masked"


@dataclass(frozen=True)
class SampleTraining:
    """A sample's training record and its per-node roles."""

    step: int = 0
    algorithm: str = ""
    reward: float = 0.0
    advantage: float = 0.0
    correct: bool | None = None
    roles: dict[str, NodeRole] = field(default_factory=dict)

    def role(self, node_id: str) -> NodeRole | None:
        return self.roles.get(node_id)

    def describe(self, node_id: str) -> str:
        """What the details pane says: ``GGPO: masked — <reason>`` or ``GGPO: trained (advantage +0.71)``."""
        role = self.roles.get(node_id)
        if role is None:
            return ""
        algo = (self.algorithm or "training").upper()
        if role.masked:
            return f"{algo}: masked — {role.reason or 'no reason given'}"
        return f"{algo}: trained (advantage {self.advantage:+.2f})"

    def headline(self) -> str:
        """One line for a legend: algorithm, step, reward, correctness, advantage."""
        parts = [f"{(self.algorithm or 'training').upper()} sample"]
        if self.step:
            parts.append(f"step {self.step}")
        parts.append(f"reward {self.reward:.2f}")
        if self.correct is not None:
            parts.append("correct" if self.correct else "incorrect")
        parts.append(f"advantage {self.advantage:+.2f}")
        return " · ".join(parts)

    def kinds(self) -> set[str]:
        return {role_kind(r) for r in self.roles.values()}


def _num(value: Any, default: float = 0.0) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def sample_training(settings: Mapping[str, Any] | None, node_ids: Iterable[str]) -> SampleTraining | None:
    """The training record in a run summary's ``settings`` mapped onto the run's graph ``node_ids``;
    ``None`` when the run is not a training sample."""
    t = (settings or {}).get("training")
    if not isinstance(t, Mapping):
        return None
    ids = list(node_ids)
    by_node: dict[str, list[NodeRole]] = {}
    loose: list[NodeRole] = []  # segments without a node (VRAG: the whole rollout)
    for seg in t.get("segments") or []:
        if not isinstance(seg, Mapping):
            continue
        role = NodeRole(bool(seg.get("masked")), str(seg.get("reason") or ""))
        nid = seg.get("node_id")
        if nid is None or nid == "":
            loose.append(role)
        else:
            by_node.setdefault(str(nid), []).append(role)
    roles = {nid: _merge(rs) for nid, rs in by_node.items() if nid in ids}
    if loose and not by_node:  # one role for every node the rollout drew (the question excluded)
        whole = _merge(loose)
        roles = {nid: whole for nid in ids if nid != "root"}
    correct = t.get("correct")
    step = t.get("step")
    return SampleTraining(
        step=int(step) if isinstance(step, int | float) else 0,
        algorithm=str(t.get("algorithm") or ""),
        reward=_num(t.get("reward")),
        advantage=_num(t.get("advantage")),
        correct=bool(correct) if isinstance(correct, bool) else None,
        roles=roles,
    )


def _merge(roles: list[NodeRole]) -> NodeRole:
    """Several segments on one node: trained if any was trained, else the first masked reason."""
    trained = [r for r in roles if not r.masked]
    return trained[0] if trained else roles[0]
