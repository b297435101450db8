"""Question sets with reference answers: the ground truth that exports and evaluation rely on.

Ground truth comes from here (a dataset a person wrote or downloaded), never from an agent's answer.
"""

from vrag_desktop.core.datasets.unified import (
    AmbiguousQuestion,
    Dataset,
    DatasetError,
    DatasetItem,
    load_dataset,
    match_run,
    normalize_question,
    write_unified,
)

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
