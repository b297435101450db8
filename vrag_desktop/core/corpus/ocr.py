"""Offline OCR for pages and images that have no text layer (rapidocr's PP-OCR ONNX models ship
inside its wheel, so this works with no download; it needs only opencv-python-headless, which
does not clash with Qt)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from vrag_desktop.core.images import open_upright

_lock = threading.Lock()
_engine: Any = None


class OCRUnavailable(RuntimeError):
    """rapidocr is not installed or failed to start."""


def _get_engine() -> Any:
    global _engine
    with _lock:
        if _engine is None:
            from vrag_desktop.core.long_lived import long_lived

            with long_lived():
                try:
                    from rapidocr import RapidOCR

                    _engine = RapidOCR(params={"Global.log_level": "error"})
                except Exception as exc:
                    raise OCRUnavailable(f"OCR engine unavailable ({exc}); install rapidocr") from exc
        return _engine


def ocr_image(image: Path | np.ndarray) -> str:
    """Text found in ``image`` (a file, read upright, or an RGB array), in reading order (top to
    bottom, then left to right), one line each."""
    engine = _get_engine()
    arg = open_upright(image) if isinstance(image, Path) else image
    with _lock:  # one onnxruntime session; calls are not re-entrant
        # No angle classifier: it sometimes flags an upright line as upside down and the line is lost;
        # scans and slides are upright, and skipping it also saves time.
        out = engine(arg, use_cls=False)
    boxes_found = getattr(out, "boxes", None)
    texts = getattr(out, "txts", None)
    if boxes_found is None or not texts:
        return ""
    boxes = []
    for box, text in zip(boxes_found.tolist(), texts, strict=False):
        ys = [p[1] for p in box]
        xs = [p[0] for p in box]
        boxes.append((min(ys), max(ys), min(xs), text))
    # Group boxes into lines: boxes whose vertical centres are within half a line height share a line.
    boxes.sort()
    lines: list[list[tuple[float, str]]] = []
    last_mid, last_h = None, 0.0
    for top, bottom, left, text in boxes:
        mid, h = (top + bottom) / 2, bottom - top
        if last_mid is not None and abs(mid - last_mid) < max(h, last_h) / 2:
            lines[-1].append((left, text))
        else:
            lines.append([(left, text)])
            last_mid, last_h = mid, h
    return "\n".join(" ".join(t for _, t in sorted(line)) for line in lines)
