"""Retrieval on several real-document benchmarks at once, as a person measures it: each corpus
indexed with ``vrag-desktop index`` and scored with ``vrag-desktop eval retrieval`` (core/eval), in
dense and in hybrid mode, each twice: indexed as before document context ("plain", the chunk text
of corpora built before it) and with it ("context", the default for a new corpus).

Benchmarks (each a folder of documents and a ``questions.json``; the data is fetched, never committed):

- ``sample``: the bundled sample corpus (24 questions).
- ``bank``: scanned European bank reports, page-level evidence (bench/real_docs.py prepares it).
- ``filings``: 20 quarterly reports of five companies, document-level evidence
  (bench/get_filings.py prepares it).

A default change must not lose on any of them (issue 33). ``--fusion`` also scores, on both indexes
and in-process (the same core/eval scoring, the engine's fusion swapped), the earlier defaults (RRF
k = 60 and k = 5 with equal votes) and the named-document vote. ``--rerank MODEL`` (repeatable) also
scores hybrid search reranked by each cross-encoder (a downloaded id or a model folder: ``vrag-desktop models pull
cross-encoder/ms-marco-MiniLM-L-6-v2`` first, into each benchmark's data directory or as a folder).
Every row without ``--rerank`` is scored with ``--no-rerank``, whatever the reranker setting says.

    nice -n 10 .venv/bin/python bench/retrieval_suite.py [--only filings] [--fusion] [--rerank MODEL]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vrag_desktop.core.corpus.context import CONTEXT_META, CONTEXT_NONE  # noqa: E402
from vrag_desktop.core.corpus.library import Library  # noqa: E402

CLI = [str(ROOT / ".venv" / "bin" / "vrag-desktop")]
DATA = ROOT / "bench" / "data"
BENCHMARKS = {
    "filings": (DATA / "filings" / "pdfs", DATA / "filings" / "questions.json"),
    "bank": (DATA / "real_docs" / "pdfs", DATA / "real_docs" / "questions.json"),
    "sample": (ROOT / "resources" / "sample_corpus", ROOT / "resources" / "sample_corpus" / "questions.json"),
}
KS = (1, 5, 10)
CORPUS = "bench"


def _run(args: list[str], data_dir: Path) -> str:
    cmd = [*CLI, "--data-dir", str(data_dir), *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def index(name: str, variant: str, docs: Path) -> tuple[Path, float]:
    """The benchmark's corpus indexed by the CLI; "plain" is recorded as an index from before
    document context (the chunk text of every corpus built until now)."""
    data_dir = DATA / "suite" / name / variant
    if variant == "plain" and not (data_dir / "corpora" / CORPUS).exists():
        lib = Library(data_dir)
        corpus = lib.open(CORPUS, create=True)
        corpus.manifest.set_meta(CONTEXT_META, CONTEXT_NONE)
        corpus.close()
    t0 = time.perf_counter()
    _run(["index", "--corpus", CORPUS, "--quiet", str(docs)], data_dir)
    return data_dir, time.perf_counter() - t0


def evaluate(data_dir: Path, questions: Path, dense: bool, rerank: str | None = None) -> dict[str, Any]:
    args = ["eval", "retrieval", "--dataset", str(questions), "--corpus", CORPUS, "--json", "--restart", "-q"]
    args += [a for k in KS for a in ("-k", str(k))] + (["--dense"] if dense else [])
    args += ["--rerank", rerank] if rerank else ["--no-rerank"]
    out = "eval-dense" if dense else "eval-hybrid"
    if rerank:
        out += "-rerank-" + re.sub(r"\W+", "-", rerank).strip("-")
    args += ["--out", str(data_dir / out)]
    out = _run(args, data_dir)
    return dict(json.loads(out[out.index("{") :]))


def fusion_sweep(data_dir: Path, questions: Path) -> dict[str, dict[str, float]]:
    """Earlier defaults and alternatives scored in-process, in the same run (the engine's fusion
    swapped, the same core/eval scoring): what a default change is compared with."""
    from vrag_desktop.core.datasets import load_dataset
    from vrag_desktop.core.eval.matching import corpus_files, match_dataset
    from vrag_desktop.core.eval.retrieval import score_dataset
    from vrag_desktop.core.search import SearchEngine
    from vrag_desktop.core.search.fusion import Fusion

    engine = SearchEngine(Library(data_dir), [CORPUS], hybrid=True)
    match = match_dataset(load_dataset(questions), corpus_files(engine.corpora))
    out = {}
    rules = {
        "RRF k=60, equal votes (the hybrid when issue 33 was filed)": Fusion(k=60, confidence=0),
        "RRF k=5, equal votes (the default before confidence)": Fusion(confidence=0),
        "default + named-document vote 1": Fusion(names_weight=1),
    }
    for label, fusion in rules.items():
        engine.fusion = fusion
        summary, _ = score_dataset(match, engine.search_batch, ks=KS)
        out[label] = {m: summary["overall"][m] for m in _METRICS} | {"by_type": _by_type(summary)}
    engine.close()
    return out


def _by_type(summary: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {t: {m: v[m] for m in [*_METRICS, "items"]} for t, v in summary.get("by_query_type", {}).items()}


_METRICS = [f"recall@{k}" for k in KS] + ["mrr"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", choices=list(BENCHMARKS))
    ap.add_argument("--fusion", action="store_true", help="also score the earlier fusion defaults")
    ap.add_argument(
        "--rerank", action="append", default=[], metavar="MODEL", help="also score hybrid reranked by MODEL"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "retrieval_suite.json")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    for name in args.only or list(BENCHMARKS):
        docs, questions = BENCHMARKS[name]
        if not questions.exists():
            print(f"{name}: no {questions} (prepare it first: see the module docstring)")
            continue
        rows: dict[str, Any] = {}
        for variant in ("plain", "context"):
            data_dir, seconds = index(name, variant, docs)
            print(f"{name}/{variant}: index ready ({seconds:.0f} s)", flush=True)
            for dense in (True, False):
                summary = evaluate(data_dir, questions, dense)
                rows[f"{variant} {'dense' if dense else 'hybrid'}"] = {
                    **{m: summary["overall"][m] for m in _METRICS},
                    "items": summary["items"],
                    "ms_p50": summary.get("search_ms_p50"),
                    "by_type": _by_type(summary),
                }
            for model in args.rerank:
                summary = evaluate(data_dir, questions, False, model)
                rows[f"{variant} hybrid+rerank:{model}"] = {
                    **{m: summary["overall"][m] for m in _METRICS},
                    "items": summary["items"],
                    "ms_p50": summary.get("search_ms_p50"),
                }
            if args.fusion:
                rows[f"fusion {variant}"] = fusion_sweep(data_dir, questions)
        results[name] = rows
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2))
        print(f"\n{name}")
        print("| index | mode | items | recall@1 | recall@5 | recall@10 | MRR |")
        print("|---|---|---|---|---|---|---|")
        for label, r in rows.items():
            if label.startswith("fusion"):
                for w, m in r.items():
                    print(
                        f"| {label.split()[1]} | {w} | | {m['recall@1']:.3f} | {m['recall@5']:.3f} | "
                        f"{m['recall@10']:.3f} | {m['mrr']:.3f} |"
                    )
                continue
            variant, mode = label.split(maxsplit=1)
            print(
                f"| {variant} | {mode} | {r['items']} | {r['recall@1']:.3f} | {r['recall@5']:.3f} | "
                f"{r['recall@10']:.3f} | {r['mrr']:.3f} |",
                flush=True,
            )
        print_by_type(rows)


def print_by_type(rows: dict[str, Any]) -> None:
    """Per evidence (or query) type, as the dataset labels it: each CLI row's scores."""
    print("\n| type | items | index | mode | recall@1 | recall@5 | recall@10 | MRR |")
    print("|---|---|---|---|---|---|---|---|")
    flat: list[tuple[str, str, dict[str, Any]]] = []
    for label, r in rows.items():
        variant, mode = label.split(maxsplit=1)
        if label.startswith("fusion"):  # "fusion <variant>": the in-process rules
            flat += [(mode, rule, m) for rule, m in r.items()]
        else:
            flat.append((variant, mode, r))
    types = sorted({t for _, _, r in flat for t in r.get("by_type", {})})
    for t in types:
        for variant, mode, r in flat:
            m = r.get("by_type", {}).get(t)
            if m is None:
                continue
            print(
                f"| {t} | {m['items']} | {variant} | {mode} | {m['recall@1']:.3f} | {m['recall@5']:.3f} | "
                f"{m['recall@10']:.3f} | {m['mrr']:.3f} |"
            )


if __name__ == "__main__":
    main()
