"""Document context for every chunk and page: who wrote it, what it is, what period it covers.

Why: in a corpus of look-alike documents (every company's cash-flow statement reads like every
other's) the question names the company and the period while the page that answers it does not. A
page embedded, or keyword-indexed, without its document's identity cannot be told apart from its
neighbours in other documents. As in Anthropic's "contextual retrieval", each chunk's text for the
embedder and for BM25 is prefixed with a short header naming its document: the file name and what
the first page says of the document (issuer, form type, period, title line). A document whose first
page says nothing usable (a scan without OCR, an image) falls back to the file name.

The header is the same wherever it is computed (indexing, the BM25 index built at search time) since
it depends only on the file's name and its first page's text. Which corpora carry it is recorded in
the manifest (:data:`CONTEXT_META`): corpora embedded before it existed keep searching exactly as
they did (no header on either side) until re-indexed, so their dense and keyword sides never disagree.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.manifest import Manifest

__all__ = [
    "CONTEXT_DOCUMENT",
    "CONTEXT_META",
    "CONTEXT_NONE",
    "context_mode",
    "document_context",
    "page_header",
    "settle_context_mode",
    "with_context",
]

#: Manifest key saying how the corpus's chunk text was built; absent = before this existed.
CONTEXT_META = "chunk_context"
CONTEXT_DOCUMENT = "document"  # every chunk carries its document's header
CONTEXT_NONE = "none"  # plain page text (corpora indexed before document context)

#: Most characters of a header: a window of MiniLM holds ~1,000 characters; the header takes a tenth.
MAX_CONTEXT_CHARS = 160

_FORM = re.compile(r"\bFORM\s+(10-K|10-Q|8-K|20-F|40-F|6-K|S-1|S-4|DEF\s*14A|N-CSR|11-K)\b", re.IGNORECASE)
_PERIOD = re.compile(
    r"for\s+the\s+(quarterly\s+period|fiscal\s+year|year|period|quarter)\s+ended\s*:?\s*"
    r"([A-Z][a-z]+\.?\s+\d{1,2},?\s+\d{4})",
    re.IGNORECASE,
)
_REGISTRANT = re.compile(r"\(\s*exact\s+name\s+of\s+registrant", re.IGNORECASE)
_COMPANY = re.compile(
    r"^[A-Z0-9][\w.,&'’\- ]{1,70}?\b(inc\.?|incorporated|corporation|corp\.?|company|co\.|ltd\.?|limited|"
    r"plc|llc|l\.p\.|n\.v\.|s\.a\.|a\.g\.|ag|se|holdings|group|bank)$",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z]{3,}")


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def _issuer(lines: list[str]) -> str | None:
    """The registrant's name: the line before "(Exact name of registrant…)", else the first line
    near the top that reads like a company's name."""
    for i, line in enumerate(lines):
        if _REGISTRANT.search(line) and i > 0:
            return lines[i - 1].strip(" _")
    for line in lines[:40]:
        if _COMPANY.match(line.strip(" _")):
            return line.strip(" _")
    return None


def _title(lines: list[str]) -> str | None:
    """The first line of the page that reads as words (a title, a heading), not a number or a rule."""
    for line in lines[:8]:
        if len(_WORD.findall(line)) >= 2 and len(line) <= 120:
            return line
    return None


def document_context(path: str, first_page_text: str | None, *, with_name: bool = True) -> str:
    """The header naming a document: its file name, then issuer, form and period when its first
    page states them, else its first title-like line. Never empty: a file name always exists.

    ``with_name=False`` (the embedded header) leaves the file name out when the first page names the
    document: byte-identical copies under two names then embed alike (core/search/copies.py), and a
    download's name ("0001018724-23-000018.pdf") adds noise, not meaning, to a sentence vector. BM25's
    header keeps it: a query may name a file."""
    name = PurePath(path.replace("\\", "/")).name or path
    parts = [f"Document: {name}"]
    lines = _lines(first_page_text or "")
    if lines:
        text = " ".join(lines[:80])
        issuer = _issuer(lines)
        form = _FORM.search(text)
        period = _PERIOD.search(text)
        if issuer:
            parts.append(issuer)
        if form:
            parts.append(f"Form {form.group(1).upper()}")
        if period:
            parts.append(
                f"{' '.join(period.group(1).split()).lower()} ended {' '.join(period.group(2).split())}"
            )
        if not (issuer or form):
            title = _title(lines)
            if title:
                parts.append(title)
    if not with_name and len(parts) > 1:
        parts[0] = "Document"
    return " · ".join(parts)[:MAX_CONTEXT_CHARS]


def page_header(
    path: str, first_page_text: str | None, ordinal: int, *, with_name: bool = True
) -> str | None:
    """The header one page carries. The first page, which the header is read from, already says
    what the header would (a copy of its own title would only pull its vector towards the title):
    it carries the file name alone, where that is part of the header."""
    header = document_context(path, first_page_text, with_name=with_name)
    if ordinal != 1:
        return header
    name_only = document_context(path, None)
    return name_only if with_name or header == name_only else None


def with_context(context: str | None, text: str) -> str:
    """A chunk's text as indexed: the header, then the text."""
    return f"{context}\n{text}" if context else text


def context_mode(manifest: Manifest) -> str:
    """How the corpus's chunks were indexed; a corpus from before document context says nothing
    and searches as it was built (plain text)."""
    return manifest.get_meta(CONTEXT_META) or CONTEXT_NONE


def settle_context_mode(manifest: Manifest) -> str:
    """The mode a build uses, recorded on its first build: document context for a new corpus; plain
    text for one already holding vectors embedded without it (one corpus, one kind of chunk text —
    re-index it to benefit)."""
    mode = manifest.get_meta(CONTEXT_META)
    if mode is None:
        mode = CONTEXT_NONE if manifest.max_vector_id() >= 0 else CONTEXT_DOCUMENT
        manifest.set_meta(CONTEXT_META, mode)
    return mode
