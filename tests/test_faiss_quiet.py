"""A process that logs at INFO (the trainer) does not open its log with FAISS's loader trying the
CPU-specific builds it does not have (``ModuleNotFoundError … avx512`` reads as a failure)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(message)s")
from vrag_desktop.core.index.store import VectorStore, _faiss
index = _faiss().IndexFlatIP(4)
logging.getLogger("vrag_desktop").info("indexed %d", index.ntotal)
logging.getLogger("faiss.loader").warning("a real warning still shows")
"""


def test_the_faiss_loader_is_quiet_at_info() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert "vrag_desktop indexed 0" in lines
    assert "faiss.loader a real warning still shows" in lines
    assert not [ln for ln in lines if ln.startswith("faiss.loader") and "real warning" not in ln], lines
    assert not [ln for ln in lines if "AVX" in ln or "ModuleNotFoundError" in ln], lines
