"""The app's own datasets: ``<data>/datasets/<name>.json``, one unified JSON file per dataset.

Gold labels are made here (the app's "Add to dataset…" and Datasets view), so every change is a
whole-file atomic rewrite (:mod:`vrag_desktop.core.fsutil`): a crash leaves the old file, and a file
that no longer reads as a dataset is never written over (the person repairs or deletes it first).

Uids are unique within a dataset; a new item without one gets ``item-<n>``. Importing rules: the
source may be any form :func:`~vrag_desktop.core.datasets.load_dataset` reads; an imported uid that
the dataset already holds is renamed ``<uid>-2`` (``-3``…) and the renaming reported, unless the
caller asks to refuse, in which case nothing is written. Evidence regions live in
``meta_info.evidence_regions`` (``[{"file", "page", "bbox": [x1, y1, x2, y2]}]`` in page-image
pixels), which :class:`DatasetItem` keeps in ``extra_meta``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrag_desktop.core.datasets.unified import Dataset, DatasetError, DatasetItem, load_dataset, write_unified
from vrag_desktop.core.fsutil import atomic_write_text

SUFFIX = ".json"
EXPORT_FORMATS = ("json", "jsonl", "parquet")  # unified JSON, JSON lines, verl rows (training data)
_NAME_RE = re.compile(r"^[\w][\w .@+()-]{0,79}$")
REGIONS_KEY = "evidence_regions"


class DatasetStoreError(DatasetError):
    """A store operation was refused or failed; the message says which dataset and why."""


@dataclass(frozen=True)
class DatasetInfo:
    """One dataset as listed: its item count, or why it cannot be read (``count`` is then None)."""

    name: str
    path: Path
    count: int | None
    error: str = ""


@dataclass
class ImportReport:
    """What an import did: items added, uids renamed (old, new) because the dataset had them."""

    added: int = 0
    renamed: list[tuple[str, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"{self.added} item(s) imported"]
        out += [f"  uid {old!r} was taken: imported as {new!r}" for old, new in self.renamed]
        return out


def check_name(name: str) -> str:
    """A dataset name becomes a file name: letters, digits, spaces, ``_ . @ + - ( )``; ≤ 80 chars."""
    clean = name.strip() if isinstance(name, str) else ""
    if not _NAME_RE.match(clean) or clean in (".", ".."):
        raise DatasetStoreError(
            f"invalid dataset name {name!r}: use up to 80 letters, digits, spaces, or _ . @ + - ( ) "
            "(no slashes; not empty; not starting with a space or punctuation)"
        )
    return clean


def evidence_regions(item: DatasetItem) -> list[dict[str, Any]]:
    """The item's picked regions (an empty list when it has none or they are malformed)."""
    value = item.extra_meta.get(REGIONS_KEY)
    return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []


def with_regions(item: DatasetItem, regions: Sequence[dict[str, Any]]) -> DatasetItem:
    """``item`` with ``meta_info.evidence_regions`` set (removed when ``regions`` is empty)."""
    meta = {k: v for k, v in item.extra_meta.items() if k != REGIONS_KEY}
    if regions:
        meta[REGIONS_KEY] = [dict(r) for r in regions]
    return dataclasses.replace(item, extra_meta=meta)


class DatasetStore:
    """The datasets under one folder (:attr:`DataLayout.datasets`). Safe to call from worker threads:
    writes are serialised by one lock, and each is a whole-file atomic replace."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._lock = threading.RLock()

    # ---------------------------------------------------------------- datasets
    def path(self, name: str) -> Path:
        return self.root / f"{check_name(name)}{SUFFIX}"

    def names(self) -> list[str]:
        """Dataset names, sorted case-insensitively (a missing folder: none)."""
        try:
            files = [p for p in self.root.iterdir() if p.suffix == SUFFIX and p.is_file()]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise DatasetStoreError(f"cannot list the datasets in {self.root}: {_why(exc)}") from exc
        return sorted((p.stem for p in files if not p.name.startswith(".")), key=str.casefold)

    def exists(self, name: str) -> bool:
        return self.path(name).is_file()

    def infos(self) -> list[DatasetInfo]:
        """Every dataset with its item count; a damaged one is listed with the reason."""
        out = []
        for name in self.names():
            p = self.root / f"{name}{SUFFIX}"
            try:
                out.append(DatasetInfo(name, p, len(load_dataset(p))))
            except DatasetError as exc:
                out.append(DatasetInfo(name, p, None, str(exc)))
        return out

    def load(self, name: str) -> Dataset:
        """The dataset's items (raises :class:`DatasetError` naming the file when it is damaged)."""
        p = self.path(name)
        if not p.is_file():
            raise DatasetStoreError(f"there is no dataset {name!r} (looked for {p})")
        return load_dataset(p)

    def create(self, name: str) -> Path:
        """An empty dataset; an existing name is refused."""
        with self._lock:
            p = self.path(name)
            if p.exists():
                raise DatasetStoreError(f"a dataset named {check_name(name)!r} already exists")
            self._write(p, [])
            return p

    def rename(self, old: str, new: str) -> Path:
        with self._lock:
            src, dst = self.path(old), self.path(new)
            if not src.is_file():
                raise DatasetStoreError(f"there is no dataset {old!r}")
            if dst.exists() and dst != src:
                raise DatasetStoreError(f"a dataset named {check_name(new)!r} already exists")
            try:
                os.replace(src, dst)
            except OSError as exc:
                raise DatasetStoreError(f"cannot rename the dataset {old!r}: {_why(exc)}") from exc
            return dst

    def delete(self, name: str) -> None:
        """Remove the dataset's file (the UI asks first)."""
        with self._lock:
            try:
                self.path(name).unlink()
            except FileNotFoundError:
                return
            except OSError as exc:
                raise DatasetStoreError(f"cannot delete the dataset {name!r}: {_why(exc)}") from exc

    # ---------------------------------------------------------------- items
    def add_item(self, name: str, item: DatasetItem, *, create: bool = False) -> DatasetItem:
        """Append ``item`` (a blank uid gets a new one; a taken uid is refused). ``create``: make the
        dataset when it does not exist yet. Returns the item as written."""
        _check_item(item)
        with self._lock:
            p = self.path(name)
            items = list(self.load(name)) if (p.exists() or not create) else []
            taken = {i.uid for i in items}
            uid = item.uid.strip()
            if not uid:
                uid = new_uid(taken)
            elif uid in taken:
                raise DatasetStoreError(f"{name}: the uid {uid!r} is taken; pick another")
            item = dataclasses.replace(item, uid=uid)
            self._write(p, [*items, item])
            return item

    def update_item(self, name: str, uid: str, item: DatasetItem) -> DatasetItem:
        """Replace the item ``uid`` by ``item`` (which may change its uid to a free one)."""
        _check_item(item)
        with self._lock:
            items = list(self.load(name))
            at = next((n for n, i in enumerate(items) if i.uid == uid), None)
            if at is None:
                raise DatasetStoreError(f"{name}: no item with uid {uid!r}")
            new = item.uid.strip() or uid
            if new != uid and any(i.uid == new for i in items):
                raise DatasetStoreError(f"{name}: the uid {new!r} is taken; pick another")
            items[at] = dataclasses.replace(item, uid=new)
            self._write(self.path(name), items)
            return items[at]

    def delete_items(self, name: str, uids: Iterable[str]) -> int:
        """Remove the items ``uids``; returns how many were removed."""
        gone = set(uids)
        with self._lock:
            items = list(self.load(name))
            kept = [i for i in items if i.uid not in gone]
            if len(kept) != len(items):
                self._write(self.path(name), kept)
            return len(items) - len(kept)

    # ---------------------------------------------------------------- import / export
    def import_file(
        self, name: str, source: str | os.PathLike[str], *, refuse_duplicates: bool = False
    ) -> ImportReport:
        """Append the items of ``source`` (any form ``load_dataset`` reads) to ``name`` (created when
        missing). Taken uids are renamed and reported, or, with ``refuse_duplicates``, refused."""
        incoming = load_dataset(Path(source))
        with self._lock:
            p = self.path(name)
            items = list(self.load(name)) if p.exists() else []
            taken = {i.uid for i in items}
            clashes = [i.uid for i in incoming if i.uid in taken]
            if clashes and refuse_duplicates:
                shown = ", ".join(repr(u) for u in clashes[:5]) + (" …" if len(clashes) > 5 else "")
                raise DatasetStoreError(
                    f"{Path(source).name}: {len(clashes)} uid(s) already in {name!r} ({shown}); "
                    "nothing imported"
                )
            report = ImportReport()
            for item in incoming:
                uid = item.uid
                if uid in taken:
                    uid = _free(uid, taken)
                    report.renamed.append((item.uid, uid))
                taken.add(uid)
                items.append(dataclasses.replace(item, uid=uid))
                report.added += 1
            self._write(p, items)
            return report

    def export(self, name: str, dest: str | os.PathLike[str], fmt: str = "json") -> Path:
        """Write the dataset to ``dest`` as unified JSON (``json``), JSON lines (``jsonl``) or the verl
        parquet rows the original trains on (``parquet``, VRAG prompt; items need a file name)."""
        if fmt not in EXPORT_FORMATS:
            raise DatasetStoreError(f"unknown export format {fmt!r}; use one of {', '.join(EXPORT_FORMATS)}")
        items = list(self.load(name))
        out = Path(dest)
        try:
            if fmt == "json":
                write_unified(out, items)
            elif fmt == "parquet":
                from vrag_desktop.core.run.export import ExportError, export_dataset_rl

                try:
                    export_dataset_rl(items, out)
                except ExportError as exc:
                    raise DatasetStoreError(f"cannot export {name} as training data: {exc}") from exc
            else:
                lines = "".join(json.dumps(i.to_dict(), ensure_ascii=False) + "\n" for i in items)
                atomic_write_text(out, lines, mkdir=True)
        except OSError as exc:
            raise DatasetStoreError(f"cannot write {out}: {_why(exc)}") from exc
        return out

    # ---------------------------------------------------------------- writing
    def _write(self, p: Path, items: list[DatasetItem]) -> None:
        try:
            write_unified(p, items)
        except OSError as exc:
            raise DatasetStoreError(f"cannot write the dataset {p}: {_why(exc)}") from exc


def new_uid(taken: Iterable[str]) -> str:
    """The first free ``item-<n>``, counting on from the number of uids taken."""
    used = set(taken)
    n = len(used) + 1
    while f"item-{n}" in used:
        n += 1
    return f"item-{n}"


def _free(uid: str, taken: set[str]) -> str:
    n = 2
    while f"{uid}-{n}" in taken:
        n += 1
    return f"{uid}-{n}"


def _check_item(item: DatasetItem) -> None:
    if not item.query.strip():
        raise DatasetStoreError("the question is empty")
    if not str(item.reference_answer).strip():
        raise DatasetStoreError("the reference answer is empty")
    if any(isinstance(p, bool) or not isinstance(p, int) or p < 1 for p in item.reference_page):
        raise DatasetStoreError(f"pages are counted from 1, got {list(item.reference_page)}")


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


__all__ = [
    "EXPORT_FORMATS",
    "REGIONS_KEY",
    "DatasetInfo",
    "DatasetStore",
    "DatasetStoreError",
    "ImportReport",
    "check_name",
    "evidence_regions",
    "new_uid",
    "with_regions",
]
