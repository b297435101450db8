"""The one way the app imports FAISS: with its loader's INFO lines silenced.

Why: ``faiss/loader.py`` logs at INFO each CPU-specific build it tries (AVX512-SPR, AVX512, AVX2)
and the ``ModuleNotFoundError`` of every one not installed before loading the generic build. A
process that logs at INFO (the trainer, whose log the Training panel shows) then opens with lines
that read as failures although nothing failed. Its warnings and errors still show.
"""

from __future__ import annotations

import logging
from typing import Any

LOADER_LOGGER = "faiss.loader"


def load_faiss() -> Any:
    """``faiss``, imported (once) with the loader's logger at WARNING unless someone chose a level."""
    logger = logging.getLogger(LOADER_LOGGER)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)
    import faiss

    return faiss
