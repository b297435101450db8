#!/usr/bin/env bash
# Fetch a real, multi-hundred-page PDF corpus for bench/ingest.py, offline from Debian's archive.
#
# The PDFs are the manuals that Debian documentation packages ship (downloaded with
# `apt-get download`, unpacked with `dpkg-deb -x`; nothing is installed):
#
#   R-intro.pdf          r-doc-pdf      "An Introduction to R"                 all 113 pages
#   R-data.pdf           r-doc-pdf      "R Data Import/Export"                 all  41 pages
#   maximabook.pdf       maxima-doc     "Maxima, a Computer Algebra System"    all 155 pages (gunzipped)
#   asymptote-p1-80.pdf  asymptote-doc  Asymptote manual (196 pp., figures)    pages 1-80 (subset)
#   gnuplot-p1-60.pdf    gnuplot-doc    gnuplot 5.4 manual (311 pp.)           pages 1-60 (subset)
#
# 449 pages in all. The two subsets are cut with pymupdf (Document.insert_pdf) into new files.
# Idempotent: everything is cached under bench/out/pdf_corpus/ (debs/, extract/, pdfs/, CORPUS.txt
# listing pages and sizes, SOURCES.txt listing the .deb files); a second
# run only verifies. Needs root or sudo for `apt-get update` when the package lists are missing.
#
# Usage: bench/get_pdf_corpus.sh            # prints the PDF folder on success
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
OUT="$ROOT/bench/out/pdf_corpus"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
PACKAGES=(r-doc-pdf maxima-doc asymptote-doc gnuplot-doc)
PDFS="$OUT/pdfs"
STAMP="$OUT/.complete"  # notes live beside pdfs/, never in it (ingest indexes that folder)

if [[ -f "$STAMP" ]]; then
    echo "$PDFS"
    exit 0
fi

mkdir -p "$OUT/debs" "$OUT/extract" "$PDFS"

# 1. download the .deb files (cached)
missing=()
for p in "${PACKAGES[@]}"; do
    compgen -G "$OUT/debs/${p}_*.deb" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
    if ! apt-cache show "${missing[0]}" >/dev/null 2>&1; then
        echo "package lists missing: running apt-get update" >&2
        ${SUDO:-} apt-get update -qq
    fi
    # apt-get download writes to the current directory; as root it warns about the _apt sandbox
    (cd "$OUT/debs" && apt-get download -q "${missing[@]}" 2>&1 | grep -v "unsandboxed" >&2 || true)
    for p in "${missing[@]}"; do
        compgen -G "$OUT/debs/${p}_*.deb" >/dev/null || { echo "download of $p failed" >&2; exit 1; }
    done
fi

# 2. unpack (no install)
for deb in "$OUT"/debs/*.deb; do
    dpkg-deb -x "$deb" "$OUT/extract"
done
X="$OUT/extract"

# 3. the corpus
cp -f "$X/usr/share/R/doc/manual/R-intro.pdf" "$PDFS/R-intro.pdf"
cp -f "$X/usr/share/R/doc/manual/R-data.pdf" "$PDFS/R-data.pdf"
gzip -dc "$X/usr/share/doc/maxima-doc/maximabook-19-Sept-2004.pdf.gz" > "$PDFS/maximabook.pdf.part"
mv -f "$PDFS/maximabook.pdf.part" "$PDFS/maximabook.pdf"

"$PY" - "$X" "$PDFS" <<'EOF'
import sys
from pathlib import Path

import pymupdf

x, out = Path(sys.argv[1]), Path(sys.argv[2])
subsets = [
    (x / "usr/share/doc/asymptote/asymptote.pdf", "asymptote-p1-80.pdf", 1, 80),
    (x / "usr/share/doc/gnuplot/gnuplot.pdf", "gnuplot-p1-60.pdf", 1, 60),
]
for src, name, first, last in subsets:
    with pymupdf.open(src) as doc, pymupdf.open() as sub:
        sub.insert_pdf(doc, from_page=first - 1, to_page=last - 1)
        tmp = out / (name + ".part")
        sub.save(tmp, garbage=3, deflate=True)
    tmp.rename(out / name)
total = 0
lines = []
for pdf in sorted(out.glob("*.pdf")):
    with pymupdf.open(pdf) as doc:
        total += doc.page_count
        lines.append(f"{doc.page_count:5d}  {pdf.stat().st_size / 1e6:6.2f} MB  {pdf.name}")
lines.append(f"{total:5d}  pages in all")
(out.parent / "CORPUS.txt").write_text("\n".join(lines) + "\n")
print("\n".join(lines), file=sys.stderr)
EOF

ls "$OUT"/debs/ > "$OUT/SOURCES.txt"
touch "$STAMP"
echo "$PDFS"
