"""A view to read the reasoning graph with: zoom under the mouse, pan, fit, and follow the newest
node while a run is live. Hundreds of nodes stay smooth: nodes paint into a device cache, edges use
cosmetic pens, and the dotted background is drawn only where exposed."""

from __future__ import annotations

import contextlib

from PySide6.QtCore import QEvent, QPointF, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPalette,
    QPen,
    QResizeEvent,
    QTransform,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QAbstractSlider,
    QApplication,
    QGraphicsScene,
    QGraphicsView,
    QLabel,
    QToolButton,
    QWidget,
)

from vrag_desktop.core.run.training_roles import OFF_PATH, VALUABLE
from vrag_desktop.qt.graph.graph_items import LOD_ARROW, LOD_FULL, ROLE_COLORS, mix
from vrag_desktop.qt.graph.graph_scene import GraphScene
from vrag_desktop.qt.infra.theme import color as theme_color
from vrag_desktop.qt.infra.theme import is_dark
from vrag_desktop.qt.infra.zoom_view import ZoomView

# What each node role of a training sample means (graph_items.ROLE_COLORS gives the colours).
LEGEND_TEXT = {
    "trained": "trained",
    "off_path": f"masked: {OFF_PATH}",
    "valuable": f"masked: {VALUABLE}",
    "masked": "masked (other reason)",
}
PLACEHOLDER = "No run yet. Each step of the agent's reasoning appears here as a node while it works."
FOLLOW_TEXT = "Follow run"
FOLLOW_TIP = (
    "Keep the newest step in view as the run goes on. Zooming or dragging the graph stops following; "
    "press this to follow again."
)


class GraphView(ZoomView):
    """Reads a :class:`GraphScene`: the wheel zooms under the mouse (clamped), drag pans, ``fit``
    shows everything. While a run is live or replayed (``set_live(True)``) the view follows the
    newest node at a zoom where cards are read in full — or keeps everything in view after
    ``fit()`` — until the person zooms or pans; the *Follow run* button over the view says which,
    and follows again when pressed."""

    zoomChanged = Signal(float)
    nodeClicked = Signal(str)

    MIN_ZOOM = 0.05
    MAX_ZOOM = 3.0
    FIT_MAX_ZOOM = 1.0  # a small graph is fitted at natural size, not blown up
    STEP = 1.2  # per wheel notch or zoom_in()

    def __init__(self, scene: GraphScene | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setRenderHints(
            QPainter.RenderHint.Antialiasing
            | QPainter.RenderHint.TextAntialiasing
            | QPainter.RenderHint.SmoothPixmapTransform
        )
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.NoAnchor)  # anchoring is done by hand
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.BoundingRectViewportUpdate)
        self.setCacheMode(QGraphicsView.CacheModeFlag.CacheBackground)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # pan by dragging
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setMinimumSize(QSize(120, 90))
        self._live = False
        self._follow: str | None = None  # "newest" | "fit" | None
        self._programmatic = 0
        self.legend = QLabel(self)  # a training sample's legend, top left; hidden for normal runs
        self.legend.setObjectName("trainingLegend")
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents, True)
        self.legend.hide()
        # what will appear, until a run draws nodes
        self._placeholder = self.viewport_note(PLACEHOLDER, QPalette.ColorRole.PlaceholderText)
        self.follow_button = QToolButton(self)  # top right, while a run is live
        self.follow_button.setObjectName("followRun")
        self.follow_button.setText(FOLLOW_TEXT)
        self.follow_button.setToolTip(FOLLOW_TIP)
        self.follow_button.setCheckable(True)
        self.follow_button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.follow_button.clicked.connect(self._follow_clicked)
        self.follow_button.hide()
        for bar in (self.horizontalScrollBar(), self.verticalScrollBar()):
            bar.actionTriggered.connect(self._user_scrolled)
        self.setScene(scene if scene is not None else GraphScene(self))
        self.zoomChanged.connect(self._zoomed)

    # ------------------------------------------------------------------ scene
    def setScene(self, scene: QGraphicsScene | None) -> None:
        old = self.scene()
        if isinstance(old, GraphScene):
            for sig, slot in (
                (old.nodesAdded, self._on_nodes_added),
                (old.nodeClicked, self.nodeClicked.emit),
                (old.trainingChanged, self._update_legend),
                (old.emptied, self._sync_placeholder),
            ):
                with contextlib.suppress(RuntimeError, TypeError):
                    sig.disconnect(slot)
        super().setScene(scene)
        if isinstance(scene, GraphScene):
            scene.set_palette(self.palette())
            scene.nodesAdded.connect(self._on_nodes_added)
            scene.nodeClicked.connect(self.nodeClicked.emit)
            scene.trainingChanged.connect(self._update_legend)
            scene.show_arrows(self.zoom() >= LOD_ARROW)
            scene.show_beside(self.zoom() < LOD_FULL)
            scene.emptied.connect(self._sync_placeholder)
        self._update_legend()
        self._sync_placeholder()

    def _zoomed(self, zoom: float) -> None:
        scene = self.scene()
        if isinstance(scene, GraphScene):
            scene.show_arrows(zoom >= LOD_ARROW)
            scene.show_beside(zoom < LOD_FULL)

    # ------------------------------------------------------------------ training legend
    def _update_legend(self) -> None:
        """Show the sample's reward, correctness and advantage and what each node colour means."""
        scene = self.scene()
        training = scene.training() if isinstance(scene, GraphScene) else None
        if training is None:
            self.legend.hide()
            return
        shown = training.kinds()
        if training.algorithm.lower() == "ggpo":
            shown |= {"off_path", "valuable"}
        text = theme_color("text").name()
        rows = [f"<b>{training.headline()}</b>"]
        for kind, words in LEGEND_TEXT.items():
            if kind not in shown:
                continue
            if kind == "trained":
                swatch = f"<span style='color:{text}'>&#9633;</span>"
            else:
                swatch = f"<span style='color:{theme_color(ROLE_COLORS[kind]).name()}'>&#9632;</span>"
            rows.append(f"{swatch}&nbsp;{words}")
        self.legend.setText("<br>".join(rows))
        self.legend.setStyleSheet(
            f"QLabel#trainingLegend {{ background: {theme_color('surface').name()}; color: {text};"
            f" border: 1px solid {theme_color('border').name()}; border-radius: 6px; padding: 6px 9px; }}"
        )
        self.legend.adjustSize()
        self.legend.move(10, 10)
        self.legend.show()
        self.legend.raise_()

    def graph_scene(self) -> GraphScene:
        s = self.scene()
        assert isinstance(s, GraphScene)
        return s

    def selected_node(self) -> str | None:
        return self.graph_scene().selected_node()

    # ------------------------------------------------------------------ zoom
    def zoom(self) -> float:
        return self.transform().m11()

    def set_zoom(self, zoom: float, anchor: QPointF | None = None) -> None:
        """Zoom to ``zoom`` (clamped) keeping the scene point under viewport position ``anchor``
        (default: the viewport centre) where it is."""
        old = self.zoom()
        new = min(self.MAX_ZOOM, max(self.MIN_ZOOM, zoom))
        if abs(new - old) < 1e-9:
            return
        vp = self.viewport().rect()
        pos = QPointF(anchor) if anchor is not None else QPointF(vp.width() / 2, vp.height() / 2)
        scene_pt = self._to_scene(pos)
        self._programmatic += 1
        try:
            self.setTransform(QTransform.fromScale(new, new))
            self._widen_rect(scene_pt, pos)
            self._put(scene_pt, pos)
        finally:
            self._programmatic -= 1
        self.zoomChanged.emit(new)

    def zoom_in(self) -> None:
        self._user_moved()
        self.set_zoom(self.zoom() * self.STEP)

    def zoom_out(self) -> None:
        self._user_moved()
        self.set_zoom(self.zoom() / self.STEP)

    def reset_zoom(self) -> None:
        self._user_moved()
        self.set_zoom(1.0)

    def fit(self) -> None:
        """Show every node with a margin (never above natural size); while live, keep doing so."""
        if self._live:
            self._follow = "fit"
            self._sync_follow()
        self._fit()

    def _fit(self) -> None:
        rect = self.graph_scene().graph_rect()
        if rect.isEmpty():
            return
        margin = 24.0
        vp = self.viewport().rect()
        w, h = max(1.0, vp.width() - 2 * margin), max(1.0, vp.height() - 2 * margin)
        zoom = min(w / rect.width(), h / rect.height(), self.FIT_MAX_ZOOM)
        zoom = max(zoom, 0.005)  # fitting may go below MIN_ZOOM: a huge graph must still fit
        scene = self.graph_scene()
        if zoom < LOD_FULL and scene.layout.direction == "TB":
            # zoomed out, the last card of each row writes its words beside it: use the width
            # left over at this zoom for them (the graph moves left, the zoom stays)
            spare = min(scene.beside_room(), w / zoom - rect.width())
            if spare > 0:
                rect = rect.adjusted(0, 0, spare, 0)
        self._programmatic += 1
        try:
            self.setTransform(QTransform.fromScale(zoom, zoom))
            centre = rect.center()
            pos = QPointF(vp.width() / 2, vp.height() / 2)
            self._widen_rect(centre, pos, reset=True)
            self._put(centre, pos)
        finally:
            self._programmatic -= 1
        self.zoomChanged.emit(zoom)

    def _to_scene(self, pos: QPointF) -> QPointF:
        inv, ok = self.viewportTransform().inverted()
        return inv.map(pos) if ok else QPointF()

    def _widen_rect(self, scene_pt: QPointF, pos: QPointF, reset: bool = False) -> None:
        """Make the scrollable area big enough that ``scene_pt`` can sit at viewport ``pos`` (and that
        any node can be brought to the middle)."""
        z = self.zoom()
        vp = self.viewport().rect()
        vw, vh = vp.width() / z, vp.height() / z
        want = QRectF(scene_pt.x() - pos.x() / z, scene_pt.y() - pos.y() / z, vw, vh)
        graph = self.graph_scene().graph_rect()
        if graph.isEmpty():
            graph = QRectF(-1, -1, 2, 2)
        rect = graph.adjusted(-vw / 2, -vh / 2, vw / 2, vh / 2).united(want)
        if not reset:
            rect = rect.united(self.sceneRect())
        self.setSceneRect(rect)

    def _put(self, scene_pt: QPointF, pos: QPointF) -> None:
        """Scroll so that ``scene_pt`` appears at viewport position ``pos``."""
        at = self.viewportTransform().map(scene_pt)
        dx, dy = at.x() - pos.x(), at.y() - pos.y()
        h, v = self.horizontalScrollBar(), self.verticalScrollBar()
        h.setValue(h.value() + round(dx))
        v.setValue(v.value() + round(dy))

    # ------------------------------------------------------------------ following a live run
    def set_live(self, live: bool) -> None:
        """A run is streaming into the scene (or being replayed): follow its newest node, at a zoom
        where its cards are read in full, until the person moves."""
        self._live = live
        self._follow = "newest" if live else None
        if live:
            self._readable_zoom()
            self._on_nodes_added([])
        self._sync_follow()

    def is_live(self) -> bool:
        return self._live

    def following(self) -> str | None:
        """ "newest", "fit" or None (the person took over)."""
        return self._follow

    def follow_newest(self) -> None:
        self._follow = "newest"
        self._readable_zoom()
        self._on_nodes_added([])
        self._sync_follow()

    def follow_zoom(self) -> float:
        """The zoom a followed run is shown at: cards in full (never below LOD_FULL), about three
        layers of the graph in view, never above natural size."""
        lay = self.graph_scene().layout
        vp = self.viewport().rect()
        fit_w = (vp.width() - 48) / lay.node_width
        fit_h = vp.height() / (3.2 * lay.layer_pitch)
        return max(LOD_FULL + 0.05, min(1.0, fit_w, fit_h))

    def _readable_zoom(self) -> None:
        """Zoom to :meth:`follow_zoom` (about the view's centre) when cards are drawn smaller."""
        if self.zoom() < LOD_FULL or self.zoom() > 1.0:
            self.set_zoom(self.follow_zoom())

    def _user_moved(self) -> None:
        if self._follow is not None:
            self._follow = None
            self._sync_follow()

    def _follow_clicked(self, checked: bool) -> None:
        if checked:
            self.follow_newest()
        else:
            self._user_moved()

    def _sync_follow(self) -> None:
        """The button shows while a run is live, pressed while the view follows it."""
        self.follow_button.setChecked(self._follow is not None)
        self.follow_button.setVisible(self._live)
        if self._live:
            self.follow_button.adjustSize()
            self._place_follow()
            self.follow_button.raise_()

    def _place_follow(self) -> None:
        vp = self.viewport().geometry()
        b = self.follow_button
        b.move(vp.right() - b.width() - 8, vp.top() + 8)

    def _user_scrolled(self, action: int) -> None:
        if not self._programmatic and action != QAbstractSlider.SliderAction.SliderNoAction.value:
            self._user_moved()

    def _on_nodes_added(self, ids: list[str]) -> None:
        self._sync_placeholder()
        s = self.graph_scene()
        if self._follow == "fit":
            self._fit()
            return
        self._widen_rect(
            self._to_scene(QPointF(self.viewport().rect().center())), QPointF(self.viewport().rect().center())
        )
        if self._follow != "newest":
            return
        newest = s.graph.newest()
        item = s.node_item(newest) if newest else None
        if item is None:
            return
        self._programmatic += 1
        try:
            self.ensureVisible(item.sceneBoundingRect(), 40, 40)
        finally:
            self._programmatic -= 1

    # ------------------------------------------------------------------ input
    def wheel(self, event: QWheelEvent) -> None:
        delta = event.angleDelta().y() or event.angleDelta().x()
        if not delta:
            event.ignore()
            return
        self._user_moved()
        self.set_zoom(self.zoom() * self.STEP ** (delta / 120.0), event.position())
        event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._press is not None and event.buttons() & Qt.MouseButton.LeftButton:
            moved = event.position() - self._press
            if abs(moved.x()) + abs(moved.y()) > QApplication.startDragDistance():
                self._user_moved()
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        self._press = None
        super().mouseReleaseEvent(event)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        if self.itemAt(event.position().toPoint()) is None:
            self.fit()
            return
        super().mouseDoubleClickEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom_in()
        elif key == Qt.Key.Key_Minus:
            self.zoom_out()
        elif key == Qt.Key.Key_0:
            self.reset_zoom()
        elif key == Qt.Key.Key_F:
            self.fit()
        else:
            super().keyPressEvent(event)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self._follow == "fit":
            self._fit()
        elif self._follow == "newest":
            self._on_nodes_added([])
        if self._live:
            self._place_follow()

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange and isinstance(self.scene(), GraphScene):
            self.graph_scene().set_palette(self.palette())
            self.resetCachedContent()
            self._update_legend()
        super().changeEvent(event)

    def drawBackground(self, painter: QPainter, rect: QRectF | QRect) -> None:
        pal = self.palette()
        base = pal.color(QPalette.ColorRole.Base)
        painter.fillRect(rect, base)
        z = self.zoom()
        step = 40.0
        if z * step < 14:  # dots closer than that are noise
            return
        dot = mix(base, pal.color(QPalette.ColorRole.Text), 0.16 if is_dark(pal) else 0.13)
        pen = QPen(dot, 1.6)
        pen.setCosmetic(True)
        painter.setPen(pen)
        x0 = int(rect.left() // step) * step
        y0 = int(rect.top() // step) * step
        points = []
        y = y0
        while y <= rect.bottom():
            x = x0
            while x <= rect.right():
                points.append(QPointF(x, y))
                x += step
            y += step
        if len(points) < 20000:
            painter.drawPoints(points)

    def showing_placeholder(self) -> bool:
        """No run drawn yet: the view says what will appear instead of showing a bare grid."""
        scene = self.scene()
        return isinstance(scene, GraphScene) and not scene.node_items()

    def _sync_placeholder(self) -> None:
        self._placeholder.setVisible(self.showing_placeholder())

    def sizeHint(self) -> QSize:
        return QSize(520, 480)
