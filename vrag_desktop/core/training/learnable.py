"""Config and dataset combinations that run but cannot learn, named before the start.

Why: such a run looks like any other (its loss moves, its curves draw) while its rewards never differ
within a group, so every advantage is 0 and the GPU hours are lost. What the config alone decides is
refused by the config's own check (GGPO with the VRAG agent, a group of one rollout). What depends
on the dataset is a *warning* here: the New-run dialog shows it, ``vrag-desktop train`` prints it and
the trainer logs it, in the same words, because all three call :func:`learning_warnings`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass

from vrag_desktop.core.datasets import DatasetItem
from vrag_desktop.core.eval.answers import normalize_answer
from vrag_desktop.core.training.config import ConfigError, TrainConfig

__all__ = [
    "SENTENCE_SHARE",
    "SENTENCE_WORDS",
    "AnswerStyle",
    "answer_style",
    "dataset_warnings",
    "learning_warnings",
    "looks_like_sentence",
]

#: A reference answer of this many words or more reads as a sentence, not a short answer.
SENTENCE_WORDS = 6
#: The exact judge is warned about once this share of the reference answers are sentences.
SENTENCE_SHARE = 0.25


@dataclass(frozen=True)
class AnswerStyle:
    """What the reward can expect of a dataset: how many reference answers there are, how many of
    them are whole sentences (one of them as an example) and how many items name evidence pages."""

    total: int = 0
    sentences: int = 0
    example: str = ""
    with_pages: int = 0


def looks_like_sentence(text: str) -> bool:
    """A reference an exact match will almost never meet: six words or more, or four or more ending
    like a sentence ("The robot lifts 450 kg.")."""
    words = normalize_answer(text).split()
    if len(words) >= SENTENCE_WORDS:
        return True
    return len(words) >= 4 and text.rstrip().endswith((".", "!", "?"))


def answer_style(items: Iterable[DatasetItem]) -> AnswerStyle:
    """The :class:`AnswerStyle` of ``items`` (items without a reference answer are not counted:
    they are not trained on)."""
    total = sentences = pages = 0
    example = ""
    for it in items:
        ref = it.reference_answer.strip()
        if not ref:
            continue
        total += 1
        pages += bool(it.reference_page)
        if looks_like_sentence(ref):
            sentences += 1
            example = example or ref
    return AnswerStyle(total, sentences, example, pages)


def learning_warnings(cfg: TrainConfig, style: AnswerStyle) -> list[str]:
    """Why a run of ``cfg`` on a dataset of ``style`` may learn nothing (empty: no known reason).
    An SFT warm start has no reward, so none of these apply to it."""
    out: list[str] = []
    if cfg.algorithm == "sft":
        return out
    judged = cfg.reward.judge > 0
    many = style.sentences >= max(1, math.ceil(SENTENCE_SHARE * style.total))
    if judged and cfg.judge.kind == "exact" and style.sentences and many:
        example = style.example if len(style.example) <= 80 else style.example[:77] + "..."
        out.append(
            f"judge.kind: exact can hardly ever score this dataset: {style.sentences} of "
            f"{style.total} reference answers look like whole sentences (e.g. {example!r}), and an "
            "exact match needs the model to write that sentence word for word, so the judge part "
            "of the reward stays 0; use judge.kind anls, or a model judge (profile or url)"
        )
    if style.total and not style.with_pages and cfg.reward.ndcg > 0 and not judged and not cfg.reward.format:
        out.append(
            "reward: only NDCG is weighted, but no item names its evidence pages, so every reward is 0; "
            "weight the judge or the format too, or use a dataset with reference pages"
        )
    return out


def dataset_warnings(cfg: TrainConfig, data_dir: str | os.PathLike[str]) -> list[str]:
    """:func:`learning_warnings` for ``cfg``'s dataset, read without opening the corpora (what the
    command line can afford before launching); a dataset that cannot be read gives none here: the
    trainer refuses it, naming why."""
    from vrag_desktop.core.training.data import resolve_dataset

    try:
        dataset = resolve_dataset(cfg.dataset, data_dir)
    except ConfigError:
        return []
    return learning_warnings(cfg, answer_style(dataset.items))
