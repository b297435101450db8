"""The Models view: the catalogue and the models folder, answer models and embedders apart, each with
its size, licence, whether it fits this machine and where it stands; download with progress, pause,
resume, cancel, delete; any Hugging Face id or a local folder; the hub settings.

Why a window of its own (opened from View → Models…, the first-run chooser and Ask's "Download
it…"): a model is chosen once in a while, not next to every question, and its rows need width
(verdict, size, progress, five buttons) that the dock columns do not have — the left column is
crowded already (issue 31). It stays open beside the main window; closing it keeps a download
going (:class:`Downloads`, owned by the window, not by this view).

The list is :func:`list_models` read off the GUI thread; nothing here opens a connection but a
download (and its look-up). Blocking dialogs are injectable (``confirm``, ``choose_folder``) so
tests replace them, as the corpora panel's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QLabel,
    QLineEdit,
    QScrollArea,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.core.models import (
    Fit,
    Machine,
    ModelError,
    ModelRow,
    ModelSettings,
    ModelStore,
    Verdict,
    find_entry,
    human_bytes,
    list_models,
    load_settings,
)
from vrag_desktop.core.models.catalogue import guess_kind
from vrag_desktop.qt.corpora.corpora_toolbar import ask_confirm
from vrag_desktop.qt.infra.alive import alive
from vrag_desktop.qt.infra.errors import describe
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call
from vrag_desktop.qt.infra.theme import set_role
from vrag_desktop.qt.infra.widgets import button, row
from vrag_desktop.qt.models.downloads import Downloads, model_key
from vrag_desktop.qt.models.hub_settings import HubSettingsBox
from vrag_desktop.qt.models.model_card import ModelCard
from vrag_desktop.qt.models.texts import machine_text

if TYPE_CHECKING:
    from vrag_desktop.core.paths import DataLayout
    from vrag_desktop.qt.context import AppContext

TABS = (("answer", "Answer models"), ("embedder", "Embedders"), ("reranker", "Rerankers"))
INTRO = {
    "answer": "The vision-language model that searches, looks at pages and answers. The app serves a "
    "downloaded one with its own vLLM server (Runtime → Local vLLM).",
    "embedder": "The model that turns pages, images and text into vectors for search. A corpus keeps the "
    "embedder it was built with; the one chosen here indexes new corpora.",
    "reranker": "A cross-encoder that reorders search's top candidates by reading the question and each "
    "page's text together. Off by default (its benefit is not measured yet): after downloading one, "
    "turn it on with `vrag-desktop models settings --reranker ID`.",
}


def _tab(kind: str) -> str:
    """The tab a model of ``kind`` is listed in (an unknown kind: with the answer models)."""
    return kind if kind in INTRO else "answer"


@dataclass(frozen=True)
class Listing:
    """What the view shows, gathered on a worker."""

    rows: list[ModelRow]
    machine: Machine
    settings: ModelSettings
    embedders: frozenset[str]  # keys of the embedders the app can index with


def gather(layout: DataLayout, probe: Callable[[Path], Machine]) -> Listing:
    """On a worker: the list (folder sizes), this machine, the hub settings, usable embedders."""
    from vrag_desktop.core.embedders import loads_quickly
    from vrag_desktop.core.embedders.qwen_vl_inputs import detect_family

    machine = probe(layout.models)
    rows = list_models(layout, machine)
    usable = set()
    for r in rows:
        spec = str(r.installed.path) if r.state == "local" and r.installed else r.id
        if r.kind == "embedder" and (loads_quickly(r.id) or detect_family(spec) is not None):
            usable.add(r.id.lower())
    return Listing(rows, machine, load_settings(layout), frozenset(usable))


def typed_row(spec: str) -> ModelRow:
    """A row for a hub id typed in: nothing known yet but its name (sized when it is looked up)."""
    return ModelRow(
        spec, guess_kind(spec), spec, "available", None, Fit(Verdict.TIGHT, ()), approximate=False
    )


class ModelsView(QWidget):
    """See the module docstring. ``serveRequested(model)``: serve an answer model (a downloaded hub
    id, or a folder's path) with the app's vLLM server — the window knows where that is."""

    serveRequested = Signal(str)
    listed = Signal()  # a listing was shown (tests wait for it)

    def __init__(
        self, ctx: AppContext, downloads: Downloads | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("modelsView")
        self.setWindowTitle("Models — VRAG Desktop")
        self.ctx = ctx
        self.downloads = downloads if downloads is not None else Downloads(ctx, self)
        self.downloads.confirm = lambda title, text: self.confirm(title, text)
        self.confirm: Callable[[str, str], bool] = lambda title, text: ask_confirm(self, title, text)
        self.choose_folder: Callable[[], str | None] = self._ask_folder
        #: The model the Local vLLM server would start ("" none): its row says so.
        self.served_model: Callable[[], str] = lambda: ""
        self.cards: dict[str, ModelCard] = {}
        self.listing: Listing | None = None
        self._typed: dict[str, str] = {}  # hub ids typed in (a row while the list has none): key -> spec
        self._list = TaskSlot()
        self._build()
        dl = self.downloads
        dl.changed.connect(self._changed)
        dl.progress.connect(self._progress)
        dl.listChanged.connect(self.refresh)

    # ---- layout
    def _build(self) -> None:
        head = QLabel("<h3 style='margin:0'>Models</h3>", self)
        self.machine = QLabel("Looking at this machine…", self)
        self.machine.setObjectName("machineLine")
        set_role(self.machine, "role", "muted")
        self.offline = QFrame(self)
        self.offline.setObjectName("offlineBanner")
        set_role(self.offline, "role", "banner-warn")
        self.offline_label = QLabel(self.offline)
        self.offline_label.setWordWrap(True)
        self.online_button = button(
            self.offline, "Go online", lambda: self.settings_box.offline_check.setChecked(False)
        )
        banner = row(self.offline_label, self.online_button, grow=self.offline_label)
        banner.setContentsMargins(10, 4, 4, 4)
        self.offline.setLayout(banner)
        self.offline.hide()
        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        self.lists: dict[str, QVBoxLayout] = {}
        for kind, title in TABS:
            page = QWidget()
            lay = QVBoxLayout(page)
            intro = QLabel(INTRO[kind], page)
            intro.setWordWrap(True)
            set_role(intro, "role", "muted")
            lay.addWidget(intro)
            cards = QVBoxLayout()
            cards.setSpacing(6)
            lay.addLayout(cards)
            lay.addStretch(1)
            self.lists[kind] = cards
            scroll = QScrollArea(self)
            scroll.setObjectName(f"{kind}List")
            scroll.setWidget(page)
            scroll.setWidgetResizable(True)
            scroll.setFrameShape(QFrame.Shape.NoFrame)
            scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            self.tabs.addTab(scroll, title)
        self.settings_box = HubSettingsBox(self.ctx.layout, self)
        self.settings_box.changed.connect(self._settings_changed)
        settings_page = QWidget()
        QVBoxLayout(settings_page).addWidget(self.settings_box)
        settings_page.layout().addStretch(1)  # type: ignore[union-attr]
        self.tabs.addTab(settings_page, "Hub and offline")
        self.id_edit = QLineEdit(self)
        self.id_edit.setObjectName("hubId")
        self.id_edit.setPlaceholderText("Any Hugging Face model id, e.g. Qwen/Qwen2.5-VL-3B-Instruct")
        self.id_edit.returnPressed.connect(self.download_typed)
        self.id_button = button(self, "Download", self.download_typed, name="downloadTyped")
        self.add_button = button(
            self, "Add a folder…", self.add_folder, name="addFolder",
            tip="List a model folder you already have (checked; never copied or deleted)",
        )  # fmt: skip
        self.notice = QLabel(self)
        self.notice.setObjectName("modelsNotice")
        self.notice.setWordWrap(True)
        self.notice.hide()
        self.where = QLabel(f"Downloads go to {self.ctx.layout.models}", self)
        self.where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        set_role(self.where, "role", "hint")
        lay = QVBoxLayout(self)
        lay.addLayout(row(head, self.machine, grow=self.machine))
        lay.addWidget(self.offline)
        lay.addWidget(self.tabs, 1)
        lay.addLayout(row(self.id_edit, self.id_button, self.add_button, grow=self.id_edit))
        lay.addWidget(self.notice)
        lay.addWidget(self.where)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.refresh()

    # ---- the list
    def refresh(self) -> None:
        """Read the list again (off the GUI thread); the cards follow."""
        self.where.setText(f"Downloads go to {self.ctx.layout.models}")
        self._list.start(
            run_call, gather, self.ctx.layout, self.downloads.probe, name="list the models",
            on_done=self._show, error_title="Cannot list the models",
        )  # fmt: skip

    def _show(self, listing: Listing) -> None:
        self.listing = listing
        self.machine.setText(machine_text(listing.machine))
        self._show_offline(listing.settings)
        self.settings_box.show_settings(listing.settings)
        known = {r.id.lower() for r in listing.rows}  # a typed id stays for the session (its message too)
        typed = [typed_row(spec) for key, spec in self._typed.items() if key not in known]
        # the person's own first (ids typed in, other downloads, folders), then the catalogue in its order
        rows = typed + [r for r in listing.rows if find_entry(r.id) is None]
        rows += [r for r in listing.rows if find_entry(r.id) is not None]
        wanted: dict[str, list[ModelCard]] = {kind: [] for kind, _ in TABS}
        keep: set[str] = set()
        for r in rows:
            key = self._key(r)
            keep.add(key)
            card = self.cards.get(key)
            if card is None:
                card = self.cards[key] = self._card(r)
            card.row = r
            wanted[_tab(r.kind)].append(card)
            self._fill(card)
        for key in [k for k in self.cards if k not in keep]:
            self.cards.pop(key).deleteLater()
        for kind, cards in wanted.items():
            lay = self.lists[kind]
            for i, card in enumerate(cards):
                if lay.indexOf(card) != i:
                    lay.insertWidget(i, card)
                    card.show()  # now, not at the layout's queued show: the list is complete at once
        for i, (kind, title) in enumerate(TABS):
            self.tabs.setTabText(i, f"{title} ({len(wanted[kind])})")
        self.listed.emit()

    @staticmethod
    def _key(r: ModelRow) -> str:
        return (str(r.installed.path) if r.state in ("local", "missing") and r.installed else r.id).lower()

    def _card(self, r: ModelRow) -> ModelCard:
        card = ModelCard(r)
        card.downloadRequested.connect(self.download)
        card.pauseRequested.connect(self.downloads.pause)
        card.cancelRequested.connect(self.cancel)
        card.deleteRequested.connect(self.delete)
        card.useRequested.connect(self.use)
        return card

    def _fill(self, card: ModelCard) -> None:
        r, dl = card.row, self.downloads
        key = self._key(r)
        active = dl.state(key)
        card.show_row(
            r,
            active=active,
            message=dl.message(key),
            discarding=key in dl.discarding,
            other_busy=dl.busy and active is None,
            in_use=self._in_use(r),
            sized=r.entry is not None or r.state != "available",
        )
        if r.kind == "embedder" and card.in_use.text():
            card.use_button.hide()  # it is the one already (the chip says so)
        elif r.kind == "embedder" and self.listing is not None:
            ok = key in self.listing.embedders
            card.use_button.setEnabled(ok)
            if not ok:
                card.use_button.setToolTip(
                    "The app indexes with MiniLM, GVE or Qwen3-VL-Embedding models only"
                )

    def _in_use(self, r: ModelRow) -> str:
        from vrag_desktop.core.embedders import loads_quickly

        if r.kind == "embedder":
            current = self.ctx.settings.embedder.strip()
            same = (loads_quickly(current) and loads_quickly(r.id)) or model_key(current) == self._key(r)
            return "Embedder for new corpora" if same else ""
        served = self.served_model().strip()
        if served and r.state != "available" and model_key(served) == self._key(r):
            return "Set in Local vLLM"
        return ""

    def card(self, spec: str) -> ModelCard | None:
        return self.cards.get(model_key(spec))

    def _changed(self, key: str) -> None:
        card = self.cards.get(key)
        if card is None and key in self._typed:
            self.refresh()
            return
        for c in self.cards.values():  # the others' Download buttons follow the one slot
            self._fill(c)

    def _progress(self, key: str, value: Any) -> None:
        card = self.cards.get(key)
        if card is not None:
            card.show_progress(value)

    def _show_offline(self, settings: ModelSettings) -> None:
        reason = settings.offline_reason()
        self.offline.setVisible(bool(reason))
        self.offline_label.setText(f"⚠ Offline — nothing is downloaded: {reason}." if reason else "")
        self.online_button.setVisible(settings.offline)

    def _settings_changed(self, settings: ModelSettings) -> None:
        self._show_offline(settings)
        self.refresh()

    def focus(self, spec: str) -> None:
        """Show ``spec``'s card (its tab, scrolled to it); a hub id the list lacks gets a row of its
        own (a model Ask said is not downloaded, say)."""
        card = self.card(spec)
        if card is None and self.listing is not None and "/" in spec and not Path(spec).expanduser().exists():
            self._typed[model_key(spec)] = spec
            self._show(self.listing)
            card = self.card(spec)
        if card is None:
            return
        index = [k for k, _ in TABS].index(_tab(card.row.kind))
        self.tabs.setCurrentIndex(index)
        scroll = self.tabs.widget(index)
        if isinstance(scroll, QScrollArea):  # once the layout has placed a card just made

            def reveal() -> None:
                if alive(card) and alive(scroll):
                    scroll.ensureWidgetVisible(card)

            QTimer.singleShot(0, reveal)
        for b in (card.download_button, card.use_button, card.pause_button):
            if b.isVisible() and b.isEnabled():
                b.setFocus()
                break

    # ---- actions
    def download(self, spec: str) -> None:
        self.notice.hide()
        self.downloads.start(spec)

    def download_typed(self) -> None:
        """Download the hub id typed in (it gets a row of its own until the list knows it)."""
        spec = self.id_edit.text().strip()
        if not spec:
            self._notice("Type a Hugging Face model id (owner/name) first.", "warn")
            return
        key = model_key(spec)
        if key not in self.cards:
            self._typed[key] = spec
            if self.listing is not None:
                self._show(self.listing)
        self.id_edit.clear()
        self.download(spec)
        self.focus(spec)

    def cancel(self, r: ModelRow) -> None:
        """Stop a download (or drop a paused one) and delete what came of it, after asking."""
        have = r.partial.have_bytes if r.partial is not None else 0
        active = self.downloads.state(self._key(r))
        if active is not None and active.progress is not None:
            have = active.progress.done
        if have and not self.confirm(
            "Cancel the download", f"Delete the {human_bytes(have)} downloaded of {r.id}? Pause keeps them."
        ):
            return
        self.downloads.cancel(self._key(r), r.partial.id if r.partial is not None else r.id)

    def delete(self, r: ModelRow) -> None:
        """Delete a downloaded model (after asking), or forget an added folder."""
        local = r.state in ("local", "missing") and r.installed is not None
        spec = str(r.installed.path) if local and r.installed is not None else r.id
        if not local and not self.confirm(
            "Delete model", f"Delete {r.id} ({human_bytes(r.size_on_disk)}) from the models folder?"
        ):
            return
        key, store = self._key(r), ModelStore(self.ctx.layout)

        def done(result: tuple[str, int]) -> None:
            what, freed = result
            text = what[:1].upper() + what[1:] + (f" ({human_bytes(freed)} freed)." if freed else ".")
            self._notice(text, "ok")
            self.ctx.current_model.refresh()

        run_call(
            store.remove, spec, name="delete a model", on_done=done, on_end=self.refresh,
            on_error=lambda exc: self._say(key, str(exc) if isinstance(exc, ModelError) else describe(exc)),
        )  # fmt: skip

    def use(self, r: ModelRow) -> None:
        """An embedder: the one new corpora are indexed with; an answer model: serve it."""
        spec = str(r.installed.path) if r.state == "local" and r.installed is not None else r.id
        if r.kind != "embedder":
            self.serveRequested.emit(spec)
            return
        entry = find_entry(spec)
        self.ctx.settings.embedder = "minilm" if entry is not None and entry.builtin else spec
        try:
            self.ctx.save()
        except Exception as exc:
            self._say(self._key(r), f"Not saved: {describe(exc)}")
            return
        self.downloads.messages[self._key(r)] = (
            "ok", "New corpora are indexed with it; existing corpora keep the embedder they were built with.",
        )  # fmt: skip
        self.redraw()

    def redraw(self) -> None:
        """Every card again from what is known (a model was put to use elsewhere)."""
        for card in self.cards.values():
            self._fill(card)

    def add_folder(self) -> None:
        """List a model folder the person has (the core says what is missing when it is not one)."""
        path = self.choose_folder()
        if not path:
            return
        store = ModelStore(self.ctx.layout)

        def added(result: Any) -> None:
            model, entry = result
            self._notice(f"Added {model.path}: {'an embedder' if entry.kind == 'embedder' else 'an answer model'}, "
                         f"{human_bytes(model.size_bytes)}.", "ok")  # fmt: skip

        run_call(
            store.add_local, path, name="add a model folder", on_done=added, on_end=self.refresh,
            on_error=lambda exc: self._notice(str(exc)[:1].upper() + str(exc)[1:], "error"),
        )  # fmt: skip

    def _ask_folder(self) -> str | None:
        return QFileDialog.getExistingDirectory(self, "Add a model folder") or None

    def _notice(self, text: str, level: str) -> None:
        self.notice.setText(text)
        self.notice.setVisible(bool(text))
        set_role(self.notice, "role", {"ok": "ok", "warn": "warn", "error": "error"}.get(level, "muted"))

    def _say(self, key: str, text: str) -> None:
        self.downloads.messages[key] = ("error", text[:1].upper() + text[1:])
        card = self.cards.get(key)
        if card is not None:
            self._fill(card)

    def shutdown(self) -> None:
        self._list.drop()
        with contextlib.suppress(RuntimeError):
            self.downloads.confirm = lambda _t, _x: False


__all__ = ["Listing", "ModelsView", "gather", "typed_row"]
