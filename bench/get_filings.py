"""Build the filings benchmark: 20 quarterly reports (SEC form 10-Q) of five companies — Apple,
Amazon, Intel, Microsoft, NVIDIA, four quarters each, 1,037 pages with text layers — and the
questions their authors wrote about them, from Docugami's public KG-RAG datasets
(github.com/docugami/KG-RAG-datasets, ``sec-10-q/data/v1``, MIT licence). By default the two latest
quarters of three companies (Apple, Amazon, NVIDIA) are kept — documents subsampled, every question
of a kept document kept: 6 filings, 262 pages, 53 questions, which a loaded 2-core machine indexes
in minutes (``--quarters all --companies all``: the 20 filings, 1,037 pages).

Why this set: every company's cash-flow statement reads like every other's and like its own of the
quarter before, so a question ("Intel's effective tax rate in the most recent 10-Q") is answered by
picking the right document first. The questions and their source documents were written by people
(the repository's README: "created (manually)", source docs "manually entered"); the gold evidence is
the document (any page of it counts), never a page. Only questions naming one document are kept
(130 of 195; the others name every quarter of a company, which the dataset form cannot say).

The PDFs are written under neutral names (``filing-<hash>.pdf``): the repository named them after
the answer ("2023 Q3 AAPL.pdf"), which no person's download folder does, and a name that gives the
answer away would measure the name, not the search. ``names.json`` maps them back.

Get the data once (the library's ``fetch`` tool brings the repository; a ``git clone`` does too)::

    .venv/bin/python bench/get_filings.py --source /work/.mirror/docugami+KG-RAG-datasets/repo

``--source`` is a checkout or a bare git directory. Writes bench/data/filings/{pdfs/, questions.json,
names.json}; nothing of it is committed.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vrag_desktop.core.datasets import DatasetItem, write_unified  # noqa: E402

BASE = "sec-10-q/data/v1"
LICENCE = "MIT (docugami/KG-RAG-datasets LICENSE)"


def _git(source: Path, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", str(source), *args], check=True, capture_output=True).stdout


def _read(source: Path, rel: str) -> bytes:
    """A file of the repository: from its work tree, or from HEAD of a bare git directory."""
    if (source / rel).exists():
        return (source / rel).read_bytes()
    return _git(source, "show", f"HEAD:{rel}")


def _doc_names(source: Path) -> list[str]:
    if (source / BASE / "docs").is_dir():
        return sorted(p.name for p in (source / BASE / "docs").glob("*.pdf"))
    out = _git(source, "ls-tree", "--name-only", "HEAD", f"{BASE}/docs/").decode()
    return sorted(Path(line).name for line in out.splitlines() if line.endswith(".pdf"))


def prepare(source: Path, out: Path, quarters: list[str] | None, companies: list[str] | None) -> None:
    pdf_dir = out / "pdfs"
    pdf_dir.mkdir(parents=True, exist_ok=True)
    names: dict[str, str] = {}  # original stem ("2023 Q3 AAPL") -> neutral file name
    for name in _doc_names(source):
        quarter, company = name.removesuffix(".pdf").rsplit(" ", 1)
        if (quarters and quarter not in quarters) or (companies and company not in companies):
            continue
        data = _read(source, f"{BASE}/docs/{name}")
        neutral = f"filing-{hashlib.sha256(data).hexdigest()[:10]}.pdf"
        if not (pdf_dir / neutral).exists():  # kept as it is: an index of the folder stays valid
            (pdf_dir / neutral).write_bytes(data)
        names[name.removesuffix(".pdf")] = neutral
    for pdf in pdf_dir.glob("*.pdf"):  # a smaller subset than the last run: the rest leaves
        if pdf.name not in names.values():
            pdf.unlink()
    rows = list(csv.DictReader(io.StringIO(_read(source, f"{BASE}/qna_data.csv").decode("utf-8-sig"))))
    items = []
    skipped = 0
    for row in rows:
        doc = row["Source Docs"].strip().strip("*").strip()
        if doc not in names:  # "*AAPL*": every quarter of a company, not one document
            skipped += 1
            continue
        question = row["Question"].strip()
        uid = hashlib.sha1(f"{doc}/{question}".encode()).hexdigest()[:12]
        items.append(
            DatasetItem(
                uid=uid,
                query=question,
                reference_answer=row.get("Answer", "").strip(),
                file_name=names[doc],
                reference_page=(),  # the evidence is the document
                source_type=row.get("Source Chunk Type", "").strip().lower(),
                query_type=row.get("Question Type", "").strip(),
                doc_type="10-Q",
                extra_meta={"source_doc": doc},
            )
        )
    items.sort(key=lambda i: i.uid)
    write_unified(out / "questions.json", items)
    (out / "names.json").write_text(json.dumps({"licence": LICENCE, "names": names}, indent=2))
    print(
        f"{len(names)} filings, {len(items)} questions "
        f"({skipped} naming several documents or another quarter left out) in {out}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, required=True, help="KG-RAG-datasets checkout or bare git dir")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "data" / "filings")
    ap.add_argument(
        "--quarters",
        default="2023 Q2,2023 Q3",
        help="the quarters kept, comma-separated (default: the latest two); 'all' keeps the four",
    )
    ap.add_argument(
        "--companies",
        default="AAPL,AMZN,NVDA",
        help="the companies kept, by ticker (default: three of the five; 'all' keeps AAPL, AMZN, INTC, MSFT, NVDA)",
    )
    args = ap.parse_args()
    prepare(
        args.source,
        args.out,
        None if args.quarters == "all" else args.quarters.split(","),
        None if args.companies == "all" else args.companies.split(","),
    )


if __name__ == "__main__":
    main()
