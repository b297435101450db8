"""Retrieval on real documents: page images of European banks' annual and results reports (charts,
tables, diagrams) with human-written questions labelled with their evidence page, from the public
VisR-RAG-Fin benchmark (github.com/OmarElbachyr/VisR-RAG-Fin, data/pages + the category-A
annotations). The repository holds only page images, so every page goes through OCR: this measures
retrieval on scans, the case a text-layer benchmark cannot see.

Get the data once (the library's ``fetch`` tool, or ``git clone`` of that repository), then::

    nice .venv/bin/python bench/real_docs.py --source /work/.mirror/OmarElbachyr+VisR-RAG-Fin/repo

``--source`` is a checkout or a bare git directory. The first run writes bench/data/real_docs/: one
PDF per report (its pages that the repository has, in page order; ``reference_page`` is the page's
position in that PDF), ``questions.json`` in the unified dataset form, and the index (``index/``,
built with the product's own scan/build, reused by later runs). Scores come from core/eval.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vrag_desktop.core.corpus.library import Library  # noqa: E402
from vrag_desktop.core.datasets import DatasetItem, load_dataset, write_unified  # noqa: E402
from vrag_desktop.core.embedders.minilm import MiniLMEmbedder  # noqa: E402
from vrag_desktop.core.eval.matching import corpus_files, match_dataset  # noqa: E402
from vrag_desktop.core.eval.retrieval import score_dataset  # noqa: E402
from vrag_desktop.core.search import SearchEngine  # noqa: E402

ANNOTATIONS = (
    "data/annotations/final_annotations/filtered_annotations/by_category/"
    "second_pass_classified_qa_category_A.json"
)
PAGES = "data/pages"
KS = (1, 3, 5, 10)


def _read(source: Path, rel: str) -> bytes:
    """A file of the source repository: from its work tree, or from HEAD of a bare git directory."""
    if (source / rel).exists():
        return (source / rel).read_bytes()
    return subprocess.run(
        ["git", "--git-dir", str(source), "show", f"HEAD:{rel}"], check=True, capture_output=True
    ).stdout


def _page_names(source: Path) -> list[str]:
    if (source / PAGES).is_dir():
        return sorted(p.name for p in (source / PAGES).iterdir())
    out = subprocess.run(
        ["git", "--git-dir", str(source), "ls-tree", "--name-only", "HEAD", f"{PAGES}/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return sorted(Path(line).name for line in out.split())


def prepare(source: Path, out: Path, max_pages: int, max_questions: int) -> None:
    """Pick whole reports (by hashed name) until ``max_pages`` pages, write their PDFs and questions."""
    import pymupdf

    by_doc: dict[str, list[int]] = defaultdict(list)
    for name in _page_names(source):
        stem, page = name.removesuffix(".png").rsplit("_", 1)
        by_doc[stem].append(int(page))
    chosen: dict[str, list[int]] = {}
    for doc in sorted(by_doc):
        if sum(len(p) for p in chosen.values()) >= max_pages:
            break
        chosen[doc] = sorted(by_doc[doc])
    pdf_dir = out / "pdfs"
    pdf_dir.mkdir(parents=True, exist_ok=True)
    for doc, pages in chosen.items():
        pdf = pymupdf.open()
        for page in pages:
            png = _read(source, f"{PAGES}/{doc}_{page}.png")
            pix = pymupdf.Pixmap(png)
            # 150 dpi: the page's size in points as the scan's size implies
            w, h = pix.width * 72 / 150, pix.height * 72 / 150
            pdf.new_page(width=w, height=h).insert_image(pymupdf.Rect(0, 0, w, h), stream=png)
        pdf.save(pdf_dir / f"{doc}.pdf")
        pdf.close()
    items = []
    for entry in json.loads(_read(source, ANNOTATIONS)):
        doc = entry["hashed_filename"].removesuffix(".pdf")
        page = int(entry["page_number"])
        if doc not in chosen or page not in chosen[doc]:
            continue
        for qa in entry["qa_pairs"]:
            evidence = qa.get("evidence")
            kind = evidence if isinstance(evidence, str) else "mixed"
            uid = hashlib.sha1(f"{doc}/{page}/{qa['question']}".encode()).hexdigest()[:12]
            items.append(
                DatasetItem(
                    uid=uid,
                    query=qa["question"],
                    reference_answer=str(qa.get("answer", "")),
                    file_name=f"{doc}.pdf",
                    reference_page=(chosen[doc].index(page) + 1,),
                    source_type=kind,
                    query_type=kind,
                    doc_type=str(entry.get("company", "")),
                    extra_meta={
                        "original_filename": entry.get("original_filename", ""),
                        "original_page": page,
                    },
                )
            )
    items.sort(key=lambda i: i.uid)  # a fixed, content-based sample
    write_unified(out / "questions.json", items[:max_questions])
    n_pages = sum(len(p) for p in chosen.values())
    print(f"prepared {len(chosen)} reports, {n_pages} pages, {min(len(items), max_questions)} questions")


def index(out: Path, embedder: MiniLMEmbedder) -> Library:
    """Index the PDFs once (the product's scan + build); a later run finds nothing to do."""
    lib = Library(out / "index")
    corpus = lib.open("real", create=True)
    if not corpus.manifest.roots():
        corpus.add_paths([out / "pdfs"])
    t0 = time.perf_counter()
    for gen in (corpus.scan(), corpus.build(embedder)):
        for p in gen:
            if p.done and p.done % 20 == 0:
                print(f"  {p.phase} {p.done}/{p.total}", flush=True)
    corpus.close()
    print(f"index ready in {time.perf_counter() - t0:.0f} s")
    return lib


def _row(summary: dict[str, Any]) -> dict[str, Any]:
    return {**summary["overall"], "items": summary["items"], "by_type": summary["by_query_type"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, help="VisR-RAG-Fin checkout or git dir (first run only)")
    ap.add_argument("--data", type=Path, default=ROOT / "bench" / "data" / "real_docs")
    ap.add_argument("--max-pages", type=int, default=120)
    ap.add_argument("--max-questions", type=int, default=200)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "real_docs.json")
    args = ap.parse_args()
    if not (args.data / "questions.json").exists():
        if args.source is None:
            ap.error(f"no data in {args.data}: give --source (see the module docstring)")
        prepare(args.source, args.data, args.max_pages, args.max_questions)
    questions = load_dataset(args.data / "questions.json")
    embedder = MiniLMEmbedder()
    lib = index(args.data, embedder)
    rows: dict[str, Any] = {}
    # "default": the engine as the app builds it (no mode given), to show which mode that is.
    for mode, hybrid in (("dense", False), ("hybrid", True), ("default", None)):
        kwargs = {} if hybrid is None else {"hybrid": hybrid}
        engine = SearchEngine(lib, ["real"], embedder, **kwargs)
        match = match_dataset(questions, corpus_files(engine.corpora))
        if match.problems:
            print("\n".join(match.lines()[:10]))
        t0 = time.perf_counter()
        summary, _ = score_dataset(match, engine.search_batch, ks=KS)
        ms = 1000 * (time.perf_counter() - t0) / max(summary["items"], 1)
        label = f"default ({'hybrid' if engine.hybrid else 'dense'})" if hybrid is None else mode
        rows[label] = {**_row(summary), "ms_per_query": ms}
        engine.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    print(f"{len(questions)} questions, data {args.data}")
    print("| mode | evidence | items | recall@1 | recall@3 | recall@5 | recall@10 | MRR | ms/query |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode, r in rows.items():
        for kind, m in [("all", r), *sorted(r["by_type"].items())]:
            ms = f"{r['ms_per_query']:.1f}" if kind == "all" else ""
            print(
                f"| {mode} | {kind} | {m['items']} | {m['recall@1']:.3f} | {m['recall@3']:.3f} | "
                f"{m['recall@5']:.3f} | {m['recall@10']:.3f} | {m['mrr']:.3f} | {ms} |"
            )


if __name__ == "__main__":
    main()
