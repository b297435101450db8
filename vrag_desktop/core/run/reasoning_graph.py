"""The reasoning graph of one run, built event by event: what the graph view draws and the details
panel shows.

It lives in core (no Qt) because its rules are the part worth testing: which node a search result,
a memory judgement or a crop belongs to, and where each node sits. The layout is *stable* — a node,
once placed, never moves — so a person reading a live run never sees the graph jump; a new node takes
the free slot of its layer nearest to its parents. ``apply`` returns a :class:`GraphDelta` so a view
updates only what changed; ``GraphChanged`` events carry full snapshots, which are diffed by id.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from vrag_desktop.core.agents.events import (
    AgentError,
    AgentEvent,
    Answer,
    BBox,
    Crop,
    GraphChanged,
    GraphNode,
    ImageShown,
    Memorize,
    SearchResults,
    SearchStarted,
    ThinkDelta,
    event_from_dict,
)
from vrag_desktop.core.run.graph_nodes import KIND_CAPTIONS, Edge, GraphDelta, Layout, NodeInfo


class _Acc:
    """Collects one event's effects."""

    def __init__(self) -> None:
        self.added: list[str] = []
        self.changed: list[str] = []
        self.removed: list[str] = []
        self.added_edges: list[Edge] = []
        self.removed_edges: list[Edge] = []
        self.details: list[str] = []

    def touch(self, nid: str, visual: bool = True) -> None:
        if visual:
            self.changed.append(nid)
        self.details.append(nid)

    def delta(self) -> GraphDelta:
        added = set(self.added)
        return GraphDelta(
            added=tuple(self.added),
            changed=_unique(n for n in self.changed if n not in added),
            removed=tuple(self.removed),
            added_edges=tuple(self.added_edges),
            removed_edges=tuple(self.removed_edges),
            details=_unique(self.details),
        )


class ReasoningGraph:
    """The run's DAG with details and a stable layered layout; see the module docstring."""

    def __init__(self, layout: Layout | None = None) -> None:
        self.layout = layout or Layout()
        self.reset()

    @classmethod
    def from_events(
        cls, events: Iterable[AgentEvent | Mapping[str, Any]], layout: Layout | None = None
    ) -> ReasoningGraph:
        g = cls(layout)
        for ev in events:
            g.apply(ev)
        return g

    def reset(self) -> None:
        """Forget everything (a new run)."""
        self._live: dict[str, NodeInfo] = {}  # in order of arrival
        self._gone: dict[str, NodeInfo] = {}
        self._snap: dict[str, GraphNode] = {}  # the last snapshot's record of each live node
        self._slot: dict[str, tuple[int, int]] = {}  # id -> (layer, half-slot)
        self._occupied: dict[int, set[int]] = {}  # layer -> half-slots holding a node centre
        self._channels: dict[int, dict[int, int]] = {}  # layer -> half-slot -> long edges passing through
        self._routes: dict[Edge, tuple[int, int, int]] = {}  # long edge -> (half-slot, first, last layer)
        self._edges: dict[Edge, None] = {}
        self._waiting: dict[str, set[str]] = {}  # absent parent -> children naming it
        self._pending: dict[tuple[Any, ...], list[Any]] = {}  # attachments for nodes not here yet
        self._by_step: dict[int, list[str]] = {}
        self._think: dict[int, list[str]] = {}
        self._newest: str | None = None

    # ------------------------------------------------------------------ queries
    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._live

    def node(self, node_id: str) -> NodeInfo:
        """A node, live or removed (KeyError when unknown)."""
        info = self._live.get(node_id) or self._gone.get(node_id)
        if info is None:
            raise KeyError(node_id)
        return info

    def get(self, node_id: str) -> NodeInfo | None:
        return self._live.get(node_id) or self._gone.get(node_id)

    def nodes(self) -> list[NodeInfo]:
        """Live nodes in order of arrival."""
        return list(self._live.values())

    def ids(self) -> list[str]:
        return list(self._live)

    def removed(self) -> list[NodeInfo]:
        return list(self._gone.values())

    def edges(self) -> list[Edge]:
        """(parent, child) for every edge whose two ends are live."""
        return list(self._edges)

    def newest(self) -> str | None:
        """The live node added last (what a live view keeps in sight)."""
        return self._newest

    def rect(self, node_id: str) -> tuple[float, float, float, float]:
        """(left, top, width, height) of a node in scene units."""
        n = self.node(node_id)
        w, h = self.layout.node_width, self.layout.node_height
        return (n.x - w / 2, n.y - h / 2, w, h)

    def bounds(self) -> tuple[float, float, float, float]:
        """(left, top, right, bottom) around all live nodes; zeros when empty."""
        if not self._live:
            return (0.0, 0.0, 0.0, 0.0)
        w, h = self.layout.node_width / 2, self.layout.node_height / 2
        xs = [n.x for n in self._live.values()]
        ys = [n.y for n in self._live.values()]
        return (min(xs) - w, min(ys) - h, max(xs) + w, max(ys) + h)

    # ------------------------------------------------------------------ events
    def apply(self, event: AgentEvent | Mapping[str, Any]) -> GraphDelta:
        """Take one event into the graph; return what changed."""
        if not isinstance(event, AgentEvent):
            try:
                event = event_from_dict(event)
            except ValueError:  # a kind this version does not know (a newer saved run): nothing to draw
                return GraphDelta()
        acc = _Acc()
        if isinstance(event, GraphChanged):
            self._on_snapshot(event, acc)
        elif isinstance(event, SearchResults):
            self._attach(acc, event.node_id, event.step, "search", lambda n: _set_hits(n, event))
        elif isinstance(event, SearchStarted):
            if event.content:
                self._attach(acc, event.node_id, event.step, "search", lambda n: _set_query(n, event.content))
        elif isinstance(event, ImageShown):
            self._attach(acc, None, event.step, "search", lambda n: n.images.append(event), visual=False)
        elif isinstance(event, BBox):
            self._attach(acc, None, event.step, "crop", lambda n: n.boxes.append(event), visual=False)
        elif isinstance(event, Crop):
            self._attach(acc, None, event.step, "crop", lambda n: n.crops.append(event))
        elif isinstance(event, Memorize):
            self._attach(acc, event.node_id, event.step, "search", lambda n: _set_memory(n, event))
        elif isinstance(event, Answer):
            self._on_answer(event, acc)
        elif isinstance(event, ThinkDelta):
            self._think.setdefault(event.step, []).append(event.content)
            for nid in self._by_step.get(event.step, ()):
                if nid in self._live:
                    acc.touch(nid, visual=False)
        elif isinstance(event, AgentError):
            self._attach(
                acc, None, event.step, "*", lambda n: n.errors.append(f"{event.kind}: {event.content}")
            )
        return acc.delta()

    # ------------------------------------------------------------------ snapshots
    def _on_snapshot(self, ev: GraphChanged, acc: _Acc) -> None:
        seen: set[str] = set()
        new: list[GraphNode] = []
        for gn in ev.nodes:
            if gn.id in seen:
                continue  # a duplicate id: the first record wins
            seen.add(gn.id)
            prev = self._snap.get(gn.id)
            if prev is None:
                if gn.id in self._live:  # a synthetic answer now named by the agent: take the real one
                    self._remove(gn.id, acc)
                new.append(gn)
            elif prev != gn:
                self._update(gn, prev, acc)
        for nid in [n for n, info in self._live.items() if n not in seen and not info.synthetic]:
            self._remove(nid, acc)
        last: NodeInfo | None = None
        for gn in _parents_first(new):
            last = self._add(gn, ev.step, ev.time, acc)
        if last is not None:  # errors of this step go to its last node (the action, not the thought)
            for fn in self._pending.pop(("step", ev.step, "*"), ()):
                fn(last)

    def _update(self, gn: GraphNode, prev: GraphNode, acc: _Acc) -> None:
        self._snap[gn.id] = gn
        info = self._live[gn.id]
        info.kind, info.label, info.query, info.summary = gn.kind, gn.label, gn.query, gn.summary
        if gn.parents != prev.parents:  # edges follow; the node keeps its place
            old, now = set(prev.parents), set(gn.parents)
            for p in old - now:
                if (p, gn.id) in self._edges:
                    self._unlink((p, gn.id), acc)
                self._waiting.get(p, set()).discard(gn.id)
            info.parents = tuple(dict.fromkeys(gn.parents))
            for p in info.parents:
                if p not in old:
                    self._link(p, gn.id, acc)
        acc.touch(gn.id)

    def _add(self, gn: GraphNode, step: int, time: float, acc: _Acc, synthetic: bool = False) -> NodeInfo:
        self._gone.pop(gn.id, None)
        info = NodeInfo(
            id=gn.id,
            kind=gn.kind,
            parents=tuple(dict.fromkeys(gn.parents)),
            label=gn.label,
            query=gn.query,
            summary=gn.summary,
            step=step,
            time=time,
            synthetic=synthetic,
        )
        info.think_parts = self._think.setdefault(step, [])
        if not synthetic:
            self._snap[gn.id] = gn
        self._place(info)
        self._live[gn.id] = info
        self._by_step.setdefault(step, []).append(gn.id)
        self._newest = gn.id
        acc.added.append(gn.id)
        acc.details.append(gn.id)
        for p in info.parents:
            self._link(p, gn.id, acc)
        for child in sorted(self._waiting.pop(gn.id, set()), key=self._order):
            if child in self._live and gn.id in self._live[child].parents:
                self._link(gn.id, child, acc)
        for key in (("id", gn.id), ("step", step, gn.kind)):
            for fn in self._pending.pop(key, ()):
                fn(info)
        return info

    def _order(self, nid: str) -> int:
        return list(self._live).index(nid) if nid in self._live else 0

    def _link(self, parent: str, child: str, acc: _Acc) -> None:
        if parent in self._live and child in self._live:
            if (parent, child) not in self._edges:
                self._edges[(parent, child)] = None
                self._route((parent, child))
                acc.added_edges.append((parent, child))
        else:
            self._waiting.setdefault(parent, set()).add(child)

    def _unlink(self, e: Edge, acc: _Acc) -> None:
        del self._edges[e]
        route = self._routes.pop(e, None)
        if route is not None:
            c, first, last = route
            for layer in range(first, last + 1):
                left = self._channels[layer][c] - 1
                if left:
                    self._channels[layer][c] = left
                else:
                    del self._channels[layer][c]
        acc.removed_edges.append(e)

    def _remove(self, nid: str, acc: _Acc) -> None:
        info = self._live.pop(nid)
        info.removed = True
        self._gone[nid] = info
        self._snap.pop(nid, None)
        layer, slot = self._slot.pop(nid)
        self._occupied[layer].discard(slot)
        for e in [e for e in self._edges if nid in e]:
            self._unlink(e, acc)
            if e[1] != nid and e[1] in self._live:  # a surviving child waits for this parent to return
                self._waiting.setdefault(nid, set()).add(e[1])
        for p in info.parents:
            self._waiting.get(p, set()).discard(nid)
        if self._newest == nid:
            self._newest = next(reversed(self._live), None)
        acc.removed.append(nid)

    # ------------------------------------------------------------------ layout
    def _place(self, info: NodeInfo) -> None:
        """Longest-path layer; the free half-slot nearest the parents' mean (a centre needs its two
        neighbouring half-slots free, so nodes never overlap). Placed nodes are never moved."""
        placed = [self._slot[p] for p in info.parents if p in self._slot]
        layer = 1 + max(s[0] for s in placed) if placed else 0
        target = sum(s[1] for s in placed) / len(placed) if placed else 0.0
        occ = self._occupied.setdefault(layer, set())
        chan = self._channels.get(layer, {})  # long edges pass there: no node centre on them
        d = round(target)
        # on a tie lean towards the root's axis (or, under it, to the emptier side): the graph stays centred
        if d != 0:
            lean = -1 if d > 0 else 1
        else:
            lean = 1 if sum(1 for k in occ if k > 0) <= sum(1 for k in occ if k < 0) else -1
        slot = d
        i = 0
        while True:
            cands = [d] if i == 0 else sorted((d + i, d - i), key=lambda k: (abs(k - target), -lean * k))
            free = [
                k for k in cands if k - 1 not in occ and k not in occ and k + 1 not in occ and k not in chan
            ]
            if free:
                slot = free[0]
                break
            i += 1
        occ.add(slot)
        self._slot[info.id] = (layer, slot)
        info.layer = layer
        along = slot * self.layout.slot_pitch / 2
        across = layer * self.layout.layer_pitch
        info.x, info.y = (along, across) if self.layout.direction == "TB" else (across, along)

    def _route(self, e: Edge) -> None:
        """An edge spanning more than one layer runs through a channel — a half-slot with no node
        centre in any layer it crosses, so the line passes between nodes, never behind one. The
        channel is reserved (later nodes keep off it), so routes are as stable as positions."""
        (pl, ps), (cl, cs) = self._slot[e[0]], self._slot[e[1]]
        if cl - pl <= 1:
            return
        layers = range(pl + 1, cl)
        target = (ps + cs) / 2
        d = round(target)

        def clear(c: int) -> bool:
            return all(c not in self._occupied.get(layer, ()) for layer in layers)

        def own(c: int) -> bool:
            return all(c not in self._channels.get(layer, {}) for layer in layers)

        order = (
            c for i in itertools.count() for c in sorted({d + i, d - i}, key=lambda k: (abs(k - target), k))
        )
        nearest = next(c for c in order if clear(c))
        # a channel of its own when one is close by; else share the nearest (lines overlap, no node hidden)
        near = sorted(range(nearest - 2, nearest + 3), key=lambda k: (abs(k - target), k))
        c = next((k for k in near if clear(k) and own(k)), nearest)
        for layer in layers:
            ch = self._channels.setdefault(layer, {})
            ch[c] = ch.get(c, 0) + 1
        self._routes[e] = (c, pl + 1, cl - 1)

    def route(self, e: Edge) -> list[tuple[float, float]]:
        """Waypoints of an edge between its two ends, in scene units: [] for an edge between
        neighbouring layers; else where it enters and leaves its channel (in the gaps between layers)."""
        r = self._routes.get(e)
        if r is None:
            return []
        c, first, last = r
        lay = self.layout
        along = c * lay.slot_pitch / 2
        half = (lay.node_height if lay.direction == "TB" else lay.node_width) / 2
        a = (first - 1) * lay.layer_pitch + half + lay.layer_gap / 2  # the gap above the first layer crossed
        b = (last + 1) * lay.layer_pitch - half - lay.layer_gap / 2  # and below the last
        if lay.direction == "TB":
            return [(along, a), (along, b)]
        return [(a, along), (b, along)]

    # ------------------------------------------------------------------ details
    def _attach(
        self, acc: _Acc, node_id: str | None, step: int, kind: str, fn: Any, visual: bool = True
    ) -> None:
        """Apply ``fn`` to the node an event belongs to: the named node, else the latest node of that
        kind created in the event's step (VRAG events name none). A node not drawn yet (VRAG draws the
        step's nodes when the step ends) gets it when it appears."""
        if node_id is not None:
            info = self._live.get(node_id)
            key: tuple[Any, ...] = ("id", node_id)
        else:
            ids = [n for n in self._by_step.get(step, ()) if n in self._live]
            if kind != "*":
                ids = [n for n in ids if self._live[n].kind == kind]
            info = self._live[ids[-1]] if ids else None
            key = ("step", step, kind)
        if info is None:
            self._pending.setdefault(key, []).append(fn)
            return
        fn(info)
        acc.touch(info.id, visual)

    def _on_answer(self, ev: Answer, acc: _Acc) -> None:
        answers = [n for n in self._live.values() if n.kind == "answer"]
        if answers:
            info = answers[-1]
        else:  # a forced answer without an answer node (VimRAG past its step limit): draw one
            children = {p for p, _ in self._edges}
            leaves = tuple(n for n in self._live if n not in children)
            nid = "answer" if "answer" not in self._live else "answer (forced)"
            info = self._add(
                GraphNode(id=nid, kind="answer", parents=leaves, label=ev.content),
                ev.step,
                ev.time,
                acc,
                synthetic=True,
            )
        info.answer, info.evidence, info.forced = ev.content, ev.evidence, ev.forced
        acc.touch(info.id)


def _set_hits(n: NodeInfo, ev: SearchResults) -> None:
    n.searched, n.hits, n.shown = True, ev.hits, ev.shown
    if not n.query:
        n.query = ev.content


def _set_query(n: NodeInfo, query: str) -> None:
    if not n.query:
        n.query = query


def _set_memory(n: NodeInfo, ev: Memorize) -> None:
    n.memory = ev.items
    if ev.content:
        n.summary = ev.content


def _parents_first(nodes: list[GraphNode]) -> list[GraphNode]:
    """New nodes ordered so parents come before children (snapshots already are; be safe)."""
    ids = {g.id for g in nodes}
    out: list[GraphNode] = []
    done: set[str] = set()
    rest = list(nodes)
    while rest:
        ready = [g for g in rest if all(p not in ids or p in done or p == g.id for p in g.parents)]
        if not ready:  # a cycle: keep snapshot order for what is left
            ready = rest
        out += ready
        done.update(g.id for g in ready)
        rest = [g for g in rest if g.id not in done]
    return out


def _unique(ids: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ids))


__all__ = ["KIND_CAPTIONS", "GraphDelta", "Layout", "NodeInfo", "ReasoningGraph"]
