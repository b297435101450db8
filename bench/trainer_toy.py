"""A toy training setup for the trainer benchmark, built offline under ``bench/out/trainer_toy``.

* ``model/``: a tiny random Qwen2-VL chat model (tests/tiny_vl_models.py, hidden size 64) whose
  tokenizer has the VRAG tags as single tokens;
* ``docs/``: two small PDFs (pymupdf), indexed into the corpus ``toy`` of ``data/`` with the app's
  CLI (default embedder: minilm, offline);
* ``ds.json``: a unified JSON dataset over them.

Idempotent: what exists is kept. Used by bench/trainer_bench.py; runnable on its own::

    .venv-trainer/bin/python bench/trainer_toy.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "bench" / "out" / "trainer_toy"
TAGS = ("<think>", "</think>", "<search>", "</search>", "<bbox>", "</bbox>", "<answer>", "</answer>")

PAGES = {
    "alpha.pdf": [
        "Alpha Corp annual report 2023. Revenue: 42 million dollars. Employees: 310.",
        "Alpha Corp outlook: new plants in Lyon and Turin, opening in 2025.",
    ],
    "beta.pdf": [
        "Beta Systems overview. Founded 1998 by two engineers from Bergen.",
        "Beta Systems headquarters are in Oslo, Norway, at the harbour front.",
    ],
}

EXAMPLES = [
    ("q1", "What was the revenue of Alpha Corp in 2023?", "42 million dollars", "alpha.pdf", 1),
    ("q2", "Where are the Beta headquarters?", "Oslo", "beta.pdf", 2),
    ("q3", "Where will Alpha Corp open new plants?", "Lyon and Turin", "alpha.pdf", 2),
    ("q4", "When was Beta Systems founded?", "1998", "beta.pdf", 1),
]


def _model(out: Path) -> Path:
    if (out / "config.json").is_file():
        return out
    sys.path.insert(0, str(ROOT / "tests"))
    from tiny_vl_models import build_tiny_qwen2_vl

    return build_tiny_qwen2_vl(out, with_lm_head=True, extra_tokens=TAGS)


def _docs(out: Path) -> Path:
    import pymupdf

    out.mkdir(parents=True, exist_ok=True)
    for name, texts in PAGES.items():
        path = out / name
        if path.is_file():
            continue
        doc = pymupdf.open()
        for text in texts:
            page = doc.new_page(width=595, height=842)
            page.insert_textbox(pymupdf.Rect(60, 80, 535, 400), text, fontsize=22)
            page.draw_rect(pymupdf.Rect(60, 450, 535, 760), color=(0.2, 0.3, 0.8), fill=(0.8, 0.85, 1))
        doc.save(path)
        doc.close()
    return out


def _index(docs: Path, data: Path) -> None:
    if (data / "corpora" / "toy" / "index").is_dir():
        return
    env = dict(os.environ, VRAG_DESKTOP_DATA_DIR=str(data))
    cmd = [sys.executable, "-m", "vrag_desktop", "index", str(docs), "--corpus", "toy", "--quiet"]
    subprocess.run(cmd, check=True, env=env, cwd=ROOT)


def _dataset(path: Path) -> Path:
    examples = [
        {
            "uid": uid,
            "query": q,
            "reference_answer": a,
            "meta_info": {"file_name": f, "reference_page": [p]},
        }
        for uid, q, a, f, p in EXAMPLES
    ]
    path.write_text(json.dumps({"examples": examples}), encoding="utf-8")
    return path


def build(root: Path = TOY) -> dict[str, Path]:
    """Paths of the toy setup (built where missing): model, data (the app data dir), dataset."""
    root.mkdir(parents=True, exist_ok=True)
    model = _model(root / "model")
    docs = _docs(root / "docs")
    _index(docs, root / "data")
    return {"model": model, "data": root / "data", "dataset": _dataset(root / "ds.json"), "docs": docs}


if __name__ == "__main__":
    for k, v in build().items():
        print(f"{k}: {v}")
