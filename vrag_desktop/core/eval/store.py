"""An evaluation's folder: what was asked (``eval.json``), one result a line as each item finishes
(``results.jsonl``), and the summary and report written at the end.

Why a line per item, synced as written: an evaluation of a few hundred agent runs takes hours and
is stopped by Ctrl-C, a crash or ``kill -9``; the rerun reads what is there, drops a torn last line,
and does only the items that have no result. A rerun with other settings would mix two
evaluations in one file, so it is refused with what differs.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from vrag_desktop.core.fsutil import atomic_write_json, atomic_write_text

__all__ = ["EvalError", "EvalStore"]

HEADER = "eval.json"
RESULTS = "results.jsonl"
SUMMARY = "summary.json"
REPORT = "report.html"


class EvalError(Exception):
    """An evaluation cannot start or go on; the message says why and what to do."""


class EvalStore:
    """The folder of one evaluation. ``fingerprint``: what must be equal for a rerun to resume it."""

    def __init__(self, folder: Path, header: dict[str, Any]) -> None:
        self.folder = Path(folder)
        self.header = header
        self.results: dict[str, dict[str, Any]] = {}

    @classmethod
    def open(
        cls, folder: str | os.PathLike[str], header: dict[str, Any], *, restart: bool = False
    ) -> EvalStore:
        """Start ``folder``, or resume it when it holds an evaluation with the same fingerprint."""
        folder = Path(folder)
        store = cls(folder, dict(header))
        head = folder / HEADER
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if restart:
                for name in (HEADER, RESULTS, SUMMARY, REPORT):
                    (folder / name).unlink(missing_ok=True)
            if head.is_file():
                old = json.loads(head.read_text(encoding="utf-8"))
                diff = _differences(old.get("fingerprint", {}), header.get("fingerprint", {}))
                if diff:
                    raise EvalError(
                        f"{folder} holds an evaluation started with other settings ({'; '.join(diff)}). "
                        "Choose another output folder, or restart it (its results are deleted)."
                    )
                store.header = {**old, **{k: v for k, v in header.items() if k != "created"}}
                store._read_results()
            else:
                store.header.setdefault("created", time.time())
                atomic_write_json(head, store.header)
        except OSError as exc:
            raise EvalError(f"cannot use {folder} for the evaluation: {exc.strerror or exc}") from exc
        except json.JSONDecodeError as exc:
            raise EvalError(f"{head} is damaged ({exc}); restart the evaluation in a new folder") from exc
        return store

    # ---------------------------------------------------------------- results
    def _read_results(self) -> None:
        path = self.folder / RESULTS
        if not path.is_file():
            return
        data = path.read_bytes()
        good = 0  # bytes up to the last complete line
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # torn by a kill in the middle of a write
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                break
            self.results[str(row["uid"])] = row
            good += len(line)
        if good < len(data):
            with open(path, "r+b") as fh:
                fh.truncate(good)

    def done(self, uid: str) -> bool:
        return uid in self.results

    def add(self, row: dict[str, Any]) -> None:
        """Record one item's result durably (flushed and synced before returning)."""
        line = json.dumps(row, ensure_ascii=False) + "\n"
        with open(self.folder / RESULTS, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        self.results[str(row["uid"])] = row

    def finish(self, summary: dict[str, Any], report_html: str | None = None) -> None:
        atomic_write_json(self.folder / SUMMARY, summary)
        if report_html is not None:
            atomic_write_text(self.folder / REPORT, report_html)

    @property
    def report_path(self) -> Path:
        return self.folder / REPORT


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    keys = sorted(set(old) | set(new))
    return [f"{k}: {old.get(k)!r} then, {new.get(k)!r} now" for k in keys if old.get(k) != new.get(k)]
