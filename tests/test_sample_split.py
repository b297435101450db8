"""The sample corpus's training/validation split (train.json, val.json): what a first training run
and its validation curve are made from, so it must load, be disjoint, cover the questions, carry
answers a CPU judge can score, and stay out of the index."""

from __future__ import annotations

import json
from pathlib import Path

from vrag_desktop.core.corpus.scan import walk
from vrag_desktop.core.datasets.unified import load_dataset
from vrag_desktop.core.eval.answers import normalize_answer

SAMPLE = Path(__file__).resolve().parent.parent / "resources" / "sample_corpus"


def test_split_loads_disjoint_and_covers_the_questions() -> None:
    train = load_dataset(SAMPLE / "train.json").items
    val = load_dataset(SAMPLE / "val.json").items
    assert 12 <= len(train) <= 20 and 6 <= len(val) <= 10
    uids = [x.uid for x in train] + [x.uid for x in val]
    assert len(set(uids)) == len(uids)  # no question in both
    questions = json.loads((SAMPLE / "questions.json").read_text(encoding="utf-8"))
    assert sorted(uids) == sorted(f"q{n + 1}" for n in range(len(questions)))
    by_uid = {f"q{n + 1}": x for n, x in enumerate(questions)}
    for item in [*train, *val]:
        whole = by_uid[item.uid]
        assert (SAMPLE / item.file_name).is_file() and item.file_name == whole["expected"]["file"]
        assert 1 <= len(item.reference_answer.split()) <= 4, item.reference_answer
        # the short answer is a piece of the long one: the same fact, scorable without a judge model
        assert normalize_answer(item.reference_answer) in normalize_answer(whole["answer"]), item.uid


def test_split_files_are_not_indexed() -> None:
    names = {Path(f.path).name for f in walk(str(SAMPLE))}
    assert "train.json" not in names and "val.json" not in names and "questions.json" not in names
    assert "README.md" in names
