"""Which dataset items a corpus can answer: each item's evidence file found among the corpora's
files by name, and its reference pages checked against the file's pages.

Why its own step: an evaluation over items whose evidence is not indexed measures nothing, and a
dataset written 0-based, or for another version of a document, fails silently in every metric. Each
item that cannot be scored is named with the reason, and the evaluation goes on with the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

from vrag_desktop.core.datasets import DatasetItem
from vrag_desktop.core.eval.metrics import golden_keys

__all__ = ["CorpusFile", "DatasetMatch", "Match", "corpus_files", "match_dataset"]


@dataclass(frozen=True)
class CorpusFile:
    """One indexed file: its path, its corpus, its page count (None: not a paged document) and the
    SHA-256 of its bytes (None: unknown), which tells copies of one file in two corpora apart from
    two different files of the same name."""

    path: str
    corpus: str
    pages: int | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class Match:
    """An item with the corpus files its ``file_name`` names and the page keys it counts as evidence."""

    item: DatasetItem
    files: tuple[CorpusFile, ...]
    golden: tuple[str, ...]
    note: str = ""  # e.g. the name fits two files: a hit on either counts


@dataclass
class DatasetMatch:
    matched: list[Match] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (uid, why it cannot be scored)

    def lines(self) -> list[str]:
        """For a person: how many items match, then each one that does not, and why."""
        total = len(self.matched) + len(self.problems)
        out = [f"{len(self.matched)} of {total} item(s) match the corpora"]
        out += [f"  {uid}: {why}" for uid, why in self.problems]
        out += [f"  {m.item.uid}: {m.note}" for m in self.matched if m.note]
        return out


def corpus_files(corpora: Iterable[object]) -> list[CorpusFile]:
    """The indexed files of ``corpora`` (:class:`~vrag_desktop.core.corpus.corpus.Corpus` objects)."""
    from vrag_desktop.core.corpus import kinds
    from vrag_desktop.core.corpus.manifest import S_INDEXED

    out: list[CorpusFile] = []
    for corpus in corpora:
        name = str(getattr(corpus, "name", ""))
        for src in corpus.manifest.sources(S_INDEXED):  # type: ignore[attr-defined]
            pages = src.n_expected if src.kind == kinds.PDF else None
            out.append(CorpusFile(src.path, name, pages, src.sha256))
    return out


def _norm(path: str) -> str:
    return path.replace("\\", "/").strip("/").casefold()


def _find(file_name: str, files: Sequence[CorpusFile]) -> list[CorpusFile]:
    """Files whose path ends with ``file_name`` (a bare name, or a path relative to the corpus)."""
    want = _norm(file_name)
    return [f for f in files if _norm(f.path) == want or _norm(f.path).endswith("/" + want)]


def _page_problem(item: DatasetItem, pages: int | None) -> str | None:
    ref = item.reference_page
    if not ref:
        return None
    if pages is None:
        return f"it names page(s) {list(ref)} of {item.file_name}, which has no pages"
    if 0 in ref:
        return f"page 0 in reference_page {list(ref)}: pages are numbered from 1 (is the dataset 0-based?)"
    late = [p for p in ref if p > pages or p < 0]
    if late:
        return f"page(s) {late} of {item.file_name} do not exist (it has {pages} page(s))"
    return None


def match_dataset(items: Iterable[DatasetItem], files: Sequence[CorpusFile]) -> DatasetMatch:
    """Match every item to ``files`` (see the module docstring); nothing is dropped silently."""
    out = DatasetMatch()
    corpora = sorted({f.corpus for f in files}) or ["(none)"]
    for item in items:
        if not item.file_name:
            out.problems.append((item.uid, "it names no evidence file (meta_info.file_name is empty)"))
            continue
        found = _find(item.file_name, files)
        if not found:
            out.problems.append(
                (item.uid, f"{item.file_name} is not in the indexed files of {', '.join(corpora)}")
            )
            continue
        distinct = {PurePath(f.path).name for f in found}
        copies = len(found) > 1 and found[0].sha256 is not None and len({f.sha256 for f in found}) == 1
        if len(found) > 1 and len({f.pages for f in found}) > 1:
            out.problems.append(
                (
                    item.uid,
                    f"{item.file_name} names {len(found)} different files "
                    f"({', '.join(f.path for f in found[:3])}); give a path that tells them apart",
                )
            )
            continue
        why = _page_problem(item, found[0].pages)
        if why:
            out.problems.append((item.uid, why))
            continue
        note = ""
        if len(found) > 1 and not copies:  # copies of one file (in two corpora) are one file
            note = f"{item.file_name} fits {len(found)} files ({', '.join(sorted(distinct))}); a hit on any counts"
        out.matched.append(
            Match(item, tuple(found), tuple(golden_keys(item.file_name, item.reference_page)), note)
        )
    return out
