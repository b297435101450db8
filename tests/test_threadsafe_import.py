"""``core.threadsafe_import.transformers()`` while another thread is importing transformers (the
app's warm-up racing the first indexing's embedder load): the names are there, never "cannot
import name 'AutoModel' from 'transformers'"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RACE = """
import sys, threading, time
from vrag_desktop.core.threadsafe_import import transformers
out = {}
def warmup():
    import transformers as _
def loader():
    try:
        out["AutoModel"] = transformers().AutoModel.__name__
    except Exception as exc:
        out["AutoModel"] = repr(exc)
a = threading.Thread(target=warmup); a.start()
time.sleep(0.05)  # inside transformers/__init__ (it takes seconds)
b = threading.Thread(target=loader); b.start()
a.join(); b.join()
print(out["AutoModel"])
"""


def test_transformers_names_while_another_thread_imports_it() -> None:
    proc = subprocess.run([sys.executable, "-c", RACE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "AutoModel", proc.stdout + proc.stderr[-2000:]
