"""Retrieval evaluation on labelled questions: does the expected file/page come back, and how high?

A question file is a JSON list of ``{"question", "expected": {"file", "page"}}`` with ``file``
relative to the corpus folder and ``page`` 1-based (or null for images, videos and text files).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrag_desktop.core.search.engine import SearchEngine
from vrag_desktop.core.search.hit import Hit


@dataclass
class QuestionResult:
    question: str
    expected_file: str
    expected_page: int | None
    rank: int | None  # 1-based rank of the first correct hit, None if not in the top k
    top: str  # what came first (file and page), for reports


@dataclass
class EvalReport:
    k: int
    results: list[QuestionResult]

    def recall_at(self, n: int) -> float:
        return sum(1 for r in self.results if r.rank is not None and r.rank <= n) / max(len(self.results), 1)

    @property
    def mrr(self) -> float:
        return sum(1.0 / r.rank for r in self.results if r.rank) / max(len(self.results), 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "questions": len(self.results),
            "recall@1": self.recall_at(1),
            "recall@3": self.recall_at(3),
            "recall@5": self.recall_at(5),
            "mrr": self.mrr,
        }


def load_questions(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of questions")
    return data


def is_match(hit: Hit, corpus_root: Path, file: str, page: int | None) -> bool:
    """The hit is the expected file (and page, for PDFs)."""
    try:
        same = os.path.samefile(hit.source, corpus_root / file)
    except OSError:
        same = False
    return same and (page is None or hit.page == page)


def evaluate(
    engine: SearchEngine, questions: list[dict[str, Any]], corpus_root: Path, k: int = 5
) -> EvalReport:
    hits_per_q = engine.search_batch([q["question"] for q in questions], k)
    results = []
    for q, hits in zip(questions, hits_per_q, strict=True):
        exp = q["expected"]
        rank = next(
            (i + 1 for i, h in enumerate(hits) if is_match(h, corpus_root, exp["file"], exp.get("page"))),
            None,
        )
        top = f"{Path(hits[0].source).name} p{hits[0].page}" if hits else "-"
        results.append(QuestionResult(q["question"], exp["file"], exp.get("page"), rank, top))
    return EvalReport(k, results)
