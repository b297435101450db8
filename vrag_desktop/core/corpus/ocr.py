"""Offline OCR for pages and images that have no text layer (rapidocr's PP-OCR ONNX models ship
inside its wheel, so this works with no download)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

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
                    from rapidocr_onnxruntime import RapidOCR
                except Exception as exc:
                    raise OCRUnavailable(
                        f"OCR engine unavailable ({exc}); install rapidocr-onnxruntime"
                    ) from exc
                _engine = RapidOCR()
        return _engine


def ocr_image(image: Path | np.ndarray) -> str:
    """Text found in ``image``, in reading order (top to bottom, then left to right), one line each."""
    engine = _get_engine()
    arg = str(image) if isinstance(image, Path) else image
    with _lock:  # one onnxruntime session; calls are not re-entrant
        # No angle classifier: it sometimes flags an upright line as upside down and the line is lost;
        # scans and slides are upright, and skipping it also saves time.
        result, _ = engine(arg, use_cls=False)
    if not result:
        return ""
    boxes = []
    for box, text, _score in result:
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
