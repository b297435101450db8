"""Load torch and the other heavy native libraries in the background, before the first indexing.

Why: the first ``import torch`` loads a 400 MB shared library (``libtorch_cpu.so``), relocating it
and running its static initialisers for ~0.25 s. Python imports extension modules with the GIL
held, so whichever thread does it — the indexing worker, or a run's searcher — froze every other
thread, the window's included, once per app start. Here the same libraries are first mapped with
the C library's ``dlopen`` called through ctypes, which releases the GIL for the duration of a
foreign call; the later ``import`` then finds them loaded and only runs the modules' Python-level
set-up, in short slices other threads interleave with. The modules a model's first load imports
come too: ``transformers`` defers ~1,400 of them (torch._dynamo, sympy, scipy: ~3 s on two cores)
until a model class is first touched, which was the first indexing's embedder load. The imports run
with the collector paused and the survivors frozen afterwards
(:func:`~vrag_desktop.core.long_lived.long_lived`), so no full collection walks torch's objects in
the middle.

Then, when the app asks (``then``), the embedder itself: its load is another ~0.3 s of Python and
C calls that hold the GIL (two parses of the tokenizer's JSON, ~20 ms each, are single C calls), which
the first indexing or question would otherwise spend next to the window's busiest moment.

Core code, no Qt: the app calls :func:`start` once its window shows. ``VRAG_DESKTOP_NO_WARMUP=1``
turns it off (a session that never indexes nor searches locally saves torch's memory).
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from vrag_desktop.core.priority import lower_thread_priority

log = logging.getLogger(__name__)

#: (package, extension modules inside it, relative globs) that indexing and local search load: their
#: dependencies (torch's libtorch_cpu, OpenCV's and onnxruntime's libraries) come along by RPATH.
#: Only modules the imports below load anyway: mapping others would run initialisers nobody asked for.
NATIVE = (
    ("torch", "_C.*.so"),
    ("tokenizers", "tokenizers*.so"),
    ("safetensors", "_safetensors_rust*.so"),
    ("onnxruntime", "capi/onnxruntime_pybind11_state*.so"),
    ("cv2", "cv2*.so"),
    ("faiss", "_swigfaiss*.so"),
    ("pymupdf", "_*.so"),  # _mupdf and _extra; libmupdf (36 MB) by RPATH
    ("xxhash", "_xxhash*.so"),  # the index files' checksums, checked when a store opens
)
#: Python modules imported after the native ones: what loading the embedder, the index and the OCR
#: engine import, and reading a PDF (the first indexing's scan, a crop from a PDF source), then what
#: a person's first question imports (the run's assembly on the GUI thread, the model's HTTP client
#: on the run's thread).
MODULES = (
    "torch",
    "transformers",
    # what loading any model imports on top (~3 s of imports: torch._dynamo, sympy, scipy); the
    # package itself defers them until a model class is first touched
    "transformers.modeling_utils",
    "transformers.activations",
    "transformers.masking_utils",
    "transformers.modeling_layers",
    "transformers.models.auto.auto_factory",
    "transformers.tokenization_utils_tokenizers",
    "vrag_desktop.core.embedders.minilm",
    "faiss",
    "xxhash",
    "onnxruntime",
    "cv2",
    "pymupdf",  # ~0.16 s with the GIL held: unmarshalling its 2 MB SWIG module, making its classes
    "vrag_desktop.api",
    "vrag_desktop.core.run.assemble",
    "vrag_desktop.core.agents.vrag",
    "vrag_desktop.core.agents.vimrag",
    "openai",
)

_started: threading.Thread | None = None
_lock = threading.Lock()


def _package_dir(name: str) -> Path | None:
    """The folder of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def preload_native(native: tuple[tuple[str, str], ...] = NATIVE) -> list[str]:
    """Map the shared libraries behind ``native`` without holding the GIL; returns what was mapped.

    Modules already imported are skipped; failures are ignored (the import reports them later)."""
    if not sys.platform.startswith(("linux", "darwin")):
        return []
    try:
        libc = ctypes.CDLL(None)
        dlopen = libc.dlopen
    except (OSError, AttributeError):
        return []
    dlopen.restype = ctypes.c_void_p
    dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
    mode = os.RTLD_NOW | os.RTLD_LOCAL  # as Python's own import would (it makes no symbol global)
    done = []
    for package, pattern in native:
        if package in sys.modules:
            continue
        folder = _package_dir(package)
        for path in sorted(folder.glob(pattern)) if folder else []:
            t = time.perf_counter()
            if dlopen(os.fsencode(path), mode):  # a ctypes foreign call: the GIL is released
                done.append(path.name)
                log.debug("mapped %s in %.0f ms", path.name, (time.perf_counter() - t) * 1000)
    return done


def warm(modules: tuple[str, ...] = MODULES, then: Callable[[], object] | None = None) -> dict[str, float]:
    """Preload, import ``modules`` (those installed), then call ``then`` (a failure is logged: whoever
    needs that work later does it again and reports it); seconds per step, for the log."""
    from vrag_desktop.core.long_lived import long_lived

    timings: dict[str, float] = {}
    t = time.perf_counter()
    preload_native()
    timings["native"] = time.perf_counter() - t
    with long_lived():
        for name in modules:
            if name in sys.modules or importlib.util.find_spec(name) is None:
                continue
            t = time.perf_counter()
            try:
                importlib.import_module(name)
            except Exception as exc:  # a broken optional package is reported where it is used
                log.info("warm-up: importing %s failed: %s", name, exc)
            timings[name] = time.perf_counter() - t
    if then is not None:
        t = time.perf_counter()
        try:
            then()
        except Exception as exc:
            log.info("warm-up: %s failed: %s", getattr(then, "__name__", "the last step"), exc)
        timings[getattr(then, "__name__", "then")] = time.perf_counter() - t
    return timings


def start(
    delay: float = 0.5,
    then: Callable[[], object] | None = None,
    after: threading.Event | None = None,
    after_timeout: float = 10.0,
    modules: tuple[str, ...] = MODULES,
) -> threading.Thread | None:
    """:func:`warm` once per process in a daemon thread at low CPU priority, after ``delay`` seconds
    (the window paints first), counted from ``after`` being set (at most ``after_timeout`` s) when
    given. Returns the thread, or None when turned off or already started.

    Why ``after``: torch's extension module initialises for ~0.2 s of CPU holding the GIL; begun
    while the window still makes its panels after the first paint, the two took turns on the cores
    and the window waited for the GIL for up to 0.5 s (docs/benchmarks.md §5). The app sets it once
    those panels are made."""
    global _started
    if os.environ.get("VRAG_DESKTOP_NO_WARMUP"):
        return None
    with _lock:
        if _started is not None:
            return None

        def run() -> None:
            lower_thread_priority(10)
            if after is not None:
                after.wait(after_timeout)
            time.sleep(delay)
            t = time.perf_counter()
            timings = warm(modules=modules, then=then)
            log.info(
                "warm-up done in %.2f s (%s)",
                time.perf_counter() - t,
                ", ".join(f"{k} {v:.2f} s" for k, v in timings.items()),
            )

        _started = threading.Thread(target=run, name="vrag-warmup", daemon=True)
        _started.start()
        return _started


__all__ = ["MODULES", "NATIVE", "preload_native", "start", "warm"]
