"""The original's unified dataset JSON (reference §6.6), and the same examples as JSON lines.

Unified form (``examples/rag_dataset.json`` in VRAG)::

    {"examples": [{"uid", "query", "reference_answer",
                   "meta_info": {"file_name": "<doc>.pdf", "reference_page": [1-based ints],
                                 "source_type": str | [str], "query_type", "doc_type", "answer_format"}}]}

JSON-lines form: one such example object per line. Loading checks every field and says which file,
which example (or line) and what is wrong, because a silently mis-read label would poison training
data. Keys we do not know are kept and written back unchanged. ``match_run`` finds the labelled
item for a run by its question (exact text after whitespace normalisation: a paraphrase is a
different question, and a wrong match would attach a wrong ground truth).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrag_desktop.core.fsutil import atomic_write_json

#: meta_info keys with a typed field on DatasetItem (others are kept in ``extra_meta``).
_META_KEYS = ("file_name", "reference_page", "source_type", "query_type", "doc_type", "answer_format")
_TOP_KEYS = ("uid", "query", "reference_answer", "meta_info")


class DatasetError(ValueError):
    """A dataset file cannot be used; the message names the file, the example and the problem."""


class AmbiguousQuestion(DatasetError):
    """Several items ask the same question with different labels: no single ground truth."""


@dataclass(frozen=True)
class DatasetItem:
    """One labelled question. ``reference_page`` is 1-based, as in the original."""

    uid: str
    query: str
    reference_answer: str
    file_name: str = ""
    reference_page: tuple[int, ...] = ()
    source_type: str | tuple[str, ...] = ""
    query_type: str = ""
    doc_type: str = ""
    answer_format: str = ""
    extra_meta: Mapping[str, Any] = field(default_factory=dict, hash=False)
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def content_type(self) -> str:
        """verl's ``extra_info.content_type``: the source type, lists joined with ``####`` (as the
        original's MMLongBench conversion does)."""
        st = self.source_type
        return "####".join(st) if isinstance(st, tuple) else st

    @property
    def reason_type(self) -> str:
        """verl's ``extra_info.reason_type``: the query type (ViDoSeek's mapping)."""
        return self.query_type

    def label(self) -> tuple[str, str, tuple[int, ...]]:
        """What makes two items the same ground truth."""
        return (self.reference_answer, self.file_name, self.reference_page)

    def to_dict(self) -> dict[str, Any]:
        """The unified example object (unknown keys written back where they came from)."""
        meta: dict[str, Any] = {
            "file_name": self.file_name,
            "reference_page": list(self.reference_page),
            "source_type": list(self.source_type)
            if isinstance(self.source_type, tuple)
            else self.source_type,
            "query_type": self.query_type,
            "doc_type": self.doc_type,
            "answer_format": self.answer_format,
            **self.extra_meta,
        }
        return {
            "uid": self.uid,
            "query": self.query,
            "reference_answer": self.reference_answer,
            "meta_info": meta,
            **self.extra,
        }


def normalize_question(text: str) -> str:
    """Whitespace runs collapsed to one space, ends trimmed; case and punctuation kept."""
    return " ".join(text.split())


class Dataset:
    """Items of one file, in file order, with a question index for :meth:`match`."""

    def __init__(
        self, items: Iterable[DatasetItem], path: Path | None = None, problems: Iterable[tuple[str, str]] = ()
    ) -> None:
        self.items = tuple(items)
        self.path = path
        #: (uid, why) of examples left out while reading for evaluation (``need_answers=False``)
        self.problems = list(problems)
        self._by_question: dict[str, list[DatasetItem]] = {}
        for item in self.items:
            self._by_question.setdefault(normalize_question(item.query), []).append(item)

    @property
    def name(self) -> str:
        return self.path.name if self.path else "the dataset"

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[DatasetItem]:
        return iter(self.items)

    def match(self, question: str) -> DatasetItem | None:
        """The item asking ``question``; None when none does. Items repeating the same label are
        one; different labels for the same question raise :class:`AmbiguousQuestion`."""
        found = self._by_question.get(normalize_question(question), [])
        labels = {i.label() for i in found}
        if len(labels) > 1:
            uids = ", ".join(repr(i.uid) for i in found)
            raise AmbiguousQuestion(
                f"{self.name}: items {uids} ask the same question with different reference answers "
                "or pages; keep one of them"
            )
        return found[0] if found else None


def match_run(
    item_or_dataset: DatasetItem | Dataset | Iterable[DatasetItem], question: str
) -> DatasetItem | None:
    """The dataset item for a run that asked ``question`` (see :meth:`Dataset.match`)."""
    if isinstance(item_or_dataset, DatasetItem):
        same = normalize_question(item_or_dataset.query) == normalize_question(question)
        return item_or_dataset if same else None
    ds = item_or_dataset if isinstance(item_or_dataset, Dataset) else Dataset(item_or_dataset)
    return ds.match(question)


# ---------------------------------------------------------------- reading
def load_dataset(path: str | Path, *, need_answers: bool = True) -> Dataset:
    """A unified JSON file (``{"examples": [...]}``), JSON lines (one example per line), verl
    parquet rows, or the sample corpus's question list (see :mod:`.forms`). ``need_answers=False``
    reads for evaluation, which names a bad item and goes on with the rest: an empty
    ``reference_answer`` is accepted (retrieval needs none; an answers evaluation names the item),
    and a repeated uid keeps its first example and names the others in :attr:`Dataset.problems`.
    Exports and labelling keep the strict default."""
    p = Path(path)
    if p.suffix.lower() == ".parquet":
        from vrag_desktop.core.datasets.forms import from_parquet

        return _checked(p, from_parquet(p, need_answers), need_answers)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read the dataset {p}: {exc}") from exc
    if not text.strip():
        raise DatasetError(f'{p}: the file is empty; expected {{"examples": [...]}} or JSON lines')
    if p.suffix.lower() == ".jsonl":
        return _checked(p, _from_lines(p, text, need_answers), need_answers)
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as exc:
        first = text.strip().splitlines()[0]
        if _is_object(first):  # the first line stands alone: JSON lines
            return _checked(p, _from_lines(p, text, need_answers), need_answers)
        raise DatasetError(f"{p}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    if isinstance(whole, dict) and "examples" in whole:
        examples = whole["examples"]
        if not isinstance(examples, list):
            raise DatasetError(f'{p}: "examples" must be a list of example objects')
        items = [_item(e, i, f"{p}: example {i + 1}", need_answers) for i, e in enumerate(examples)]
        return _checked(p, items, need_answers)
    from vrag_desktop.core.datasets.forms import from_question_list, is_question_list

    if is_question_list(whole):
        return _checked(p, from_question_list(p, whole, need_answers), need_answers)
    if isinstance(whole, dict) and len(text.strip().splitlines()) == 1:
        return _checked(p, _from_lines(p, text, need_answers), need_answers)  # JSON lines with one example
    kind = "a list" if isinstance(whole, list) else 'an object without "examples"'
    raise DatasetError(
        f'{p}: holds {kind}; expected the unified form {{"examples": [...]}} or JSON lines '
        "(one example object per line)"
    )


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def _from_lines(p: Path, text: str, need_answer: bool = True) -> list[DatasetItem]:
    items: list[DatasetItem] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{p}:{n}: not a JSON object ({exc.msg} at column {exc.colno})") from exc
        items.append(_item(obj, len(items), f"{p}:{n}", need_answer))
    if not items:
        raise DatasetError(f"{p}: no examples")
    return items


def _checked(p: Path, items: list[DatasetItem], strict: bool) -> Dataset:
    """Unique uids: a repeat is an error, or — reading for evaluation — the first item is kept and
    the others are named in :attr:`Dataset.problems` (the evaluation goes on with the rest)."""
    seen: dict[str, int] = {}
    kept: list[DatasetItem] = []
    problems: list[tuple[str, str]] = []
    for n, item in enumerate(items, start=1):
        if item.uid in seen:
            why = f"examples {seen[item.uid]} and {n} share the uid {item.uid!r}"
            if strict:
                raise DatasetError(f"{p}: {why}")
            problems.append((item.uid, f"{why}: example {n} left out (give it its own uid)"))
            continue
        seen[item.uid] = n
        kept.append(item)
    return Dataset(kept, p, problems)


def _item(obj: Any, index: int, where: str, need_answer: bool = True) -> DatasetItem:
    """One example object, every field checked; ``uid`` defaults to the example's position."""
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: an example must be a JSON object, got {type(obj).__name__}")
    uid = obj.get("uid", index)
    if isinstance(uid, bool) or not isinstance(uid, str | int) or str(uid).strip() == "":
        raise DatasetError(f'{where}: "uid" must be a non-empty string or an integer, got {uid!r}')
    where = f"{where} (uid {uid!s})"
    query = obj.get("query")
    if not isinstance(query, str) or not query.strip():
        raise DatasetError(f'{where}: "query" must be the question as a non-empty string')
    answer = obj.get("reference_answer")
    if not need_answer and answer in (None, ""):
        answer = ""
    elif isinstance(answer, bool) or not isinstance(answer, str | int | float) or not str(answer).strip():
        raise DatasetError(f'{where}: "reference_answer" must be a non-empty string (or a number)')
    meta = obj.get("meta_info", {})
    if not isinstance(meta, dict):
        raise DatasetError(f'{where}: "meta_info" must be an object')
    strings = {}
    for key in ("file_name", "query_type", "doc_type", "answer_format"):
        value = meta.get(key)
        if value is not None and not isinstance(value, str):
            raise DatasetError(f'{where}: "meta_info.{key}" must be a string, got {value!r}')
        strings[key] = value or ""
    return DatasetItem(
        uid=str(uid),
        query=query,
        reference_answer=str(answer),
        reference_page=_pages(meta.get("reference_page"), where, lowest=1 if need_answer else 0),
        source_type=_source_type(meta.get("source_type"), where),
        extra_meta={k: v for k, v in meta.items() if k not in _META_KEYS},
        extra={k: v for k, v in obj.items() if k not in _TOP_KEYS},
        **strings,
    )


def _pages(value: Any, where: str, lowest: int = 1) -> tuple[int, ...]:
    """Page numbers from 1; ``lowest=0`` (reading for evaluation) lets a page 0 through for the
    corpus match to name, item by item, as a 0-based slip."""
    if value is None:
        return ()
    ok = isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= lowest for v in value
    )
    if not ok:
        raise DatasetError(
            f'{where}: "meta_info.reference_page" must be a list of page numbers counted from 1 '
            f"(is the dataset 0-based?), got {value!r}"
        )
    return tuple(value)


def _source_type(value: Any, where: str) -> str | tuple[str, ...]:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise DatasetError(
        f'{where}: "meta_info.source_type" must be a string or a list of strings, got {value!r}'
    )


# ---------------------------------------------------------------- writing
def write_unified(path: str | Path, items: Iterable[DatasetItem]) -> None:
    """Write ``items`` as the original's unified JSON, atomically (a crash leaves the old file)."""
    atomic_write_json(path, {"examples": [i.to_dict() for i in items]}, mkdir=True)


__all__ = [
    "AmbiguousQuestion",
    "Dataset",
    "DatasetError",
    "DatasetItem",
    "load_dataset",
    "match_run",
    "normalize_question",
    "write_unified",
]
