"""Self-contained HTML reports of evaluations: tables and inline SVG plots, no scripts, no network.

Why hand-written SVG: the report must open offline on any machine, be attached to an email and
diffed, and the app must not load a plotting stack to write one; four kinds of plot are needed
(recall@k curve, bars per type, histograms of steps and latency).
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from typing import Any

from vrag_desktop.core.agents.names import agent_name
from vrag_desktop.core.eval.metrics import REWARD_NDCG
from vrag_desktop.core.eval.order import by_uid

__all__ = ["answers_report", "bars_svg", "histogram_svg", "line_svg", "page", "retrieval_report", "table"]

W, H, PAD = 420, 220, 36
CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#1d2733}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #d5dbe2;padding:3px 8px;text-align:left}
th{background:#eef2f6}td.n{text-align:right;font-variant-numeric:tabular-nums}
.bad{color:#a32020}.plots{display:flex;flex-wrap:wrap;gap:18px}figure{margin:0}
figcaption{font-size:12px;color:#56606b}svg text{font-size:11px;fill:#37414c}
"""


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}"
    return html.escape(str(v))


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{_fmt(c)}</td>' if isinstance(c, int | float) else f"<td>{_fmt(c)}</td>"
            for c in r
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _frame(title: str, inner: str) -> str:
    return (
        f'<figure><svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img">'
        f'<rect width="{W}" height="{H}" fill="#fbfcfd" stroke="#d5dbe2"/>{inner}</svg>'
        f"<figcaption>{html.escape(title)}</figcaption></figure>"
    )


def _y(v: float, top: float) -> float:
    return H - PAD - (H - 2 * PAD) * (v / top if top else 0)


def line_svg(title: str, xs: Sequence[float], ys: Sequence[float], top: float = 1.0) -> str:
    """A line through (x, y) points, x spread evenly, labelled with the x values."""
    if not xs:
        return _frame(title, "")
    step = (W - 2 * PAD) / max(len(xs) - 1, 1)
    pts = [(PAD + i * step, _y(y, top)) for i, y in enumerate(ys)]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
    inner = f'<polyline fill="none" stroke="#2a6fb0" stroke-width="2" points="{line}"/>'
    for (x, y), xv, yv in zip(pts, xs, ys, strict=True):
        inner += f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="#2a6fb0"/>'
        inner += f'<text x="{x:.1f}" y="{H - PAD + 14}" text-anchor="middle">{xv:g}</text>'
        inner += f'<text x="{x:.1f}" y="{y - 7:.1f}" text-anchor="middle">{yv:.2f}</text>'
    return _frame(title, inner)


def bars_svg(
    title: str, labels: Sequence[str], values: Sequence[float], top: float = 1.0, value_fmt: str = ".2f"
) -> str:
    """One bar per label (values between 0 and ``top``), each topped by its value in ``value_fmt``."""
    if not labels:
        return _frame(title, "")
    slot = (W - 2 * PAD) / len(labels)
    inner = ""
    for i, (lab, v) in enumerate(zip(labels, values, strict=True)):
        x, y = PAD + i * slot + slot * 0.15, _y(v, top)
        inner += f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot * 0.7:.1f}" height="{H - PAD - y:.1f}" fill="#4b8bc4"/>'
        inner += (
            f'<text x="{x + slot * 0.35:.1f}" y="{y - 4:.1f}" text-anchor="middle">{v:{value_fmt}}</text>'
        )
        name = html.escape(lab[:18])
        inner += f'<text x="{x + slot * 0.35:.1f}" y="{H - PAD + 14}" text-anchor="middle">{name}</text>'
    return _frame(title, inner)


def histogram_svg(title: str, values: Sequence[float], bins: int = 10) -> str:
    """Counts of ``values`` in ``bins`` equal bins between their minimum and maximum; one bar when
    they are all equal (a batch timed as one gives every question the same time)."""
    if not values:
        return _frame(title, "")
    lo, hi = min(values), max(values)
    if hi == lo:
        return bars_svg(title, [f"{lo:.3g}"], [float(len(values))], top=float(len(values)), value_fmt=".0f")
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width))] += 1
    labels = [f"{lo + i * width:.3g}" for i in range(bins)]
    return bars_svg(title, labels, [float(c) for c in counts], top=float(max(counts)), value_fmt=".0f")


def page(title: str, sections: Sequence[str]) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M")
    return (
        f"<!doctype html><html lang=en><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<style>{CSS}</style><h1>{html.escape(title)}</h1><p>Written {stamp} by VRAG Desktop.</p>"
        + "".join(sections)
        + "</html>\n"
    )


def _problems(summary: dict[str, Any]) -> str:
    bad = (summary.get("not_asked") or []) + (summary.get("not_scored") or [])
    if not bad:
        return ""
    rows = [(p["uid"], p["why"]) for p in bad]
    return f'<h2 class="bad">{len(bad)} item(s) not scored</h2>' + table(["uid", "why"], rows)


def _report(title: str, summary: dict[str, Any], overall: str, plots: str, per_item: str) -> str:
    """The page both evaluations write: settings, overall, plots, what was not scored, per item."""
    settings = summary.get("settings") or {}
    return page(
        title,
        [
            table(
                ["setting", "value"],
                [[k, agent_name(v) if k == "agent" else str(v)] for k, v in settings.items()],
            ),
            "<h2>Overall</h2>",
            overall,
            plots,
            _problems(summary),
            "<h2>Per question</h2>",
            per_item,
        ],
    )


def retrieval_report(summary: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    """The retrieval evaluation's report: overall table, recall@k curve, per-type bars, per item."""
    ks = summary["ks"]
    ov = summary["overall"]
    overall = table(
        ["metric", *[f"@{k}" for k in ks]],
        [[m, *[ov.get(f"{m}@{k}") for k in ks]] for m in ("recall", "hit", "ndcg")],
    ) + table(
        ["MRR", REWARD_NDCG, "items"],
        [[ov.get("mrr"), ov.get("ndcg_original"), summary["items"]]],
    )
    types = summary["by_query_type"]
    k5 = 5 if 5 in ks else ks[-1]
    plots = (
        '<div class="plots">'
        + line_svg("recall@k", ks, [ov.get(f"recall@{k}") or 0.0 for k in ks])
        + bars_svg(
            f"recall@{k5} by query type", list(types), [t.get(f"recall@{k5}") or 0.0 for t in types.values()]
        )
        + histogram_svg("search time per question (ms)", [1000 * r.get("seconds", 0.0) for r in rows])
        + "</div>"
    )
    per_item = table(
        ["uid", "question", "rank", f"recall@{k5}", f"NDCG@{k5}", REWARD_NDCG, "evidence", "first hits"],
        [
            [
                r["uid"],
                r["query"][:90],
                r["rank"] if r["rank"] is not None else "–",
                r[f"recall@{k5}"],
                r.get(f"ndcg@{k5}"),
                r["ndcg_original"],
                ", ".join(r["golden"]),
                ", ".join(r["retrieved"][:3]),
            ]
            for r in by_uid(rows)
        ],
    )
    return _report("Retrieval evaluation", summary, overall, plots, per_item)


def answers_report(summary: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    """The answer evaluation's report: overall table, accuracy per query type, steps and latency
    histograms, and every question with its run id (open it in History)."""
    overall = table(
        ["accuracy", "format", REWARD_NDCG, "reward", "items", "judge failures", "errors"],
        [
            [
                summary["accuracy"],
                summary["format"],
                summary["ndcg"],
                summary["reward"],
                summary["items"],
                summary["judge_failures"],
                summary["errors"],
            ]
        ],
    )
    types = summary["by_query_type"]
    plots = (
        '<div class="plots">'
        + bars_svg("accuracy by query type", list(types), [t.get("accuracy") or 0.0 for t in types.values()])
        + histogram_svg("agent steps per question", [float(r["steps"]) for r in rows])
        + histogram_svg("seconds per question", [r["seconds"] for r in rows])
        + "</div>"
    )
    per_item = table(
        [
            "uid",
            "question",
            "answer",
            "reference",
            "judge",
            "format",
            REWARD_NDCG,
            "reward",
            "steps",
            "s",
            "run",
            "note",
        ],
        [
            [
                r["uid"],
                r["query"][:90],
                (r["answer"] or "–")[:80],
                r["reference"][:80],
                r["judge"],
                r["format"],
                r["ndcg"],
                r["reward"],
                r["steps"],
                r["seconds"],
                r["run_id"] or "–",
                "; ".join(x for x in (r.get("error"), r.get("judge_error"), r.get("note")) if x) or "",
            ]
            for r in by_uid(rows)
        ],
    )
    return _report("Answer evaluation", summary, overall, plots, per_item)
