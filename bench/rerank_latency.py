#!/usr/bin/env python
"""What a reranker costs per query: one question and its fused top-50 through a cross-encoder.

The two candidate cross-encoders of the catalogue (ms-marco MiniLM-L6 and TinyBERT-L2), with
random weights of the real architecture (same shapes, same cost; no weights are downloaded, so this
says nothing about quality), and the real BERT uncased tokenizer (the offline MiniLM's: the same
30,522 word pieces). Passages are real English prose (the repo's docs), cut to the passage budget.
Timed end to end through :class:`vrag_desktop.core.search.rerank.CrossEncoder` (tokenising the
pairs, padding, the forward passes): the NumPy pass on 1 and 2 BLAS threads, and transformers on
torch with 2 threads (after one warm-up query each).

Run:  .venv/bin/python bench/rerank_latency.py [--queries 20] [--top 50]
Writes bench/out/rerank_latency.json and prints a markdown table (p50 / p95 ms per query).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vrag_desktop.core.models.catalogue_data import MS_MARCO_MINILM_L6, MS_MARCO_TINYBERT_L2  # noqa: E402
from vrag_desktop.core.search import rerank  # noqa: E402

SHAPES = {"MiniLM-L6 (384×6)": MS_MARCO_MINILM_L6, "TinyBERT-L2 (128×2)": MS_MARCO_TINYBERT_L2}
BUDGETS = (128, 256)
QUESTIONS = [
    "What was the total capital ratio at the end of the first quarter?",
    "How does the app resume an interrupted download?",
    "Which embedder is used when no GPU is available?",
    "What happens when a corpus index is damaged?",
    "How many pages of a document are indexed by default?",
]


def passages(n: int) -> list[str]:
    """``n`` chunks of real English prose, each ~3,000 characters (a page of text)."""
    text = " ".join(
        re.sub(r"[`#|*_\[\]()]", " ", p.read_text(encoding="utf-8"))
        for p in sorted((ROOT / "docs").glob("*.md"))
    )
    words = text.split()
    out, size = [], 450
    for i in range(n):
        start = (i * 997) % max(1, len(words) - size)
        out.append(" ".join(words[start : start + size]))
    return out


def build(folder: Path, config: dict[str, Any]) -> Path:
    """A random-weight cross-encoder of ``config``'s shape, with the real uncased BERT tokenizer."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from vrag_desktop.core.embedders.minilm import _model_dir

    torch.manual_seed(0)
    cfg = {
        k: v for k, v in config.items() if k not in ("model_type", "architectures", "id2label", "torch_dtype")
    }
    BertForSequenceClassification(BertConfig(**cfg, num_labels=1)).eval().save_pretrained(folder)
    shutil.copy(_model_dir() / "tokenizer.json", folder / "tokenizer.json")
    return folder


def _cpu() -> tuple[float, float]:
    """(seconds of CPU the whole machine was busy, this process's CPU seconds) so far (Linux)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        busy = (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # all but idle, iowait
    except (OSError, ValueError, IndexError):
        busy = float("nan")
    t = os.times()
    return busy, t.user + t.system


def time_queries(ce: rerank.CrossEncoder, texts: list[str], queries: int) -> tuple[list[float], float]:
    """Per-query milliseconds, and the share of the machine's CPUs other processes took meanwhile."""
    ce.scores(QUESTIONS[0], texts)  # warm-up: caches, the torch model's first call
    times = []
    busy0, own0, t0 = *_cpu(), time.perf_counter()
    for i in range(queries):
        start = time.perf_counter()
        ce.scores(QUESTIONS[i % len(QUESTIONS)], texts)
        times.append(1000 * (time.perf_counter() - start))
    busy1, own1 = _cpu()
    others = ((busy1 - busy0) - (own1 - own0)) / ((time.perf_counter() - t0) * (os.cpu_count() or 1))
    return times, max(0.0, others)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--top", type=int, default=50)
    ap.add_argument("--shape", action="append", help="only shapes whose name holds this (repeatable)")
    ap.add_argument("--budget", action="append", type=int, help="only these passage budgets (repeatable)")
    ap.add_argument("--pass", dest="passes", action="append", help="only passes whose name holds this")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "rerank_latency.json")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(2)
    texts = passages(args.top)
    rows = []
    with tempfile.TemporaryDirectory(prefix="vrag-rerank-bench-") as tmp:
        for shape, config in SHAPES.items():
            if args.shape and not any(s in shape for s in args.shape):
                continue
            folder = build(Path(tmp) / re.sub(r"\W+", "-", shape), config)
            for budget in args.budget or BUDGETS:
                for label, threads, budget_tokens in (
                    ("numpy 1 thread", 1, float("inf")),
                    ("numpy 2 threads", 2, float("inf")),
                    ("torch 2 threads", 2, 0.0),
                ):
                    if args.passes and not any(p in label for p in args.passes):
                        continue
                    rerank.NUMPY_THREADS, rerank.NUMPY_BUDGET = threads, budget_tokens
                    on_torch = label.startswith("torch")
                    # this process imported torch (to build the model): the NumPy rows must not see it
                    rerank._torch_loaded = lambda on_torch=on_torch: on_torch  # type: ignore[attr-defined]
                    ce = rerank.CrossEncoder(folder, passage_tokens=budget)
                    ms, others = time_queries(ce, texts, args.queries)
                    assert (ce._torch_model is not None) == on_torch, label  # the pass named ran
                    tokens = sum(len(ids) for ids, _ in ce.pairs(QUESTIONS[0], texts))
                    row = {
                        "model": shape,
                        "passage_tokens": budget,
                        "pass": label,
                        "p50_ms": float(np.percentile(ms, 50)),
                        "p95_ms": float(np.percentile(ms, 95)),
                        "tokens_per_query": tokens,
                        "others_cpu_share": others,
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    machine = {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "commit": commit.stdout.strip(),
        "top": args.top,
        "queries": args.queries,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    print(f"\n{machine}\n")
    print(
        f"| model (random weights) | passage tokens | pass | p50 ms | p95 ms | tokens per query (top {args.top}) "
        "| others' CPU |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['model']} | {r['passage_tokens']} | {r['pass']} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} | "
            f"{r['tokens_per_query']:,} | {r['others_cpu_share']:.0%} |"
        )


if __name__ == "__main__":
    main()
