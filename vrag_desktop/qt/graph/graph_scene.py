"""The reasoning graph drawn live: a scene that mirrors :class:`ReasoningGraph` item by item.

The model places nodes and never moves them, so the scene only ever adds, repaints or removes
items — no relayout pass, no jumping. The items are :mod:`graph_items`'s; :mod:`graph_view` reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QPalette, QTransform
from PySide6.QtWidgets import QGraphicsScene, QGraphicsSceneMouseEvent

from vrag_desktop.core.agents.events import AgentEvent
from vrag_desktop.core.run.reasoning_graph import GraphDelta, Layout, NodeInfo, ReasoningGraph
from vrag_desktop.core.run.training_roles import SampleTraining, role_kind
from vrag_desktop.qt.graph.graph_items import EdgeItem, NodeItem


class GraphScene(QGraphicsScene):
    """Items for a :class:`ReasoningGraph`, updated from its deltas.

    Signals: ``nodeClicked(id)`` on a click on a node; ``nodeSelected(id)`` when the selection
    changes ("" for none); ``nodesAdded(list)`` after new nodes are drawn; ``detailsChanged(id)``
    when what a details panel shows for a node changed (results, memory, thinking…);
    ``trainingChanged`` when a training sample's node roles were set or cleared (:meth:`set_training`);
    ``emptied`` when no node is left (cleared, or the last one removed).
    """

    nodeClicked = Signal(str)
    nodeSelected = Signal(str)
    nodesAdded = Signal(list)
    detailsChanged = Signal(str)
    trainingChanged = Signal()
    emptied = Signal()  # no node left (cleared, or the last one removed)

    def __init__(self, parent: Any = None, layout: Layout | None = None) -> None:
        super().__init__(parent)
        self.graph = ReasoningGraph(layout)
        self._nodes: dict[str, NodeItem] = {}
        self._edges: dict[tuple[str, str], EdgeItem] = {}
        self._selected: str | None = None
        self._arrows = True  # edges show their arrows (the view says when zoomed out: show_arrows)
        self._beside = False  # zoomed out: a layer's last card writes its words beside it (show_beside)
        self._training: SampleTraining | None = None
        self.selectionChanged.connect(self._on_selection)

    @property
    def layout(self) -> Layout:
        return self.graph.layout

    # ------------------------------------------------------------------ feeding
    def apply(self, event: AgentEvent | Mapping[str, Any]) -> GraphDelta:
        """Take one event of a live run; redraw only what it changed."""
        delta = self.graph.apply(event)
        if delta:
            self._sync(delta)
        return delta

    def load(self, events: Iterable[AgentEvent | Mapping[str, Any]]) -> None:
        """Show a saved run (replaces what is drawn)."""
        self.clear_graph()
        self.graph = ReasoningGraph.from_events(events, self.graph.layout)
        added = self.graph.ids()
        for info in self.graph.nodes():
            self._add_node(info)
        for e in self.graph.edges():
            self._add_edge(e)
        self._fit_rect()
        self._place_beside(self._nodes)
        if added:
            self.nodesAdded.emit(added)

    def clear_graph(self) -> None:
        """Remove every item and forget the run."""
        self.blockSignals(True)
        try:
            self.clearSelection()
            self.clear()
        finally:
            self.blockSignals(False)
        self._nodes.clear()
        self._edges.clear()
        self.graph.reset()
        if self._training is not None:
            self._training = None
            self.trainingChanged.emit()
        if self._selected is not None:
            self._selected = None
            self.nodeSelected.emit("")
        self.setSceneRect(QRectF())
        self.emptied.emit()

    def _sync(self, d: GraphDelta) -> None:
        for e in d.removed_edges:
            edge = self._edges.pop(e, None)
            if edge is not None:
                self.removeItem(edge)
        for nid in d.removed:
            node = self._nodes.pop(nid, None)
            if node is not None:
                self.removeItem(node)  # a selected node going away clears the selection
        for nid in d.added:
            self._add_node(self.graph.node(nid))
        for nid in d.changed:
            node = self._nodes.get(nid)
            if node is not None:
                node.refresh()
        for e in d.added_edges:
            self._add_edge(e)
        if d.added or d.removed:
            self._fit_rect()
            self._place_beside([*d.added, *d.removed])
        if d.removed and not self._nodes:
            self.emptied.emit()
        if d.added:
            self.nodesAdded.emit(list(d.added))
        for nid in d.details:
            self.detailsChanged.emit(nid)

    def _add_node(self, info: NodeInfo) -> None:
        old = self._nodes.pop(info.id, None)
        if old is not None:
            self.removeItem(old)
        item = NodeItem(info, self.graph.layout)
        if self._training is not None:
            item.set_training_role(role_kind(self._training.role(info.id)), self._training.describe(info.id))
        self._nodes[info.id] = item
        self.addItem(item)

    def _add_edge(self, e: tuple[str, str]) -> None:
        if e in self._edges:
            return
        item = EdgeItem(self.graph.node(e[0]), self.graph.node(e[1]), self.graph.layout, self.graph.route(e))
        item.show_arrow(self._arrows)
        self._edges[e] = item
        self.addItem(item)
        item.set_emphasis(self._selected in e)
        item.restyle(self.palette())

    def _fit_rect(self) -> None:
        """Scene rect = the graph with a margin (views widen it as needed for zoom and pan)."""
        x0, y0, x1, y1 = self.graph.bounds()
        m = max(self.graph.layout.node_width, self.graph.layout.node_height)
        self.setSceneRect(QRectF(x0 - m, y0 - m, x1 - x0 + 2 * m, y1 - y0 + 2 * m))

    # ------------------------------------------------------------------ training samples
    def set_training(self, training: SampleTraining | None) -> None:
        """Show each node's part in a training update (None: a normal run); cleared with the graph."""
        self._training = training
        for nid, item in self._nodes.items():
            if training is None:
                item.set_training_role("")
            else:
                item.set_training_role(role_kind(training.role(nid)), training.describe(nid))
        self.trainingChanged.emit()

    def training(self) -> SampleTraining | None:
        return self._training

    # ------------------------------------------------------------------ queries
    def node_item(self, node_id: str) -> NodeItem | None:
        return self._nodes.get(node_id)

    def node_items(self) -> list[NodeItem]:
        return list(self._nodes.values())

    def edge_items(self) -> list[EdgeItem]:
        return list(self._edges.values())

    def details(self, node_id: str) -> NodeInfo:
        """What the details panel shows for a node (live or removed)."""
        return self.graph.node(node_id)

    def graph_rect(self) -> QRectF:
        """The drawn nodes' bounds in scene units (empty when there are none)."""
        if not self._nodes:
            return QRectF()
        x0, y0, x1, y1 = self.graph.bounds()
        return QRectF(x0, y0, x1 - x0, y1 - y0)

    # ------------------------------------------------------------------ selection
    def selected_node(self) -> str | None:
        return self._selected

    def select_node(self, node_id: str | None) -> None:
        """Select one node (None: none), as a click would, without emitting ``nodeClicked``."""
        self.clearSelection()
        item = self._nodes.get(node_id) if node_id else None
        if item is not None:
            item.setSelected(True)

    def _on_selection(self) -> None:
        try:
            chosen = [i for i in self.selectedItems() if isinstance(i, NodeItem)]
        except RuntimeError:  # the scene is being destroyed
            return
        nid = chosen[0].node_id if chosen else None
        if nid == self._selected:
            return
        for e, item in self._edges.items():
            item.set_emphasis(nid is not None and nid in e)
        self._selected = nid
        self.nodeSelected.emit(nid or "")

    def mousePressEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        super().mousePressEvent(event)
        if event.button() != Qt.MouseButton.LeftButton:
            return
        views = self.views()
        transform = views[0].transform() if views else QTransform()
        for item in self.items(
            event.scenePos(),
            Qt.ItemSelectionMode.IntersectsItemShape,
            Qt.SortOrder.DescendingOrder,
            transform,
        ):
            if isinstance(item, NodeItem):
                self.nodeClicked.emit(item.node_id)
                break

    # ------------------------------------------------------------------ palette
    def set_palette(self, palette: QPalette) -> None:
        """Take the view's palette and redraw the items, which draw from it. (Not an ``event``
        override: that made every event the scene gets, its own update calls included, a Python
        call that had to win the GIL back while a run streamed.)"""
        self.setPalette(palette)
        for item in self.items():
            item.update()
        for edge in self._edges.values():
            edge.restyle(palette)

    def show_beside(self, on: bool) -> None:
        """Zoomed out (the view says when): the last card of each layer writes its words beside it,
        where nothing else is drawn, instead of squeezing them into the card."""
        if on != self._beside:
            self._beside = on
            self._place_beside(self._nodes)

    def beside_room(self) -> float:
        """How far right of a card its words may go (scene units)."""
        return 2.4 * self.graph.layout.node_width

    def _place_beside(self, ids: Iterable[str]) -> None:
        """Give the words' room to the last card of each layer of ``ids`` (top-to-bottom graphs:
        a layer is a row; left-to-right ones have the next layer there, so never)."""
        lay = self.graph.layout
        rows = {round(self.graph.node(n).y) for n in ids if self.graph.get(n) is not None}
        if not rows:
            return
        last: dict[int, NodeItem] = {}
        for item in self._nodes.values():
            y = round(item.info.y)
            if y in rows:
                if y not in last or item.info.x > last[y].info.x:
                    last[y] = item
                item.set_beside(0.0)
        if self._beside and lay.direction == "TB":
            for item in last.values():
                item.set_beside(self.beside_room())

    def show_arrows(self, on: bool) -> None:
        """Show the edges' arrows (the view hides them when zoomed out, where they are specks)."""
        if on != self._arrows:
            self._arrows = on
            for edge in self._edges.values():
                edge.show_arrow(on)
