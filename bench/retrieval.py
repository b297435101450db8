"""Retrieval quality: dense (MiniLM) vs. hybrid (dense + BM25, reciprocal-rank fusion) on the labelled
questions of a corpus folder (default: the bundled sample corpus; any dataset form that
``load_dataset`` reads). Decides which mode is the default. ``--rerank MODEL`` (a downloaded
cross-encoder id or a model folder) adds hybrid reranked by it.

    .venv/bin/python bench/retrieval.py [--corpus-dir DIR] [--questions FILE] [--data-dir DIR] [--rerank MODEL]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vrag_desktop.core.corpus.library import Library  # noqa: E402
from vrag_desktop.core.datasets import load_dataset  # noqa: E402
from vrag_desktop.core.embedders.minilm import MiniLMEmbedder  # noqa: E402
from vrag_desktop.core.eval.matching import corpus_files, match_dataset  # noqa: E402
from vrag_desktop.core.eval.retrieval import score_dataset  # noqa: E402
from vrag_desktop.core.search import SearchEngine  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus-dir", type=Path, default=ROOT / "resources" / "sample_corpus")
    ap.add_argument("--questions", type=Path, default=None)
    ap.add_argument("--data-dir", type=Path, default=None, help="reuse an index built here (else a temp dir)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "retrieval.json")
    ap.add_argument("--rerank", metavar="MODEL", help="also score hybrid reranked by this cross-encoder")
    args = ap.parse_args()
    questions = load_dataset(args.questions or args.corpus_dir / "questions.json")
    data = args.data_dir or Path(tempfile.mkdtemp(prefix="vrag-retrieval-"))
    lib = Library(data)
    embedder = MiniLMEmbedder()
    corpus = lib.open("eval", create=True)
    corpus.add_paths([args.corpus_dir])
    for gen in (corpus.scan(), corpus.build(embedder)):
        for _ in gen:
            pass
    corpus.close()
    rows = {}
    modes = [("dense", False, ""), ("hybrid", True, "")] + (
        [("hybrid+rerank", True, args.rerank)] if args.rerank else []
    )
    for mode, hybrid, rerank in modes:
        engine = SearchEngine(lib, ["eval"], embedder, hybrid=hybrid, rerank=rerank)
        if rerank and engine.reranker is None:
            raise SystemExit("; ".join(engine.problems))
        match = match_dataset(questions, corpus_files(engine.corpora))
        t0 = time.perf_counter()
        summary, _ = score_dataset(match, engine.search_batch, ks=(1, 3, 5))
        ms = 1000 * (time.perf_counter() - t0) / max(summary["items"], 1)
        rows[mode] = {**summary["overall"], "ms_per_query": ms, "not_scored": summary["not_scored"]}
        engine.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    print(f"{len(questions)} questions, corpus {args.corpus_dir}")
    print("| mode | recall@1 | recall@3 | recall@5 | MRR | ms/query |")
    print("|---|---|---|---|---|---|")
    for mode, r in rows.items():
        print(
            f"| {mode} | {r['recall@1']:.3f} | {r['recall@3']:.3f} | {r['recall@5']:.3f} | {r['mrr']:.3f} | "
            f"{r['ms_per_query']:.1f} |"
        )


if __name__ == "__main__":
    main()
