"""An evaluation's folder: what was asked (``eval.json``), one result a line as each item finishes
(``results.jsonl``), and the summary and report written at the end.

Why a line per item, synced as written: an evaluation of a few hundred agent runs takes hours and
is stopped by Ctrl-C, a crash or ``kill -9``; the rerun reads what is there, drops a torn last line,
and does only the items that have no result. A rerun with other settings would mix two
evaluations in one file, so it is refused with what differs.

A damaged line in the middle (a disk error, a hand edit) costs its own item only: the lines after
it are kept, the damaged one is moved to ``results.damaged.txt`` (never thrown away: it may be
the only copy of a long agent run) and the person is told (:attr:`EvalStore.warning`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrag_desktop.core.fsutil import atomic_write_bytes, atomic_write_json, atomic_write_text, fsync_dir

__all__ = ["EvalError", "EvalStore", "ParsedResults", "parse_results"]

HEADER = "eval.json"
RESULTS = "results.jsonl"
DAMAGED = "results.damaged.txt"
SUMMARY = "summary.json"
REPORT = "report.html"


@dataclass
class ParsedResults:
    """``results.jsonl`` read line by line: the rows by uid (a later line wins), the complete lines
    that hold them, the complete lines that are damaged (not a JSON object with a ``uid``) and
    the torn last line (no final newline: a write cut by a kill), empty when there is none."""

    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    good: list[bytes] = field(default_factory=list)
    damaged: list[bytes] = field(default_factory=list)
    torn: bytes = b""


def parse_results(data: bytes) -> ParsedResults:
    """Every complete line of ``data``; a damaged one is set aside and the reading goes on."""
    *lines, tail = data.split(b"\n")  # "\n" only: a damaged line may hold a stray "\r"
    out = ParsedResults(torn=tail)
    for line in (x + b"\n" for x in lines):
        if not line.strip():
            continue  # an empty line holds nothing
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past reason
            row = None
        if isinstance(row, dict) and "uid" in row:
            out.rows[str(row["uid"])] = row
            out.good.append(line)
        else:
            out.damaged.append(line)
    return out


class EvalError(Exception):
    """An evaluation cannot start or go on; the message says why and what to do."""


class EvalStore:
    """The folder of one evaluation. ``fingerprint``: what must be equal for a rerun to resume it."""

    def __init__(self, folder: Path, header: dict[str, Any]) -> None:
        self.folder = Path(folder)
        self.header = header
        self.results: dict[str, dict[str, Any]] = {}
        self.damaged = 0  # damaged lines found (and moved to DAMAGED) when it was opened

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
                for name in (HEADER, RESULTS, DAMAGED, SUMMARY, REPORT):
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
        """The rows so far. A torn last line is dropped (its item is done again); damaged lines
        are appended to DAMAGED (synced) before ``results.jsonl`` is rewritten without them."""
        path = self.folder / RESULTS
        if not path.is_file():
            return
        data = path.read_bytes()
        parsed = parse_results(data)
        self.results = parsed.rows
        if parsed.damaged:
            with open(self.folder / DAMAGED, "ab") as fh:
                fh.write(b"".join(parsed.damaged))
                fh.flush()
                os.fsync(fh.fileno())
            fsync_dir(self.folder)
            atomic_write_bytes(path, b"".join(parsed.good))
            self.damaged = len(parsed.damaged)
        elif parsed.torn:
            with open(path, "r+b") as fh:
                fh.truncate(len(data) - len(parsed.torn))

    @property
    def warning(self) -> str | None:
        """What the person must hear about the folder's results (damaged lines), or None."""
        if not self.damaged:
            return None
        lines = "line" if self.damaged == 1 else "lines"
        return f"{self.damaged} damaged {lines} in {RESULTS} moved to {DAMAGED}; their items are done again"

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
