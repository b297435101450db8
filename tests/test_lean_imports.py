"""The app works without scipy, scikit-learn and sentence-transformers, which the bundle leaves out
and a lean setup never installs: the memory graph (networkx), BM25 (bm25s falls back from its
scipy backend to NumPy, with the same scores) and the offline MiniLM's query pass run in a process
where those packages cannot be found, exactly as if they were not installed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

BLOCKED = ("scipy", "sklearn", "sentence_transformers")
TEXTS = [
    "Annual revenue grew 12% in the fiscal year.",
    "The board approved the merger after a long review.",
    "Revenue from services fell while product revenue rose.",
    "Weather was mild; the picnic went ahead.",
]

_SCRIPT = """
import importlib.abc, json, sys
BLOCKED = {blocked!r}

class Absent(importlib.abc.MetaPathFinder):
    # every finder is asked through this one, which answers "not here" for the blocked packages
    def __init__(self, finders):
        self.finders = finders
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            return None
        for f in self.finders:
            spec = f.find_spec(name, path, target) if hasattr(f, "find_spec") else None
            if spec is not None:
                return spec
        return None

sys.meta_path[:] = [Absent(list(sys.meta_path))]
out = {{}}
import importlib.util
assert importlib.util.find_spec("scipy") is None
from vrag_desktop.core.agents.memory_graph import MemoryGraph
import networkx as nx
g = nx.DiGraph([("a", "b"), ("b", "answer")])
out["ancestors"] = sorted(nx.ancestors(g, "answer"))
import bm25s
r = bm25s.BM25()
r.index(bm25s.tokenize({texts!r}, stopwords="en", show_progress=False), show_progress=False)
docs, scores = r.retrieve(bm25s.tokenize(["revenue"], stopwords="en", show_progress=False), k=2, show_progress=False)
out["bm25"] = [[int(d), round(float(s), 6)] for d, s in zip(docs[0], scores[0])]
out["backend"] = r.csc_backend
from vrag_desktop.core.embedders.minilm import MiniLMEmbedder
v = MiniLMEmbedder(device="cpu").embed_queries(["annual revenue"])
out["query"] = [round(float(x), 5) for x in v[0][:4]]
out["loaded"] = sorted(m for m in BLOCKED if m in sys.modules)
print(json.dumps(out))
"""


def test_graph_bm25_and_minilm_work_without_scipy() -> None:
    code = textwrap.dedent(_SCRIPT.format(blocked=BLOCKED, texts=TEXTS))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["ancestors"] == ["a", "b"] and out["loaded"] == [] and out["backend"] == "numpy"
    # the same BM25 ranking and scores as with scipy's backend, where it is installed
    import bm25s

    r = bm25s.BM25(csc_backend="scipy" if bm25s.SCIPY_AVAILABLE else "numpy")
    r.index(bm25s.tokenize(TEXTS, stopwords="en", show_progress=False), show_progress=False)
    docs, scores = r.retrieve(
        bm25s.tokenize(["revenue"], stopwords="en", show_progress=False), k=2, show_progress=False
    )
    assert out["bm25"] == [[int(d), round(float(s), 6)] for d, s in zip(docs[0], scores[0], strict=True)]
    assert {d for d, _ in out["bm25"]} == {0, 2}
    assert len(out["query"]) == 4 and any(abs(x) > 1e-4 for x in out["query"])
