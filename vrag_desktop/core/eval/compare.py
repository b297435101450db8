"""Reading evaluation folders back, and comparing two: which items got better or worse, by how much
the means moved, and why the two might not be comparable at all.

Why warnings and not refusals: comparing two embedders on the same corpora is the point of an
experiment, but comparing two datasets or two judges usually is a mistake; the person decides,
told plainly. Reading never writes (a torn last line is skipped, not truncated: a running
evaluation may own the folder) and never raises for a damaged folder: it is listed with the reason.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrag_desktop.core.agents.names import agent_name
from vrag_desktop.core.eval.metrics import REWARD_NDCG
from vrag_desktop.core.eval.order import natural_key
from vrag_desktop.core.eval.store import HEADER, REPORT, RESULTS, SUMMARY, EvalError, parse_results

__all__ = [
    "Comparison",
    "EvalInfo",
    "ItemDiff",
    "compare",
    "item_outcome",
    "list_evaluations",
    "read_evaluation",
    "read_rows",
]

CORRECT, INCORRECT, NO_VERDICT = "correct", "incorrect", "no verdict"
BETTER, WORSE, SAME = "better", "worse", "same"
ANSWER_METRICS = ("accuracy", "format", "ndcg", "reward", "steps", "seconds")
_ANSWER_FIELDS = {"accuracy": "judge"}


@dataclass
class EvalInfo:
    """One evaluation folder as listed: its settings, its summary when written, or why it cannot be read."""

    folder: Path
    header: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    done: int = 0  # rows in results.jsonl
    problem: str | None = None

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def fingerprint(self) -> dict[str, Any]:
        fp = self.header.get("fingerprint")
        return fp if isinstance(fp, dict) else {}

    @property
    def kind(self) -> str:
        return str(self.fingerprint.get("kind") or (self.summary or {}).get("kind") or "?")

    @property
    def dataset(self) -> str:
        return Path(str(self.header.get("dataset") or "?")).stem

    @property
    def corpora(self) -> list[str]:
        return [str(c) for c in self.fingerprint.get("corpora") or []]

    @property
    def created(self) -> float | None:
        c = self.header.get("created")
        return float(c) if isinstance(c, int | float) else None

    @property
    def complete(self) -> bool:
        return bool(self.summary and self.summary.get("complete"))

    @property
    def report(self) -> Path:
        return self.folder / REPORT

    @property
    def main_metric(self) -> tuple[str, float | None]:
        """The one number the list shows: accuracy for answers, hit@k (k=5 or the largest) for retrieval."""
        s = self.summary or {}
        if self.kind == "answers":
            return "accuracy", _num(s.get("accuracy"))
        k = main_k(s.get("ks") or self.fingerprint.get("ks") or [])
        if k is None:
            return "hit@k", None
        return f"hit@{k}", _num((s.get("overall") or {}).get(f"hit@{k}"))


def main_k(ks: Iterable[Any]) -> int | None:
    cuts = sorted(int(k) for k in ks if isinstance(k, int))
    if not cuts:
        return None
    return 5 if 5 in cuts else cuts[-1]


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def read_rows(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The result rows, in file order (a later row for the same uid wins); a torn last line and
    damaged lines are skipped, as a resume would (nothing is written here)."""
    path = Path(folder) / RESULTS
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return list(parse_results(data).rows.values())


def read_evaluation(folder: str | os.PathLike[str]) -> EvalInfo:
    """One folder's header, summary and row count; ``problem`` says what is damaged or missing."""
    info = EvalInfo(Path(folder))
    head = info.folder / HEADER
    try:
        header = _read_json(head)
        if not isinstance(header, dict):
            raise ValueError("not a JSON object")
        info.header = header
    except FileNotFoundError:
        info.problem = f"no {HEADER}: not an evaluation folder, or its start was interrupted"
        return info
    except (OSError, ValueError) as exc:
        info.problem = f"{HEADER} is damaged ({exc})"
        return info
    try:
        summary = _read_json(info.folder / SUMMARY)
        info.summary = summary if isinstance(summary, dict) else None
        if info.summary is None:
            info.problem = f"{SUMMARY} is damaged (not a JSON object)"
    except FileNotFoundError:
        pass  # killed before it ended: incomplete, resumable
    except (OSError, ValueError) as exc:
        info.problem = f"{SUMMARY} is damaged ({exc}); resume the evaluation to write it again"
    try:
        info.done = len(read_rows(info.folder))
    except OSError as exc:
        info.problem = f"{RESULTS} cannot be read ({exc.strerror or exc})"
    return info


def list_evaluations(data_dir: str | os.PathLike[str]) -> list[EvalInfo]:
    """Every folder under ``<data>/evaluations``, newest first; damaged ones listed with the reason."""
    from vrag_desktop.core.paths import DataLayout

    root = DataLayout(Path(data_dir)).evaluations
    try:
        folders = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise EvalError(f"cannot list the evaluations in {root}: {exc.strerror or exc}") from exc
    infos = [read_evaluation(p) for p in folders]
    return sorted(infos, key=lambda i: (i.created or 0.0, i.name), reverse=True)


# --------------------------------------------------------------------------- per item
def item_outcome(kind: str, row: dict[str, Any], k: int | None = None) -> tuple[str, float | None]:
    """What happened to one item, in words, and a number to order by (higher is better).

    Answers: correct / incorrect / no verdict (the judge's score). Retrieval: ``hit@k`` / ``miss@k``
    with the rank of the first evidence page (1/rank)."""
    if kind == "answers":
        judge = _num(row.get("judge"))
        if judge is None:
            return NO_VERDICT, None
        return (CORRECT if judge >= 0.5 else INCORRECT), judge
    rank = row.get("rank")
    rank = rank if isinstance(rank, int) and rank > 0 else None
    score = 1.0 / rank if rank else 0.0
    if k is None:
        return (f"rank {rank}" if rank else "not found"), score
    hit = rank is not None and rank <= k
    return (f"hit@{k}" if hit else f"miss@{k}") + (f" (rank {rank})" if rank else ""), score


@dataclass(frozen=True)
class ItemDiff:
    """One item in both evaluations: its outcome in each, and which way it moved from A to B."""

    uid: str
    question: str
    a: str
    b: str
    a_score: float | None
    b_score: float | None
    direction: str  # better | worse | same
    flipped: bool  # the outcome itself changed (correct <-> incorrect, hit <-> miss)
    run_a: str | None = None
    run_b: str | None = None


@dataclass
class Comparison:
    """A (the baseline) against B; ``items`` lists flipped items first, then other changes."""

    a: EvalInfo
    b: EvalInfo
    items: list[ItemDiff]
    only_a: list[str]
    only_b: list[str]
    deltas: list[tuple[str, float | None, float | None, float | None]]  # metric, A, B, B - A
    warnings: list[str]
    k: int | None = None
    differs: list[str] = field(default_factory=list)  # the settings that differ, "key: A → B"

    @property
    def better(self) -> list[ItemDiff]:
        return [d for d in self.items if d.flipped and d.direction == BETTER]

    @property
    def worse(self) -> list[ItemDiff]:
        return [d for d in self.items if d.flipped and d.direction == WORSE]


def _mean(values: Iterable[Any]) -> float | None:
    got = [float(v) for v in values if _num(v) is not None]
    return sum(got) / len(got) if got else None


def _metrics(kind: str, ks: Sequence[int]) -> list[tuple[str, str]]:
    """(label, row field) of the means compared."""
    if kind == "answers":
        return [(REWARD_NDCG if m == "ndcg" else m, _ANSWER_FIELDS.get(m, m)) for m in ANSWER_METRICS]
    out = [("mrr", "mrr"), (REWARD_NDCG, "ndcg_original")]
    for k in ks:
        out += [(f"{m}@{k}", f"{m}@{k}") for m in ("hit", "recall", "ndcg")]
    return out


def _warnings(a: EvalInfo, b: EvalInfo) -> list[str]:
    fa, fb = a.fingerprint, b.fingerprint
    out: list[str] = []
    if a.kind != b.kind:
        out.append(
            f"A is a {a.kind} evaluation and B a {b.kind} one: their outcomes do not measure the same thing."
        )
    if fa.get("dataset_sha256") != fb.get("dataset_sha256"):
        out.append(
            f"Different datasets (A: {a.dataset} {fa.get('dataset_sha256')}, B: {b.dataset} "
            f"{fb.get('dataset_sha256')}): the questions or their labels differ."
        )
    if sorted(a.corpora) != sorted(b.corpora):
        out.append(f"Different corpora (A: {', '.join(a.corpora)}; B: {', '.join(b.corpora)}).")
    elif fa.get("embedder") != fb.get("embedder") and a.kind == b.kind == "retrieval":
        out.append(
            f"The same corpora indexed with different embedders (A: {', '.join(fa.get('embedder') or [])}; "
            f"B: {', '.join(fb.get('embedder') or [])}): the differences may come from the index, not the search."
        )
    if a.kind == b.kind == "answers" and fa.get("judge") != fb.get("judge"):
        out.append(
            f"Different judges (A: {fa.get('judge')}; B: {fb.get('judge')}): verdicts are not comparable."
        )
    for tag, info in (("A", a), ("B", b)):
        if info.problem:
            out.append(f"{tag} ({info.name}): {info.problem}.")
        elif not info.complete:
            out.append(f"{tag} ({info.name}) is incomplete ({info.done} item(s) done): resume it first.")
    return out


def compare(a_folder: str | os.PathLike[str], b_folder: str | os.PathLike[str]) -> Comparison:
    """A against B over the items both evaluated (raises EvalError when either has no readable header)."""
    a, b = read_evaluation(a_folder), read_evaluation(b_folder)
    for info in (a, b):
        if not info.header:
            raise EvalError(f"{info.folder} cannot be compared: {info.problem}")
    rows_a = {str(r["uid"]): r for r in read_rows(a.folder)}
    rows_b = {str(r["uid"]): r for r in read_rows(b.folder)}
    kind = a.kind if a.kind == b.kind else "mixed"
    ks_a = {k for k in (a.fingerprint.get("ks") or []) if isinstance(k, int)}
    ks_b = {k for k in (b.fingerprint.get("ks") or []) if isinstance(k, int)}
    common_ks = sorted(ks_a & ks_b)
    k = main_k(common_ks)
    items: list[ItemDiff] = []
    common = [uid for uid in rows_a if uid in rows_b]
    for uid in common:
        ra, rb = rows_a[uid], rows_b[uid]
        oa, sa = item_outcome(a.kind, ra, k)
        ob, sb = item_outcome(b.kind, rb, k)
        direction = SAME if sa is None or sb is None or sa == sb else BETTER if sb > sa else WORSE
        flipped = _head(oa) != _head(ob)
        if flipped and direction == SAME and kind == "answers":  # a verdict appeared or went away
            direction = BETTER if ob == CORRECT else WORSE if oa == CORRECT else SAME
        items.append(
            ItemDiff(
                uid,
                str(ra.get("query") or rb.get("query") or ""),
                oa,
                ob,
                sa,
                sb,
                direction,
                flipped,
                ra.get("run_id"),
                rb.get("run_id"),
            )
        )
    order = {BETTER: 1, WORSE: 0, SAME: 2}
    items.sort(key=lambda d: (not d.flipped, d.direction == SAME, order[d.direction], natural_key(d.uid)))
    deltas: list[tuple[str, float | None, float | None, float | None]] = []
    if kind != "mixed":
        for label, fld in _metrics(kind, common_ks):
            ma = _mean(rows_a[u].get(fld) for u in common)
            mb = _mean(rows_b[u].get(fld) for u in common)
            deltas.append((label, ma, mb, None if ma is None or mb is None else mb - ma))
    warnings = _warnings(a, b)
    if kind == "retrieval" and ks_a != ks_b:
        warnings.append(
            f"Different cut-offs (A: {sorted(ks_a)}, B: {sorted(ks_b)}): only {common_ks} compared."
        )
    only_a = sorted((u for u in rows_a if u not in rows_b), key=natural_key)
    only_b = sorted((u for u in rows_b if u not in rows_a), key=natural_key)
    fa, fb = a.fingerprint, b.fingerprint
    differs = [
        f"{key}: {_show(fa.get(key), key)} → {_show(fb.get(key), key)}"
        for key in sorted(set(fa) | set(fb))
        if fa.get(key) != fb.get(key)
    ]
    return Comparison(a, b, items, only_a, only_b, deltas, warnings, k, differs)


def _show(value: Any, key: str = "") -> str:
    if key == "agent" and isinstance(value, str):
        return agent_name(value)
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "–"
    return "–" if value is None else str(value)


def _head(outcome: str) -> str:
    return outcome.split(" (", 1)[0]
