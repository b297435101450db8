"""``vrag-desktop index`` and ``vrag-desktop corpus``: the indexing job shown in a terminal.

The job itself (lock, scan, embedder check, build) is :mod:`vrag_desktop.core.corpus.job`; this
module only turns its progress into lines and a progress bar, and Ctrl-C into a clean stop.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from vrag_desktop.cli.common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    CLIError,
    command_group,
    err,
    library,
)

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.job import IndexRequest, JobResult
    from vrag_desktop.core.progress import CancelToken


def add_index_parser(sub: Any) -> None:
    ix = sub.add_parser("index", help="add files/folders to a corpus and index them (resumes if interrupted)")
    ix.add_argument(
        "paths", nargs="*", metavar="PATH", help="files or folders (recursive); none: re-scan the corpus"
    )
    ix.add_argument("--corpus", default="default", help="corpus name (created if new; default: %(default)s)")
    ix.add_argument(
        "--embedder",
        default=None,
        help="minilm (default, offline), or a Qwen3-VL-Embedding / GVE model id or local directory",
    )
    ix.add_argument("--device", default=None, help="cpu, cuda, cuda:1 … (default: CUDA if available)")
    ix.add_argument(
        "--clip-seconds", type=float, default=None, help="video clip length in seconds (default 60)"
    )
    ix.add_argument(
        "--max-pages",
        type=int,
        default=None,
        metavar="N",
        help="pages indexed per document, kept by the corpus (default 3000); raising it indexes the "
        "remaining pages of documents that were cut",
    )
    ix.add_argument("--no-ocr", action="store_true", help="do not OCR pages and images without a text layer")
    ix.add_argument("--quiet", action="store_true", help="no progress bar")


def add_corpus_parser(sub: Any) -> None:
    cs = command_group(
        sub,
        "corpus",
        help="list, remove, rescan corpora; import or export an original VRAG index",
    )
    cl = cs.add_parser("list", help="corpora with their counts")
    cl.add_argument("--json", action="store_true")
    cr = cs.add_parser("remove", help="delete a corpus (its index and derived images; never your files)")
    cr.add_argument("name")
    ck = cs.add_parser(
        "check",
        help="read a corpus's whole index and manifest and say what is damaged; --repair mends it",
    )
    ck.add_argument("name")
    ck.add_argument(
        "--repair",
        action="store_true",
        help="drop damaged index files and embed their items again (a manifest that cannot be read: "
        "rebuild the corpus from its folders)",
    )
    ck.add_argument("--device", default=None)
    ck.add_argument("--quiet", action="store_true")
    cs_ = cs.add_parser("rescan", help="pick up new, changed and deleted files and index them")
    cs_.add_argument("name", nargs="?", default="default")
    cs_.add_argument("--retry-failed", action="store_true", help="try failed files again even if unchanged")
    cs_.add_argument("--device", default=None)
    cs_.add_argument("--quiet", action="store_true")
    ci = cs.add_parser(
        "import-legacy",
        help="import an original VRAG index folder (*_faiss_index.bin, "
        "*_meta_data.json, *_file_data_list.jsonl)",
    )
    ci.add_argument("folder")
    ci.add_argument("--name", required=True, help="name of the new corpus")
    ci.add_argument(
        "--embedder", default=None, help="embedder for queries (default: from the index's model_name)"
    )
    ci.add_argument(
        "--no-views",
        action="store_true",
        help="do not make the pages' model views ahead (each is then made on its first show, ~30 ms)",
    )
    ce = cs.add_parser(
        "export-original",
        help="write a corpus as an original VRAG index folder (*_faiss_index.bin, *_meta_data.json, "
        "*_file_data_list.jsonl) that the original search server loads",
    )
    ce.add_argument("name", help="the corpus to export")
    ce.add_argument(
        "--out", required=True, metavar="DIR", help="folder to write (page images are copied into it)"
    )
    ce.add_argument(
        "--model-name",
        default=None,
        help="model name for the file names and metadata; the original server must be started with the "
        "same string (default: the model the corpus was indexed with)",
    )
    ce.add_argument(
        "--paths-relative-to",
        default=None,
        metavar="DIR",
        help="write file paths relative to DIR (the folder the original server runs from); default absolute",
    )


# ---------------------------------------------------------------- index
def cmd_index(args: argparse.Namespace) -> int:
    from vrag_desktop.core.corpus.job import IndexRequest

    if args.clip_seconds is not None and args.clip_seconds <= 0:
        raise CLIError("--clip-seconds must be positive")
    if args.max_pages is not None and args.max_pages < 1:
        raise CLIError("--max-pages must be at least 1")
    request = IndexRequest(
        args.corpus,
        paths=list(args.paths),
        create=True,
        require_files=True,
        embedder=args.embedder,
        clip_seconds=args.clip_seconds,
        max_pages=args.max_pages,
        ocr=False if args.no_ocr else None,
    )
    return run_index(args, request, args.embedder, args.quiet)


def run_index(args: argparse.Namespace, request: IndexRequest, embedder_spec: str | None, quiet: bool) -> int:
    """Run the job, drawing its progress; Ctrl-C while embedding stops cleanly (resumable)."""
    from vrag_desktop.core.corpus.job import index_job
    from vrag_desktop.core.embedders import create_embedder
    from vrag_desktop.core.progress import CancelToken

    lib = library(args)

    def load(recorded: str | None) -> Any:
        return create_embedder(embedder_spec or recorded, device=args.device, data_dir=lib.data_dir)

    cancel = CancelToken()
    view = _ProgressView(request.corpus, quiet, cancel)
    gen = index_job(lib, request, load, cancel)
    try:
        result = yield_all(gen, view)
    finally:
        gen.close()
        view.close()
    _print_summary(result)
    if result.cancelled:
        err("Interrupted: everything embedded so far is saved. Run the same command again to resume.")
        return EXIT_INTERRUPTED
    return EXIT_OK


def yield_all(gen: Generator[Any, None, JobResult], view: _ProgressView) -> JobResult:
    """Drive the job to its result, showing each thing it yields."""
    while True:
        try:
            view.show(next(gen))
        except StopIteration as stop:
            return stop.value


class _ProgressView:
    """Lines for the phases and a tqdm bar while embedding; installs the Ctrl-C handler for the build."""

    def __init__(self, corpus: str, quiet: bool, cancel: CancelToken) -> None:
        self.corpus = corpus
        self.quiet = quiet
        self.cancel = cancel
        self.bar: Any = None
        self._previous_sigint: Any = None

    def show(self, value: object) -> None:
        from vrag_desktop.core.corpus.job import EmbedderReady, Repaired, ScanDone
        from vrag_desktop.core.progress import Progress

        if isinstance(value, Repaired):
            for line in value.lines:
                err(f"  repaired: {line}")
            return
        if isinstance(value, EmbedderReady):
            err(f"  {value.description}", self.quiet)
            self._start_build(value.pending)
            return
        if isinstance(value, ScanDone):
            s = value.report
            err(
                f"  {s.added} new, {s.changed} changed, {s.removed} removed, {s.unchanged} unchanged"
                + (f", {s.renamed} moved or renamed" if s.renamed else "")
                + (f", {s.duplicates} duplicate" if s.duplicates else "")
                + (f", {s.unsupported} unsupported" if s.unsupported else "")
                + (f", {s.failed} unreadable" if s.failed else ""),
                self.quiet,
            )
            for root in s.missing_roots:
                err(f"  warning: {root} is missing (unplugged or moved?); its files stay in the index")
            return
        if not isinstance(value, Progress):
            return
        if value.phase == "scan" and value.done == 0 and value.total == 0:
            err(f"Scanning {value.message} for corpus '{self.corpus}'…", self.quiet)
        elif value.phase == "load":
            err("Loading embedder…", self.quiet)
        elif value.phase == "index" and self.bar is not None:
            self.bar.total = max(self.bar.total or 0, value.total)
            self.bar.update(value.done - self.bar.n)
            postfix = value.message[-40:] + (f" ({value.failed} failed)" if value.failed else "")
            self.bar.set_postfix_str(postfix, refresh=False)

    def _start_build(self, total: int) -> None:
        # Ctrl-C during the build sets the job's token: it stops at the next batch, keeping its work.
        self._previous_sigint = signal.signal(signal.SIGINT, lambda *_: self.cancel.cancel())
        if not self.quiet:
            from tqdm import tqdm

            self.bar = tqdm(
                total=total,
                unit="item",
                dynamic_ncols=True,
                file=sys.stderr,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}] {postfix}",
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self._previous_sigint is not None:
            signal.signal(signal.SIGINT, self._previous_sigint)
            self._previous_sigint = None


def _print_summary(result: JobResult) -> None:
    from vrag_desktop.core.corpus.scan import display_path

    st, report = result.stats, result.build
    line = (
        f"Corpus '{result.name}': {st['indexed_files']} file(s) indexed, {st['items']} item(s), "
        f"{st['vectors']} vector(s)"
    )
    if report is not None and report.seconds > 0:
        line += f"; this run: {report.items} item(s) in {report.seconds:.1f} s ({report.items / report.seconds:.1f}/s)"
    print(line, file=sys.stderr)
    if result.failures:
        print(f"{len(result.failures)} problem(s):", file=sys.stderr)
        for path, what, reason in result.failures:
            where = display_path(path) + ("" if what == "file" else f" [{what}]")
            print(f"  - {where}: {reason}", file=sys.stderr)


# ---------------------------------------------------------------- corpus
def cmd_corpus(args: argparse.Namespace) -> int:
    lib = library(args)
    if args.corpus_command == "list":
        return _list(lib, args)
    if args.corpus_command == "remove":
        lib.remove(args.name)
        print(f"Removed corpus '{args.name}' (your files were not touched).")
        return EXIT_OK
    if args.corpus_command == "rescan":
        from vrag_desktop.core.corpus.job import IndexRequest

        lib.open(args.name, read_only=True).close()  # "no corpus named …, corpora: …" first
        request = IndexRequest(args.name, retry_failed=args.retry_failed)
        return run_index(args, request, None, args.quiet)
    if args.corpus_command == "check":
        return _check(lib, args)
    if args.corpus_command == "import-legacy":
        from vrag_desktop.core.corpus.legacy import import_legacy_index

        corpus = import_legacy_index(lib, args.folder, args.name, embedder=args.embedder)
        try:
            st = corpus.stats()
            print(
                f"Imported {st['vectors']} vectors into corpus '{corpus.name}' (embedder {st['embedder']})."
            )
            if not args.no_views:
                _prepare_views([i.image_path for i in corpus.manifest.items() if i.image_path])
        finally:
            corpus.close()
        return EXIT_OK
    if args.corpus_command == "export-original":
        return _export_original(lib, args)
    raise CLIError(f"unknown corpus action {args.corpus_command}")


def _list(lib: Any, args: argparse.Namespace) -> int:
    """``corpus list``: every corpus, a damaged or unreadable one with what is wrong (never a
    traceback, never hiding the others). Reads only."""
    import sqlite3

    from vrag_desktop.core.corpus.errors import CorpusError
    from vrag_desktop.core.corpus.manifest import damaged_message
    from vrag_desktop.core.index.store import quick_damage

    rows: list[dict[str, Any]] = []
    for name in lib.names():
        try:
            c = lib.open(name, read_only=True)
            try:
                row = c.stats() | {"notes": [{"path": p, "note": n} for p, n in c.manifest.notes()]}
            finally:
                c.close()
        except (CorpusError, sqlite3.DatabaseError) as exc:
            problem = str(exc) if isinstance(exc, CorpusError) else damaged_message(lib.corpus_dir(name), exc)
            rows.append({"name": name, "state": "unreadable", "problem": problem})
            continue
        damage = [str(d) for d in quick_damage(lib.corpus_dir(name) / "index")]
        rows.append(row | {"state": "damaged" if damage else "ok", "damage": damage})
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=True))
        return EXIT_OK
    if not rows:
        print("No corpora yet. Create one with: vrag-desktop index PATH --corpus NAME")
        return EXIT_OK
    print(f"{'corpus':<20} {'files':>6} {'items':>7} {'vectors':>8} {'failed':>6}  embedder")
    for r in rows:
        if r["state"] == "unreadable":
            print(f"{r['name']:<20} {'unreadable':>30}  -")
            continue
        print(
            f"{r['name']:<20} {r['source_files']:>6} {r['items']:>7} {r['vectors']:>8} {r['failures']:>6}  "
            f"{r['embedder'] or '-'}" + ("  DAMAGED" if r["damage"] else "")
        )
    for r in rows:
        if r["state"] == "unreadable":
            print(f"{r['name']}: {r['problem']}")
        elif r["damage"]:
            print(
                f"{r['name']}: damaged index ({'; '.join(r['damage'])}); repair it with: "
                f"vrag-desktop corpus check '{r['name']}' --repair"
            )
    _print_notes([r for r in rows if r["state"] != "unreadable"])
    return EXIT_OK


def _print_notes(rows: list[dict[str, Any]], shown: int = 5) -> None:
    """Files indexed only in part (a page limit, a video cut short), a few per corpus."""
    from vrag_desktop.core.corpus.scan import display_path

    for r in rows:
        notes = r["notes"]
        if not notes:
            continue
        print(f"{r['name']}: {len(notes)} file(s) indexed in part:")
        for n in notes[:shown]:
            print(f"  - {display_path(n['path'])}: {n['note']}")
        if len(notes) > shown:
            print(f"  … and {len(notes) - shown} more (vrag-desktop corpus list --json lists them all)")


def _check(lib: Any, args: argparse.Namespace) -> int:
    """``corpus check NAME [--repair]``: the report (exit 1 when damaged and not repaired)."""
    from vrag_desktop.core.corpus.integrity import check_corpus
    from vrag_desktop.core.corpus.job import IndexRequest

    lib.corpus_dir(args.name)  # a bad name is refused before anything is read
    if not lib.exists(args.name):
        raise CLIError(f"no corpus named '{args.name}' (corpora: {', '.join(lib.names()) or 'none yet'})")
    report = check_corpus(lib, args.name)
    for line in report.lines():
        print(line)
    if report.ok:
        return EXIT_OK
    if not report.repairable:
        return EXIT_ERROR
    if not args.repair:
        print(f"Repair it with: vrag-desktop corpus check '{args.name}' --repair")
        return EXIT_ERROR
    code = run_index(args, IndexRequest(args.name, repair=True), None, args.quiet)
    after = check_corpus(lib, args.name)
    print("After repair: " + ("no damage found." if after.ok else "still damaged:"))
    if not after.ok:
        for line in after.lines()[1:]:
            print(line)
        return EXIT_ERROR
    return code


def _prepare_views(paths: list[str]) -> None:
    """Make the pages' views the VRAG agent shows the model (the original's 200-dpi pages cost ~30 ms
    each to decode and resize at a search step); Ctrl-C skips the rest, which are made when shown."""
    from tqdm import tqdm

    from vrag_desktop.core.agents import page_views
    from vrag_desktop.core.progress import CancelToken

    cancel = CancelToken()
    previous = signal.signal(signal.SIGINT, lambda *_: cancel.cancel())
    bar = tqdm(total=len(paths), unit="page", desc="page views", file=sys.stderr, dynamic_ncols=True)
    try:
        for p in page_views.prepare(paths, page_views.ViewSpec(), cancel):
            bar.total = p.total
            bar.update(p.done - bar.n)
    finally:
        bar.close()
        signal.signal(signal.SIGINT, previous)
    if cancel.cancelled:
        err("Page views: the rest are made when each page is first shown.")


def _export_original(lib: Any, args: argparse.Namespace) -> int:
    from vrag_desktop.core.corpus.original_layout import export_original

    corpus = lib.open(args.name, read_only=True)
    try:
        report = export_original(
            corpus, args.out, model_name=args.model_name, path_base=args.paths_relative_to
        )
    finally:
        corpus.close()
    print(
        f"Exported {report.vectors} vectors of corpus '{args.name}' to {report.out_dir} as "
        f"{report.name_file}_* ({report.files_copied} file(s) copied). Start the original search "
        f"server with model name {report.model_name!r} and this folder as its index."
    )
    for name, why in report.skipped:
        err(f"  left out {name}: {why}")
    return EXIT_OK
