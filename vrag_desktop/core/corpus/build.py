"""Building a corpus: derive every pending source and embed it, checkpointing as it goes.

Derivation (render, decode, OCR) runs in a child process (:mod:`.derive_process`), fed by a producer
thread, while the caller's thread embeds, so the embedder never waits for pages it could have had
rendered meanwhile and the app's GUI thread never waits for a render holding the GIL. Vectors are written to a
durable segment before the manifest records them, so a build can be killed at any moment and
resumed with no item lost or duplicated (see :meth:`Corpus._reconcile`).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from vrag_desktop.core.corpus import derive_process, kinds
from vrag_desktop.core.corpus.context import CONTEXT_DOCUMENT, page_header, settle_context_mode
from vrag_desktop.core.corpus.derive import Derived, DeriveOptions, SourceError, expected_count
from vrag_desktop.core.corpus.manifest import (
    I_EMBEDDED,
    I_FAILED,
    S_FAILED,
    S_INDEXED,
    S_PENDING,
    NewItem,
    SourceRow,
)
from vrag_desktop.core.corpus.scan import os_error_message
from vrag_desktop.core.embedders.base import Embedder, EmbedderError, EmbedInput
from vrag_desktop.core.progress import CancelToken, Progress, RateMeter

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.corpus import Corpus
    from vrag_desktop.core.index.store import VectorStore


@dataclass
class BuildReport:
    items: int = 0
    failed_items: int = 0
    failed_sources: int = 0
    seconds: float = 0.0
    cancelled: bool = False
    embed_seconds: float = 0.0
    wait_seconds: float = 0.0  # time the embedder sat idle waiting for derived input
    changed_during: list[str] = field(default_factory=list)


@dataclass
class _Result:
    source_id: int
    derived: Derived
    vectors: np.ndarray | None  # None: the item failed


def build_corpus(
    corpus: Corpus,
    embedder: Embedder,
    cancel: CancelToken | None = None,
    *,
    checkpoint_seconds: float = 10.0,
    checkpoint_items: int = 512,
    ocr: bool | None = None,
) -> Generator[Progress, None, BuildReport]:
    """Derive and embed every pending source. Yields progress; closing the generator or setting
    ``cancel`` stops at the next batch, keeping everything embedded so far."""
    corpus.bind_embedder(embedder)
    store = corpus.store()
    cancel = cancel or CancelToken()
    use_ocr = (not embedder.info.is_multimodal) if ocr is None else ocr
    opts = DeriveOptions(
        render_pixels=embedder.info.render_pixels,
        ocr=use_ocr,
        clip_seconds=corpus.clip_seconds,
        max_pages=corpus.max_pages,
    )
    contextual = settle_context_mode(corpus.manifest) == CONTEXT_DOCUMENT
    report = BuildReport()
    started = time.perf_counter()
    # Ids only grow (a high-water mark in the manifest), so a removed vector's id is never reused.
    next_id = max(
        int(store.ids().max(initial=-1)) + 1,
        corpus.manifest.max_vector_id() + 1,
        int(corpus.manifest.get_meta("next_vector_id") or 0),
    )
    total = corpus.pending_work()
    done = 0
    meter = RateMeter()
    yield Progress("index", 0, total)  # the embedder is ready: the first batch takes a while to derive
    attempts: dict[int, int] = {}
    notes: dict[int, str | None] = {}  # a finished source's note (page limit, video cut short)
    while True:
        sources = [s for s in corpus.manifest.sources(S_PENDING) if attempts.get(s.id, 0) < 2]
        if not sources:
            break
        for s in sources:
            attempts[s.id] = attempts.get(s.id, 0) + 1
        pipeline = _Pipeline(corpus, sources, opts, embedder, use_ocr, contextual)
        buffer: list[_Result] = []
        finished: dict[int, str | None] = {}
        last_ckpt = time.perf_counter()

        def checkpoint(pipeline: _Pipeline = pipeline, finished: dict[int, str | None] = finished) -> None:
            nonlocal next_id, buffer
            in_flight = pipeline.in_flight_sources()
            next_id = _commit(corpus, store, buffer, finished, in_flight, next_id, report, notes)
            buffer = []

        try:
            for kind, payload in pipeline.run(cancel, report):
                if kind == "results":
                    results = cast("list[_Result]", payload)
                    buffer.extend(results)
                    n = len(results)
                    done += n
                    rate = meter.update(n)
                    last = results[-1].derived
                    yield Progress(
                        "index",
                        done,
                        max(total, done),
                        rate,
                        meter.eta(max(total - done, 0)),
                        message=last.name,
                        failed=report.failed_items + report.failed_sources,
                    )
                else:  # a source finished: its final status is committed with its last items
                    sid, err, note = cast("tuple[int, str | None, str | None]", payload)
                    finished[sid] = err
                    notes[sid] = note
                now = time.perf_counter()
                if len(buffer) >= checkpoint_items or now - last_ckpt >= checkpoint_seconds:
                    checkpoint()
                    last_ckpt = now
        finally:
            pipeline.stop()
            checkpoint()
        if cancel.cancelled:
            report.cancelled = True
            break
    store.checkpoint()
    report.seconds = time.perf_counter() - started
    return report


def _commit(
    corpus: Corpus,
    store: VectorStore,
    results: list[_Result],
    finished: dict[int, str | None],
    in_flight: set[int],
    next_id: int,
    report: BuildReport,
    notes: dict[int, str | None] | None = None,
) -> int:
    """Persist results: vectors first (durable segment), then the manifest in one transaction. An
    indexed source keeps its note (``notes``: page limit, video cut short) as its ``error``."""
    ids_all, vecs_all, rows = [], [], []
    for r in results:
        vids: list[int] = []
        if r.vectors is not None:
            vids = list(range(next_id, next_id + len(r.vectors)))
            next_id += len(vids)
            ids_all.append(np.array(vids, dtype=np.int64))
            vecs_all.append(r.vectors)
        rows.append((r, vids))
    if ids_all:
        store.add(np.concatenate(ids_all), np.concatenate(vecs_all))
        store.checkpoint()
    m = corpus.manifest
    done_sources = {sid: err for sid, err in finished.items() if sid not in in_flight}
    redo: list[int] = []
    with m.transaction():
        for r, vids in rows:
            d = r.derived
            item_id = m.insert_item(
                NewItem(
                    source_id=r.source_id,
                    ordinal=d.ordinal,
                    name=d.name,
                    kind=d.kind,
                    status=I_EMBEDDED if vids else I_FAILED,
                    t_start=d.t_start,
                    t_end=d.t_end,
                    image_path=str(d.image_path) if d.image_path else None,
                    media_path=str(d.media_path) if d.media_path else None,
                    width=d.width,
                    height=d.height,
                    text=d.text,
                    text_source=d.text_source,
                    error=d.error,
                )
            )
            for chunk, vid in enumerate(vids):
                m.insert_vector(vid, item_id, chunk)
        m.set_meta("next_vector_id", str(next_id))
        for sid, err in done_sources.items():
            finished.pop(sid)
            src = m.source(sid)
            if src is None:
                continue
            if err is not None:
                report.failed_sources += 1
                m.update_source(sid, status=S_FAILED, error=err)
                redo += m.clear_items(sid)
                # A copy of it is tried in its own right (its name or place may be what failed);
                # the build's next round picks it up.
                copy = m.first_duplicate(sid)
                if copy is not None:
                    m.promote_duplicate(copy, sid)
            elif _stat_changed(src):
                # Edited while we read it: what we derived may mix two versions. Start over.
                report.changed_during.append(src.path)
                redo += m.clear_items(sid)
                st = _stat(src.path)
                m.update_source(
                    sid,
                    status=S_PENDING,
                    n_expected=None,
                    error="changed while indexing",
                    size=st.st_size if st else None,
                    mtime_ns=st.st_mtime_ns if st else None,
                )
                with contextlib.suppress(SourceError, OSError):
                    opts = DeriveOptions(clip_seconds=corpus.clip_seconds, max_pages=corpus.max_pages)
                    m.update_source(sid, n_expected=expected_count(Path(src.path), src.kind or "", opts))
            else:
                m.update_source(sid, status=S_INDEXED, error=(notes or {}).pop(sid, None))
    if redo:
        store.remove(redo)
        store.checkpoint()
    return next_id


class _Pipeline:
    """Derive in a producer thread while the caller's thread embeds, so the embedder never waits
    for pages it could have had rendered meanwhile. Yields ("results", [...]) and ("done", (id, err, note))."""

    _END = object()

    def __init__(
        self,
        corpus: Corpus,
        sources: list[SourceRow],
        opts: DeriveOptions,
        embedder: Embedder,
        use_ocr: bool,
        contextual: bool = False,
    ) -> None:
        self.corpus = corpus
        self.contextual = contextual
        self._contexts: dict[int, tuple[str, str | None]] = {}  # source id -> (path, first page's text)
        self.sources = sources
        self.opts = opts
        self.embedder = embedder
        self.use_ocr = use_ocr
        self.q: queue.Queue[object] = queue.Queue(maxsize=max(8, 2 * embedder.batch_size))
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self._open: set[int] = set()
        self._open_lock = threading.Lock()
        self._error: BaseException | None = None
        # done ordinals read here, on the caller's thread (SQLite connections stay on their thread)
        self._skip = {s.id: corpus.manifest.done_ordinals(s.id) for s in sources}

    def in_flight_sources(self) -> set[int]:
        with self._open_lock:
            return set(self._open)

    def _put(self, msg: object) -> bool:
        while not self.stop_event.is_set():
            try:
                self.q.put(msg, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        # Rendering and OCR run in a child process: PyMuPDF holds the GIL while it renders, which
        # would stall the app's window, and a decoder crash must fail one file, not the app.
        worker = derive_process.acquire()
        try:
            for src in self.sources:
                if self.stop_event.is_set():
                    return
                with self._open_lock:
                    self._open.add(src.id)
                err: str | None = None
                note: str | None = None
                try:
                    out_dir = self.corpus.derived_dir / str(src.id)
                    items = worker.derive(
                        Path(src.path),
                        src.kind or "",
                        out_dir,
                        self.opts,
                        self._skip[src.id],
                        self.use_ocr,
                        self.stop_event,
                    )
                    while True:
                        try:
                            d = next(items)
                        except StopIteration as end:
                            note = end.value
                            break
                        if not self._put(("item", src.id, d)):
                            return
                except SourceError as exc:
                    err = str(exc)
                except OSError as exc:
                    err = os_error_message(exc)
                except Exception as exc:  # a decoder bug must not kill the whole build
                    err = f"unexpected error: {type(exc).__name__}: {exc}"
                if not self._put(("done", src.id, (err, note))):
                    return
        except BaseException as exc:  # pragma: no cover - surfaced on the consumer side
            self._error = exc
        finally:
            if self.stop_event.is_set():
                worker.close(kill=True)
            else:
                derive_process.release(worker)
            self._put(self._END)

    def run(self, cancel: CancelToken, report: BuildReport) -> Generator[tuple[str, object], None, None]:
        self.thread = threading.Thread(target=self._produce, name="vrag-derive", daemon=True)
        self.thread.start()
        batch: list[tuple[int, Derived]] = []
        ended = False
        while not ended:
            if cancel.cancelled:
                return
            # Fill a batch: block for the first message, then take what arrives until the batch is full.
            pending_done: list[tuple[int, str | None, str | None]] = []
            failed: list[_Result] = []
            while len(batch) < self.embedder.batch_size:
                t_wait = time.perf_counter()
                try:
                    msg = self.q.get(timeout=0.05 if batch else 0.2)
                except queue.Empty:
                    report.wait_seconds += time.perf_counter() - t_wait
                    if cancel.cancelled:
                        return
                    if batch or pending_done or failed:
                        break
                    continue
                report.wait_seconds += time.perf_counter() - t_wait
                if msg is self._END:
                    ended = True
                    break
                kind, sid, payload = cast("tuple[str, int, Any]", msg)
                if kind == "item":
                    d: Derived = payload
                    if d.error:
                        failed.append(_Result(sid, d, None))
                    else:
                        batch.append((sid, d))
                else:
                    pending_done.append((sid, *payload))
            if self._error is not None:
                raise self._error
            report.items += len(failed)
            report.failed_items += len(failed)
            results = failed + self._embed(batch, report)
            batch = []
            # Sources are "open" until all their items are out of the pipeline.
            with self._open_lock:
                for sid, _, _ in pending_done:
                    self._open.discard(sid)
            if results:
                yield "results", results
            for sid_err in pending_done:
                yield "done", sid_err

    def _embed(self, batch: list[tuple[int, Derived]], report: BuildReport) -> list[_Result]:
        if not batch:
            return []
        inputs = [_embed_input(d, self._context(sid, d)) for sid, d in batch]
        t0 = time.perf_counter()
        try:
            vecs = self.embedder.embed_items(inputs)
            out = [_Result(sid, d, v) for (sid, d), v in zip(batch, vecs, strict=True)]
        except EmbedderError:
            out = []
            for (sid, d), inp in zip(batch, inputs, strict=True):  # isolate the bad item
                try:
                    out.append(_Result(sid, d, self.embedder.embed_items([inp])[0]))
                except EmbedderError as exc:
                    d.error = f"could not embed: {exc}"
                    out.append(_Result(sid, d, None))
        report.embed_seconds += time.perf_counter() - t0
        for r in out:
            report.items += 1
            if r.vectors is None:
                report.failed_items += 1
        return out

    def _context(self, sid: int, d: Derived) -> str | None:
        """The header item ``d`` of source ``sid`` carries, read from the document's first page: this
        item when it is the first (pages arrive in order), else the first page stored by an earlier,
        interrupted build."""
        if not self.contextual:
            return None
        if sid not in self._contexts:
            src = next(s for s in self.sources if s.id == sid)
            first: str | None = d.text
            if d.ordinal != 1:
                row = self.corpus.manifest.item_at(sid, 1)
                first = row.text if row is not None else None
            self._contexts[sid] = (src.path, first)
        path, first = self._contexts[sid]
        return page_header(path, first, d.ordinal, with_name=False)

    def stop(self) -> None:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout=30)


def _embed_input(d: Derived, context: str | None = None) -> EmbedInput:
    kind = {kinds.ITEM_CLIP: "video", kinds.ITEM_TEXT: "text"}.get(d.kind, "image")
    return EmbedInput(
        kind=kind,
        text=d.text,
        context=context,
        image_path=d.image_path,
        frames=d.frames or None,
        timestamps=d.timestamps or None,
    )


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _stat_changed(src: SourceRow) -> bool:
    st = _stat(src.path)
    return st is None or st.st_size != src.size or st.st_mtime_ns != src.mtime_ns
