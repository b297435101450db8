"""``vrag-desktop`` command line: index, search, serve-search, corpus management.

Heavy libraries are imported inside the commands that need them, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from vrag_desktop import __version__

EXIT_OK, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 130


class CLIError(Exception):
    """An error to print as one line and exit 1 (no traceback for the user)."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vrag-desktop",
        description="Multimodal retrieval-augmented reasoning over your own documents, images and videos. "
        "Without a command, opens the desktop app.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        help="where corpora and indexes live (default: $VRAG_DESKTOP_DATA_DIR "
        "or the per-user data directory)",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

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
    ix.add_argument("--no-ocr", action="store_true", help="do not OCR pages and images without a text layer")
    ix.add_argument("--quiet", action="store_true", help="no progress bar")

    se = sub.add_parser("search", help="search indexed corpora")
    se.add_argument("query")
    se.add_argument("-k", type=int, default=5, help="number of hits (default: %(default)s)")
    se.add_argument("--corpus", action="append", help="corpus to search (repeatable; default: all)")
    se.add_argument("--json", action="store_true", help="print hits as JSON")
    se.add_argument("--hybrid", action="store_true", help="fuse dense and BM25 (keyword) results")
    se.add_argument("--device", default=None)

    sv = sub.add_parser(
        "serve-search", help="HTTP search API compatible with the original VRAG search engine"
    )
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8001)
    sv.add_argument("--corpus", action="append", help="corpus to serve (repeatable; default: all)")
    sv.add_argument("--hybrid", action="store_true")
    sv.add_argument("--device", default=None)

    co = sub.add_parser("corpus", help="list, remove, rescan corpora; import an original VRAG index")
    cs = co.add_subparsers(dest="corpus_command", metavar="ACTION", required=True)
    cl = cs.add_parser("list", help="corpora with their counts")
    cl.add_argument("--json", action="store_true")
    cr = cs.add_parser("remove", help="delete a corpus (its index and derived images; never your files)")
    cr.add_argument("name")
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

    from vrag_desktop.cli import ask as cli_ask, runtime as cli_runtime

    cli_ask.add_parsers(sub)
    cli_runtime.add_parsers(sub)
    sub.add_parser("gui", help="open the desktop app (the default when no command is given)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in (None, "gui"):
        from vrag_desktop.qt.app import main as gui_main

        return gui_main(data_dir=args.data_dir)
    _quiet_libraries()
    try:
        from vrag_desktop.cli import ask as cli_ask, runtime as cli_runtime

        handler = {
            "index": cmd_index,
            "search": cmd_search,
            "serve-search": cmd_serve,
            "corpus": cmd_corpus,
            "ask": cli_ask.cmd_ask,
            "runs": cli_ask.cmd_runs,
            "runtime": cli_runtime.cmd_runtime,
        }[args.command]
        return handler(args)
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except CLIError as exc:
        print(f"vrag-desktop: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:
        from vrag_desktop.core.corpus.corpus import CorpusError
        from vrag_desktop.core.embedders.base import EmbedderError
        from vrag_desktop.core.endpoints.profiles import ProfileError
        from vrag_desktop.core.search.engine import SearchError

        if isinstance(exc, CorpusError | EmbedderError | SearchError | ProfileError):
            print(f"vrag-desktop: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        raise


def _quiet_libraries() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import logging

    logging.getLogger("transformers").setLevel(logging.ERROR)


def _library(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.library import Library

    return Library(args.data_dir)


# ---------------------------------------------------------------- index
def cmd_index(args: argparse.Namespace) -> int:
    lib = _library(args)
    is_new = not lib.exists(args.corpus)
    corpus = lib.open(args.corpus, create=True)
    try:
        corpus.lock()
        if args.paths:
            try:
                corpus.add_paths(args.paths)
            except Exception as exc:
                if is_new and not corpus.manifest.roots():
                    corpus.delete_files()  # do not leave an empty corpus behind a typo
                raise CLIError(str(exc)) from exc
        elif not corpus.manifest.roots():
            raise CLIError(
                f"corpus '{corpus.name}' has no files yet: vrag-desktop index PATH --corpus {corpus.name}"
            )
        return _index(
            corpus,
            args.embedder,
            args.device,
            args.quiet,
            clip_seconds=args.clip_seconds,
            ocr=False if args.no_ocr else None,
        )
    finally:
        corpus.close()


def _index(corpus, embedder_spec, device, quiet, *, clip_seconds=None, ocr=None, retry_failed=False) -> int:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.embedders import create_embedder
    from vrag_desktop.core.progress import CancelToken

    if clip_seconds is not None:
        if clip_seconds <= 0:
            raise CLIError("--clip-seconds must be positive")
        corpus.clip_seconds = clip_seconds
    # The corpus's own embedder unless one is named; the default one for a new corpus.
    spec = embedder_spec or corpus.manifest.get_meta("embedder_model")
    if embedder_spec and corpus.embedder_id:
        # Refuse a mismatch before loading a multi-GB model.
        from vrag_desktop.core.embedders.minilm import MINILM_ID

        if embedder_spec.lower().startswith("minilm") and corpus.embedder_id != MINILM_ID:
            raise CLIError(
                f"corpus '{corpus.name}' is indexed with '{corpus.embedder_id}', not '{embedder_spec}'"
            )
    _err(f"Scanning {len(corpus.manifest.roots())} location(s) for corpus '{corpus.name}'…", quiet)
    scan = _drain(corpus.scan(retry_failed=retry_failed))
    _err(
        f"  {scan.added} new, {scan.changed} changed, {scan.removed} removed, {scan.unchanged} unchanged"
        + (f", {scan.duplicates} duplicate" if scan.duplicates else "")
        + (f", {scan.unsupported} unsupported" if scan.unsupported else "")
        + (f", {scan.failed} unreadable" if scan.failed else ""),
        quiet,
    )
    for root in scan.missing_roots:
        _err(f"  warning: {root} is missing (unplugged or moved?); its files stay in the index", False)
    cancel = CancelToken()
    report = None
    if corpus.pending_work() > 0:
        _err("Loading embedder…", quiet)
        embedder = create_embedder(spec, device=device)
        _err(f"  {embedder.info.id} (dim {embedder.info.dim}) on {embedder.device}", quiet)
        previous = signal.signal(signal.SIGINT, lambda *_: cancel.cancel())
        try:
            report = _run_build(corpus, embedder, cancel, quiet, ocr)
        finally:
            signal.signal(signal.SIGINT, previous)
    _print_summary(corpus, report)
    if report is not None and report.cancelled:
        _err("Interrupted: everything embedded so far is saved. Run the same command again to resume.", False)
        return EXIT_INTERRUPTED
    return EXIT_OK


def _run_build(corpus, embedder, cancel, quiet, ocr):  # type: ignore[no-untyped-def]
    # Checkpoint cadence (tuning knobs; defaults suit interactive use).
    kw = {}
    if os.environ.get("VRAG_DESKTOP_CHECKPOINT_SECONDS"):
        kw["checkpoint_seconds"] = float(os.environ["VRAG_DESKTOP_CHECKPOINT_SECONDS"])
    if os.environ.get("VRAG_DESKTOP_CHECKPOINT_ITEMS"):
        kw["checkpoint_items"] = int(os.environ["VRAG_DESKTOP_CHECKPOINT_ITEMS"])
    gen = corpus.build(embedder, cancel, ocr=ocr, **kw)
    bar = None
    if not quiet:
        from tqdm import tqdm

        bar = tqdm(
            total=corpus.pending_work(),
            unit="item",
            dynamic_ncols=True,
            file=sys.stderr,
            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}] {postfix}",
        )
    try:
        while True:
            try:
                p = next(gen)
            except StopIteration as stop:
                return stop.value
            if bar is not None:
                bar.total = max(bar.total or 0, p.total)
                bar.update(p.done - bar.n)
                bar.set_postfix_str(
                    p.message[-40:] + (f" ({p.failed} failed)" if p.failed else ""), refresh=False
                )
    finally:
        gen.close()
        if bar is not None:
            bar.close()


def _print_summary(corpus, report) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.scan import display_path

    st = corpus.stats()
    line = (
        f"Corpus '{corpus.name}': {st['indexed_files']} file(s) indexed, {st['items']} item(s), "
        f"{st['vectors']} vector(s)"
    )
    if report is not None and report.seconds > 0:
        line += f"; this run: {report.items} item(s) in {report.seconds:.1f} s ({report.items / report.seconds:.1f}/s)"
    print(line, file=sys.stderr)
    failures = corpus.manifest.failures()
    if failures:
        print(f"{len(failures)} problem(s):", file=sys.stderr)
        for path, what, err in failures:
            where = display_path(path) + ("" if what == "file" else f" [{what}]")
            print(f"  - {where}: {err}", file=sys.stderr)


def _drain(gen):  # type: ignore[no-untyped-def]
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


def _err(msg: str, quiet: bool) -> None:
    if not quiet:
        print(msg, file=sys.stderr)


# ---------------------------------------------------------------- search
def cmd_search(args: argparse.Namespace) -> int:
    from vrag_desktop.core.search.engine import SearchEngine

    if args.k < 1:
        raise CLIError("-k must be at least 1")
    if not args.query.strip():
        raise CLIError("the query is empty")
    engine = SearchEngine(_library(args), args.corpus, hybrid=args.hybrid, device=args.device)
    try:
        hits = engine.search(args.query, args.k)
    finally:
        engine.close()
    if args.json:
        # ASCII escapes keep file names that are not valid UTF-8 printable and round-trippable.
        print(json.dumps([_hit_json(h) for h in hits], ensure_ascii=True, indent=2))
        return EXIT_OK
    if not hits:
        print("No results.")
    from vrag_desktop.core.corpus.scan import display_path

    for rank, h in enumerate(hits, 1):
        where = display_path(h.source)
        if h.page is not None:
            where += f"  page {h.page}"
        elif h.clip is not None:
            where += f"  clip {h.clip} ({_ts(h.t_start)}–{_ts(h.t_end)})"
        print(f"{rank:>2}. {h.score:.3f}  {where}")
        snippet = " ".join(h.text.split())[:160]
        if snippet:
            print(f"     {snippet}")
        if h.image:
            print(f"     image: {h.image}")
    return EXIT_OK


def _hit_json(h) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    d = h.to_dict()
    d["image"] = h.image
    d["text"] = h.text[:1000]
    return d


def _ts(t: float | None) -> str:
    if t is None:
        return "?"
    m, s = divmod(round(t), 60)
    return f"{m}:{s:02d}"


# ---------------------------------------------------------------- serve
def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from vrag_desktop.core.search.engine import SearchEngine
    from vrag_desktop.core.search.server import create_app

    if not 0 < args.port < 65536:
        raise CLIError("--port must be between 1 and 65535")
    engine = SearchEngine(_library(args), args.corpus, hybrid=args.hybrid, device=args.device)
    app = create_app(engine)
    names = ", ".join(c.name for c in engine.corpora)
    print(
        f"Serving {engine.total_vectors()} vectors from {names} on http://{args.host}:{args.port} "
        "(POST /search, GET /search, GET /health)",
        file=sys.stderr,
    )
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    except OSError as exc:
        raise CLIError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from exc
    finally:
        engine.close()
    return EXIT_OK


# ---------------------------------------------------------------- corpus
def cmd_corpus(args: argparse.Namespace) -> int:
    lib = _library(args)
    if args.corpus_command == "list":
        rows = []
        for name in lib.names():
            c = lib.open(name)
            try:
                rows.append(c.stats())
            finally:
                c.close()
        if args.json:
            print(json.dumps(rows, indent=2, ensure_ascii=True))
        elif not rows:
            print("No corpora yet. Create one with: vrag-desktop index PATH --corpus NAME")
        else:
            print(f"{'corpus':<20} {'files':>6} {'items':>7} {'vectors':>8} {'failed':>6}  embedder")
            for r in rows:
                print(
                    f"{r['name']:<20} {r['source_files']:>6} {r['items']:>7} {r['vectors']:>8} {r['failures']:>6}  "
                    f"{r['embedder'] or '-'}"
                )
        return EXIT_OK
    if args.corpus_command == "remove":
        lib.remove(args.name)
        print(f"Removed corpus '{args.name}' (your files were not touched).")
        return EXIT_OK
    if args.corpus_command == "rescan":
        corpus = lib.open(args.name)
        try:
            corpus.lock()
            return _index(corpus, None, args.device, args.quiet, retry_failed=args.retry_failed)
        finally:
            corpus.close()
    if args.corpus_command == "import-legacy":
        from vrag_desktop.core.corpus.legacy import import_legacy_index

        corpus = import_legacy_index(lib, args.folder, args.name, embedder=args.embedder)
        try:
            st = corpus.stats()
            print(
                f"Imported {st['vectors']} vectors into corpus '{corpus.name}' (embedder {st['embedder']})."
            )
        finally:
            corpus.close()
        return EXIT_OK
    raise CLIError(f"unknown corpus action {args.corpus_command}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
