"""Load big, long-lived things (torch models, OCR sessions, HTTP SDKs) without garbage-collection pauses.

Loading torch and a model leaves ~0.5 M objects that live as long as the process; each full
collection then walks them all while holding the GIL (0.2–1 s on a small machine), freezing every
other thread, the app's window included. Collect nothing while loading, then move everything alive
into the permanent generation, which later collections skip.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
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


def hold() -> Callable[[], None]:
    """:func:`long_lived` for a span that is no ``with`` block (the app's start, from ``main()`` to the
    window's first paint: ~20 ms of collections there walked modules, classes and widgets that live
    as long as the process). Returns the call that ends it; calling that again does nothing."""
    held = long_lived()
    held.__enter__()
    done = threading.Lock()

    def end() -> None:
        if done.acquire(blocking=False):
            held.__exit__(None, None, None)

    return end
