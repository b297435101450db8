"""``vrag-desktop eval``: measure retrieval (and answers) on a labelled dataset.

An evaluation lives in a folder (default ``<data>/evaluations/<kind>-<dataset>-<corpora>``): run
the same command again after Ctrl-C, a crash or ``kill -9`` and it resumes, never redoing an item.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

from vrag_desktop.cli.common import EXIT_INTERRUPTED, EXIT_OK, CLIError, err, library


def add_parsers(sub: Any) -> None:
    ev = sub.add_parser("eval", help="evaluate retrieval or answers on a labelled dataset")
    es = ev.add_subparsers(dest="eval_command", metavar="KIND", required=True)
    r = es.add_parser(
        "retrieval", help="search each question; recall@k, hit@k, MRR and NDCG per item and overall"
    )
    r.add_argument(
        "--dataset",
        required=True,
        metavar="FILE",
        help="unified dataset JSON (the original's), JSON lines, or the sample corpus's questions.json",
    )
    r.add_argument("--corpus", action="append", help="corpus to search (repeatable; default: all)")
    r.add_argument(
        "-k", type=int, action="append", dest="ks", metavar="K", help="cut-off (repeatable; default 1 3 5 10)"
    )
    r.add_argument("--hybrid", action="store_true", help="fuse dense and BM25 (keyword) results")
    r.add_argument("--device", default=None)
    r.add_argument("--out", metavar="DIR", help="evaluation folder (default: under <data>/evaluations)")
    r.add_argument("--restart", action="store_true", help="delete the folder's earlier results first")
    r.add_argument("--json", action="store_true", help="print the summary as JSON")
    r.add_argument("-q", "--quiet", action="store_true")


def cmd_eval(args: argparse.Namespace) -> int:
    if args.eval_command == "retrieval":
        return _retrieval(args)
    raise CLIError(f"unknown evaluation {args.eval_command!r}")  # pragma: no cover - argparse refuses


def _dataset(path: str) -> Any:
    from vrag_desktop.core.datasets import DatasetError
    from vrag_desktop.core.datasets import load_dataset as read_dataset

    try:
        return read_dataset(path)
    except (DatasetError, OSError) as exc:
        raise CLIError(str(exc)) from exc


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60] or "x"


def _retrieval(args: argparse.Namespace) -> int:
    from vrag_desktop.core.eval.matching import corpus_files, match_dataset
    from vrag_desktop.core.eval.retrieval import DEFAULT_KS, evaluate_retrieval
    from vrag_desktop.core.eval.store import EvalError, EvalStore
    from vrag_desktop.core.paths import DataLayout
    from vrag_desktop.core.progress import CancelToken
    from vrag_desktop.core.search.engine import SearchEngine

    ks = sorted(set(args.ks or DEFAULT_KS))
    if ks[0] < 1:
        raise CLIError("-k must be at least 1")
    dataset = _dataset(args.dataset)
    lib = library(args)
    engine = SearchEngine(lib, args.corpus, hybrid=args.hybrid, device=args.device)
    try:
        match = match_dataset(dataset.items, corpus_files(engine.corpora))
        names = sorted(c.name for c in engine.corpora)
        for line in match.lines():
            err(line, args.quiet)
        if not match.matched:
            raise CLIError("no item of the dataset can be scored against these corpora (see above)")
        digest = hashlib.sha256(Path(args.dataset).read_bytes()).hexdigest()[:16]
        fingerprint = {
            "kind": "retrieval",
            "dataset_sha256": digest,
            "corpora": names,
            "embedder": sorted({c.embedder_id or "" for c in engine.corpora}),
            "hybrid": bool(args.hybrid),
            "ks": ks,
        }
        folder = (
            Path(args.out)
            if args.out
            else DataLayout.resolve(args.data_dir).root
            / "evaluations"
            / (f"retrieval-{_slug(Path(args.dataset).stem)}-{_slug('+'.join(names))}")
        )
        try:
            store = EvalStore.open(
                folder,
                {"fingerprint": fingerprint, "dataset": str(Path(args.dataset).resolve())},
                restart=args.restart,
            )
        except EvalError as exc:
            raise CLIError(str(exc)) from exc
        cancel = CancelToken()
        previous = signal.signal(signal.SIGINT, lambda *_: cancel.cancel())
        try:
            summary = _drive(
                evaluate_retrieval(match, engine.search_batch, store, ks=ks, cancel=cancel), args.quiet
            )
        finally:
            signal.signal(signal.SIGINT, previous)
    finally:
        engine.close()
    _print_retrieval(summary, store.report_path, args.json)
    if not summary["complete"]:
        err("Interrupted: every finished item is saved. Run the same command again to resume.")
        return EXIT_INTERRUPTED
    return EXIT_OK


def _drive(gen: Any, quiet: bool) -> Any:
    """Run a job generator to its result, with a progress bar (rate and ETA) on stderr."""
    bar: Any = None
    try:
        while True:
            try:
                p = next(gen)
            except StopIteration as stop:
                return stop.value
            if quiet:
                continue
            if bar is None:
                from tqdm import tqdm

                bar = tqdm(total=p.total, initial=p.done, unit="item", dynamic_ncols=True, file=sys.stderr)
            bar.update(p.done - bar.n)
    finally:
        if bar is not None:
            bar.close()
        gen.close()


def _print_retrieval(summary: dict[str, Any], report: Path, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    ov = summary["overall"]
    print(
        f"{summary['items']} item(s) scored"
        + (f", {len(summary['not_scored'])} not scored" if summary["not_scored"] else "")
    )
    for k in summary["ks"]:
        print(
            f"  @{k:<3} recall {ov[f'recall@{k}']:.3f}   hit {ov[f'hit@{k}']:.3f}   ndcg {ov[f'ndcg@{k}']:.3f}"
        )
    print(f"  MRR {ov['mrr']:.3f}   NDCG (original reward) {ov['ndcg_original']:.3f}")
    print(f"Report: {report}")
