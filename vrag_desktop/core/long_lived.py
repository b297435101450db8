"""Load big, long-lived things (torch models, OCR sessions, HTTP SDKs) without garbage-collection pauses.

Loading torch and a model leaves ~0.5 M objects that live as long as the process; each full
collection then walks them all while holding the GIL (0.2–1 s on a small machine), freezing every
other thread, the app's window included. Collect nothing while loading, then move everything alive
into the permanent generation, which later collections skip.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_LOCK = threading.Lock()
_DEPTH = 0


@contextmanager
def long_lived() -> Iterator[None]:
    """Wrap the load; nesting and concurrent loads from several threads are fine."""
    global _DEPTH
    with _LOCK:
        _DEPTH += 1
        gc.disable()
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0:
                gc.freeze()
                gc.enable()
