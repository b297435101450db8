"""One list for the Models view and ``vrag-desktop models list``: the catalogue, what is downloaded
(or half-way), the folders added — each with its size and whether it fits this machine.

Offline and instant apart from the folder sizes: nothing here opens a connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vrag_desktop.core.models.catalogue import CatalogueEntry, catalogue, entry_from_folder, find_entry
from vrag_desktop.core.models.errors import NotAModelError
from vrag_desktop.core.models.fit import Fit, Machine, Verdict, fits, probe_machine
from vrag_desktop.core.models.store import InstalledModel, ModelStore, PartialDownload
from vrag_desktop.core.paths import DataLayout

#: ``state`` values, in the order a person acts on them.
STATES = ("builtin", "downloaded", "local", "partial", "available", "missing")


@dataclass(frozen=True)
class ModelRow:
    """One model as the view shows it. ``state``: ``builtin`` (ships with the app), ``downloaded``,
    ``local`` (a folder the person added), ``partial`` (a download to resume), ``available`` (in the
    catalogue, not here), ``missing`` (an added folder that is gone or no longer a model)."""

    id: str
    kind: str
    title: str
    state: str
    entry: CatalogueEntry | None
    fit: Fit
    size_on_disk: int = 0
    download_bytes: int = 0
    approximate: bool = True
    licence: str = ""
    installed: InstalledModel | None = None
    partial: PartialDownload | None = None
    problem: str = ""

    @property
    def usable(self) -> bool:
        return self.state in ("builtin", "downloaded", "local")

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "title": self.title,
            "state": self.state,
            "usable": self.usable,
            "path": str(self.installed.path) if self.installed else None,
            "revision": self.installed.revision if self.installed else None,
            "commit": self.installed.commit if self.installed else None,
            "size_on_disk": self.size_on_disk,
            "download_bytes": self.download_bytes,
            "download_size_approximate": self.approximate,
            "partial": (
                {"have_bytes": self.partial.have_bytes, "total_bytes": self.partial.total_bytes}
                if self.partial
                else None
            ),
            "licence": self.licence,
            "recommended": bool(self.entry and self.entry.recommended),
            "fit": {
                "verdict": self.fit.verdict.value,
                "reasons": list(self.fit.reasons),
                "device": self.fit.device,
            },
            "problem": self.problem,
        }


def list_models(layout: DataLayout, machine: Machine | None = None) -> list[ModelRow]:
    """Catalogue entries first (in catalogue order, each with its local state), then downloads and
    folders the catalogue does not know."""
    store = ModelStore(layout)
    machine = machine or probe_machine(store.root)
    downloaded = {m.id.lower(): m for m in store.downloaded()}
    partials = {p.id.lower(): p for p in store.partials()}
    builtin = {m.id.lower(): m for m in store.builtin()}
    rows: list[ModelRow] = []
    for entry in catalogue():
        key = entry.id.lower()
        rows.append(
            _row(entry, machine, builtin.get(key) or downloaded.pop(key, None), partials.pop(key, None))
        )
    for key, model in sorted(downloaded.items()):
        rows.append(_folder_row(model, machine, partials.pop(key, None)))
    for p in partials.values():
        entry = CatalogueEntry(
            id=p.id, kind="answer", title=p.id, download_bytes=p.total_bytes, measured=True
        )
        fit = fits(entry, machine, have_bytes=p.have_bytes)
        rows.append(
            ModelRow(
                p.id, "unknown", p.id, "partial", None, fit, p.have_bytes, p.total_bytes, False, partial=p
            )
        )
    rows.extend(_folder_row(m, machine, None) for m in store.local())
    return rows


def _row(
    entry: CatalogueEntry, machine: Machine, model: InstalledModel | None, partial: PartialDownload | None
) -> ModelRow:
    state = "available"
    if model is not None:
        state = "builtin" if model.source == "builtin" else "downloaded"
    elif partial is not None:
        state = "partial"
    sized = entry
    if model is not None and model.source == "hub":
        try:
            sized = entry_from_folder(model.path, entry.id, entry.kind)
        except NotAModelError:
            sized = entry
    fit = fits(sized, machine, downloaded=model is not None, have_bytes=partial.have_bytes if partial else 0)
    return ModelRow(
        entry.id,
        entry.kind,
        entry.title,
        state,
        entry,
        fit,
        size_on_disk=model.size_bytes if model else (partial.have_bytes if partial else 0),
        download_bytes=partial.total_bytes if partial and partial.total_bytes else entry.download_bytes,
        approximate=not (partial and partial.total_bytes) and not entry.measured,
        licence=entry.licence + ("" if entry.licence_checked else " (unconfirmed)"),
        installed=model,
        partial=partial,
    )


def _folder_row(model: InstalledModel, machine: Machine, partial: PartialDownload | None) -> ModelRow:
    known = find_entry(model.id)
    try:
        entry = entry_from_folder(model.path, model.id if model.source == "hub" else None)
    except NotAModelError as exc:
        fit = Fit(Verdict.NO, (str(exc),))
        return ModelRow(model.id, known.kind if known else "unknown", model.id, "missing", known, fit,
                        model.size_bytes, 0, False, installed=model, problem=str(exc))  # fmt: skip
    state = "downloaded" if model.source == "hub" else "local"
    fit = fits(entry, machine, downloaded=True)
    return ModelRow(model.id, entry.kind, entry.title, state, entry, fit, model.size_bytes, entry.download_bytes,
                    False, entry.licence, installed=model, partial=partial)  # fmt: skip
