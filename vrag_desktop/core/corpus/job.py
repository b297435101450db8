"""The indexing job — lock, add/remove folders, scan, embedder check, build — written once.

The CLI's ``index`` and ``corpus rescan`` commands and the app's background indexer run this same
generator; they differ only in how they show what it yields (a progress bar, or Qt signals) and in
where the embedder comes from (loaded by name, or the app's shared model). It opens its *own*
corpus (its own SQLite connection and write lock), so it may run on any one thread.

Cancel it by setting the :class:`CancelToken` (stops at the next batch) or by closing the generator;
either way everything embedded so far is kept and the corpus is unlocked.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from vrag_desktop.core.corpus.build import BuildReport
from vrag_desktop.core.corpus.corpus import Corpus, CorpusError, embedder_mismatch
from vrag_desktop.core.corpus.library import Library
from vrag_desktop.core.corpus.manifest import S_FAILED
from vrag_desktop.core.corpus.scan import ScanReport
from vrag_desktop.core.corpus.status import disk_failures, indexed_under, set_scan_needed
from vrag_desktop.core.embedders.base import Embedder
from vrag_desktop.core.progress import CancelToken, Progress

#: Checkpoint cadence knobs (seconds, items); the defaults suit interactive use.
CHECKPOINT_SECONDS_ENV = "VRAG_DESKTOP_CHECKPOINT_SECONDS"
CHECKPOINT_ITEMS_ENV = "VRAG_DESKTOP_CHECKPOINT_ITEMS"

#: Loads the embedder for a corpus; gets the model the corpus was built with (None: a new corpus).
EmbedderLoader = Callable[[str | None], Embedder]


@dataclass
class IndexRequest:
    """What to do to one corpus. ``skip_missing``: drop paths that do not exist (with a
    :class:`MissingPaths` notice) instead of refusing the whole request."""

    corpus: str
    paths: list[str] = field(default_factory=list)
    remove_roots: list[str] = field(default_factory=list)
    retry_failed: bool = False
    create: bool = False
    skip_missing: bool = False
    require_files: bool = False  # refuse a corpus with no files yet (nothing to scan)
    embedder: str | None = None  # the embedder asked for, checked before a large model is loaded
    clip_seconds: float | None = None
    max_pages: int | None = None  # pages indexed per document (None: the corpus's, default 3,000)
    ocr: bool | None = None
    #: Rebuild a corpus whose manifest cannot be read (from the folders that can still be read from
    #: it; everything is indexed again). Damaged index files are repaired by every job regardless.
    repair: bool = False


@dataclass(frozen=True)
class Repaired:
    """Yielded when the job found damage and repaired it (one sentence a line)."""

    lines: list[str]


@dataclass(frozen=True)
class MissingPaths:
    """Yielded when ``skip_missing`` dropped paths that were not found."""

    paths: list[str]


@dataclass(frozen=True)
class EmbedderReady:
    """Yielded once the embedder is loaded, just before the build: which model, where."""

    description: str  # e.g. "minilm-l6-v2 (dim 384) on cpu"
    pending: int  # items to derive and embed


@dataclass(frozen=True)
class ScanDone:
    """Yielded after the scan: what changed, and folders that are missing (with files they keep)."""

    report: ScanReport
    missing: list[tuple[str, int]]


@dataclass(frozen=True)
class JobResult:
    """How the job ended, with what a front end reports afterwards (read before the corpus closed)."""

    name: str
    scan: ScanReport | None
    build: BuildReport | None
    disk_failures: list[tuple[str, str]] = field(default_factory=list)
    new_failures: list[tuple[str, str]] = field(default_factory=list)  # (path, reason) new in this job
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # every (path, what, reason)
    stats: dict[str, object] = field(default_factory=dict)
    cancelled: bool = False
    repaired: list[str] = field(default_factory=list)  # what the job found damaged and repaired


def index_job(
    library: Library, request: IndexRequest, load_embedder: EmbedderLoader, cancel: CancelToken
) -> Generator[Progress | MissingPaths | ScanDone | EmbedderReady | Repaired, None, JobResult]:
    """Run one request to completion (see the module docstring). Raises :class:`CorpusError` (and
    :class:`CorpusBusy` while another process indexes the corpus) with a message for the person."""
    name = request.corpus
    is_new = not library.exists(name)
    if is_new and not request.create:
        raise CorpusError(f"no corpus named '{name}'")
    repaired: list[str] = []
    if request.repair and not is_new:
        repaired += _rebuild_if_unreadable(library, name)
    corpus = library.open(name, create=True)
    try:
        corpus.lock()
        if corpus.dim is not None:
            corpus.store()  # opened by the writer: damaged index files are dropped, their items redone
            repaired += [f"{d} — its items are embedded again" for d in corpus.repaired]
        if repaired:
            yield Repaired(repaired)
        failed_before = {s.id for s in corpus.manifest.sources(S_FAILED)}
        yield from _change_roots(corpus, request, is_new)
        if request.clip_seconds is not None:
            corpus.clip_seconds = request.clip_seconds
        if request.max_pages is not None:
            corpus.max_pages = request.max_pages
        _check_requested_embedder(corpus, request.embedder)
        yield Progress("scan", 0, 0, message=f"{len(corpus.manifest.roots())} location(s)")
        scan = yield from corpus.scan(cancel, retry_failed=request.retry_failed)
        if cancel.cancelled:
            return JobResult(name, scan, None, cancelled=True, repaired=repaired)
        set_scan_needed(corpus.manifest, False)
        yield ScanDone(scan, [(r, indexed_under(corpus.manifest, r)) for r in scan.missing_roots])
        build = None
        pending = corpus.pending_work()
        if pending:
            yield Progress("load", 0, pending)
            embedder = load_embedder(corpus.manifest.get_meta("embedder_model"))
            problem = embedder_mismatch(name, corpus.embedder_id, embedder.info.id)
            if problem:
                raise CorpusError(problem)
            if cancel.cancelled:
                return JobResult(name, scan, None, cancelled=True, repaired=repaired)
            info = embedder.info
            yield EmbedderReady(f"{info.id} (dim {info.dim}) on {embedder.device}", pending)
            build = yield from corpus.build(embedder, cancel, ocr=request.ocr, **_checkpoint_knobs())
        cancelled = build is not None and build.cancelled
        return _result(corpus, failed_before, scan, build, cancelled=cancelled, repaired=repaired)
    finally:
        corpus.close()


def _rebuild_if_unreadable(library: Library, name: str) -> list[str]:
    """A corpus whose manifest SQLite cannot read is set aside and started afresh (see
    :func:`~vrag_desktop.core.corpus.integrity.set_aside`); returns what was done, in words."""
    from vrag_desktop.core.corpus.integrity import manifest_readable, set_aside

    problem = manifest_readable(library.corpus_dir(name))
    if problem is None:
        return []
    aside = set_aside(library, name)
    folders = f"its {len(aside.roots)} folder(s)" if aside.roots else "no folder list (it was unreadable)"
    lines = [
        f"the manifest could not be read ({problem}); the corpus was started afresh with {folders} "
        f"and is indexed again. The damaged copy is kept in {aside.kept_at}; delete it when you no "
        "longer need it."
    ]
    if not aside.roots:
        lines.append(f"Add your folders again: vrag-desktop index PATH --corpus '{name}'")
    return lines


def _change_roots(corpus: Corpus, request: IndexRequest, is_new: bool) -> Generator[MissingPaths, None, None]:
    """Apply the request's removed and added folders; a refused request leaves no empty new corpus."""
    if request.remove_roots:
        corpus.remove_paths(request.remove_roots)
        set_scan_needed(corpus.manifest, True)
    paths = request.paths
    if paths and request.skip_missing:
        missing = [p for p in paths if not os.path.lexists(p)]
        if missing:
            yield MissingPaths(missing)
        paths = [p for p in paths if p not in missing]
    if paths:
        try:
            corpus.add_paths(paths)
        except CorpusError:
            if is_new and not corpus.manifest.roots():
                corpus.delete_files()  # do not leave an empty corpus behind a typo
            raise
        set_scan_needed(corpus.manifest, True)
    elif request.require_files and not corpus.manifest.roots():
        if is_new:
            corpus.delete_files()
        raise CorpusError(
            f"corpus '{corpus.name}' has no files yet: vrag-desktop index PATH --corpus {corpus.name}"
        )


def _check_requested_embedder(corpus: Corpus, spec: str | None) -> None:
    """Refuse a known mismatch before loading a multi-GB model (the rest is checked once loaded)."""
    if not spec or corpus.embedder_id is None or spec == corpus.manifest.get_meta("embedder_model"):
        return
    from vrag_desktop.core.embedders.minilm import MINILM_ID

    # Only the built-in embedder's id is known from its name; a model's id is read once it is loaded.
    if spec.strip().lower().startswith("minilm"):
        problem = embedder_mismatch(corpus.name, corpus.embedder_id, MINILM_ID)
        if problem:
            raise CorpusError(problem)


def _checkpoint_knobs() -> dict[str, Any]:
    kw: dict[str, Any] = {}
    if os.environ.get(CHECKPOINT_SECONDS_ENV):
        kw["checkpoint_seconds"] = float(os.environ[CHECKPOINT_SECONDS_ENV])
    if os.environ.get(CHECKPOINT_ITEMS_ENV):
        kw["checkpoint_items"] = int(os.environ[CHECKPOINT_ITEMS_ENV])
    return kw


def _result(
    corpus: Corpus,
    failed_before: set[int],
    scan: ScanReport,
    build: BuildReport | None,
    *,
    cancelled: bool,
    repaired: list[str],
) -> JobResult:
    disk = disk_failures(corpus.manifest)
    new = [
        (s.path, s.error or "failed")
        for s in corpus.manifest.sources(S_FAILED)
        if s.id not in failed_before and (s.path, s.error or "") not in disk
    ]
    return JobResult(
        corpus.name,
        scan,
        build,
        disk,
        new,
        corpus.manifest.failures(),
        corpus.stats(),
        cancelled,
        repaired,
    )
