"""Question sets with reference answers: the ground truth that exports and evaluation rely on.

Ground truth comes from here (a dataset a person wrote or downloaded), never from an agent's answer.
The public names are :mod:`.unified`'s, re-exported so that its ``__all__`` stays the one list.
"""

from vrag_desktop.core.datasets import unified
from vrag_desktop.core.datasets.unified import *  # noqa: F403

__all__ = list(unified.__all__)
