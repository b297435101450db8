"""Importing transformers while another thread (the app's warm-up) is still importing it.

``transformers/__init__.py`` ends by replacing itself in ``sys.modules`` with a lazy module. A
thread whose ``from transformers import AutoModel`` starts while another thread runs that
``__init__`` waits for it, but then reads the name from the module object it found first — the
half-built one, not the lazy module — and fails with "cannot import name 'AutoModel' from
'transformers'" (seen as "Could not load the embedder" at the first indexing after start). Reading
the names from ``sys.modules`` after the import has finished is always right.
"""

from __future__ import annotations

import sys
from types import ModuleType


def transformers() -> ModuleType:
    """The ``transformers`` module, fully initialised, whoever imports it meanwhile."""
    import transformers as _  # noqa: F401  (waits for another thread's import to finish)

    return sys.modules["transformers"]


__all__ = ["transformers"]
