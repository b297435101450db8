"""``vrag-desktop search`` and ``vrag-desktop serve-search``: the search engine from a terminal or over HTTP."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from vrag_desktop.cli.common import EXIT_OK, CLIError, library
from vrag_desktop.core.search.fusion import DEFAULT_HYBRID
from vrag_desktop.core.search.hit import Hit


def add_parsers(sub: Any) -> None:
    se = sub.add_parser("search", help="search indexed corpora")
    se.add_argument("query")
    se.add_argument("-k", type=int, default=5, help="number of hits (default: %(default)s)")
    se.add_argument("--corpus", action="append", help="corpus to search (repeatable; default: all)")
    se.add_argument("--json", action="store_true", help="print hits as JSON")
    add_mode_options(se)
    se.add_argument("--device", default=None)

    sv = sub.add_parser(
        "serve-search", help="HTTP search API compatible with the original VRAG search engine"
    )
    sv.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: %(default)s, this machine only; another address needs a token)",
    )
    sv.add_argument("--port", type=int, default=8001)
    sv.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests addressed to this host name (repeatable; default: loopback names, "
        "the --host address and, on a non-loopback bind, IP addresses)",
    )
    sv.add_argument(
        "--token",
        default=None,
        help="require 'Authorization: Bearer TOKEN' on every request; prefer the environment variable "
        "VRAG_SEARCH_TOKEN, which other users cannot see in the process list",
    )
    sv.add_argument("--corpus", action="append", help="corpus to serve (repeatable; default: all)")
    add_mode_options(sv)
    sv.add_argument("--device", default=None)


def add_mode_options(p: argparse.ArgumentParser) -> None:
    """Hybrid (embeddings fused with BM25 keywords: the engine's default, the better one on real
    documents, docs/benchmarks.md §7) or ``--dense`` (embeddings only); and the reranker, which
    by default is the data directory's setting (``vrag-desktop models settings --reranker``)."""
    p.add_argument(
        "--dense",
        dest="hybrid",
        action="store_false",
        help="embeddings only (default: fused with BM25 keyword search)",
    )
    p.add_argument("--hybrid", dest="hybrid", action="store_true", help=argparse.SUPPRESS)  # the default
    p.set_defaults(hybrid=DEFAULT_HYBRID)
    p.add_argument(
        "--rerank",
        metavar="MODEL",
        default=None,
        help="reorder the top candidates with this cross-encoder (a downloaded model id or a model "
        "folder; default: the reranker setting, off unless set)",
    )
    p.add_argument(
        "--no-rerank", dest="rerank", action="store_const", const="", help="no reranker, whatever is set"
    )


# ---------------------------------------------------------------- search
def cmd_search(args: argparse.Namespace) -> int:
    from vrag_desktop.core.search.engine import SearchEngine

    if args.k < 1:
        raise CLIError("-k must be at least 1")
    if not args.query.strip():
        raise CLIError("the query is empty")
    engine = SearchEngine(
        library(args), args.corpus, hybrid=args.hybrid, device=args.device, rerank=args.rerank
    )
    try:
        hits = engine.search(args.query, args.k)
    finally:
        engine.close()
    several = len(engine.corpora) > 1
    for problem in engine.problems:  # a damaged corpus is searched without what it lost, and said so
        print(f"warning: {problem}", file=sys.stderr)
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
        if several:
            where += f"  [{h.corpus}]"
        # The score that ranks (the fused vote in hybrid mode); the cosine only beside it, labelled.
        cosine = f"  ({h.cosine_text})" if h.cosine_text else ""
        print(f"{rank:>2}. {h.score_text}  {where}{cosine}")
        if h.also_in:
            print(f"     {h.also_in_text(limit=len(h.also_in))}")
        snippet = " ".join(h.text.split())[:160]
        if snippet:
            print(f"     {snippet}")
        if h.image:
            print(f"     image: {h.image}")
    return EXIT_OK


def _hit_json(h: Hit) -> dict[str, Any]:
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
    import os

    import uvicorn

    from vrag_desktop.core.search.engine import SearchEngine
    from vrag_desktop.core.search.server import TOKEN_ENV, create_app, is_loopback, safe_text, uvicorn_options

    if not 0 < args.port < 65536:
        raise CLIError("--port must be between 1 and 65535")
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV)
    if token is not None and not token.strip():
        raise CLIError(f"the token is empty: give a non-empty --token or {TOKEN_ENV}, or none")
    if not is_loopback(args.host) and not token:
        # Checked before the corpora load, so the warning is the first thing a person reads.
        print(
            f"Warning: serving on {args.host} without a token: anyone who can reach this port can read "
            "the search results (with text), page images and indexed files of the served corpora. "
            f"Set {TOKEN_ENV} (or --token) to require 'Authorization: Bearer <token>'.",
            file=sys.stderr,
        )
    engine = SearchEngine(
        library(args), args.corpus, hybrid=args.hybrid, device=args.device, rerank=args.rerank
    )
    app = create_app(engine, bind_host=args.host, allowed_hosts=args.allow_host, token=token)
    names = ", ".join(safe_text(c.name) for c in engine.corpora)
    print(
        f"Serving {engine.total_vectors()} vectors from {names} on http://{args.host}:{args.port} "
        "(POST /search, GET /search, GET /health)"
        + (f", reranked by {engine.reranker}" if engine.reranker else "")
        + (" — token required" if token else ""),
        file=sys.stderr,
    )
    for problem in engine.problems:  # a corpus left out or searched without a damaged file
        print(f"warning: {problem}", file=sys.stderr)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", **uvicorn_options())
    except OSError as exc:
        raise CLIError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from exc
    finally:
        engine.close()
    return EXIT_OK
