"""Listing evaluation folders and comparing two, on hand-made folders (no model, no index)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vrag_desktop.core.eval.compare import compare, list_evaluations, read_evaluation, read_rows


def make_eval(
    folder: Path,
    kind: str,
    rows: list[dict[str, Any]],
    *,
    complete: bool = True,
    created: float = 1.0,
    **fingerprint: Any,
) -> Path:
    folder.mkdir(parents=True)
    fp: dict[str, Any] = {"kind": kind, "dataset_sha256": "d1", "corpora": ["robots"]}
    if kind == "retrieval":
        fp |= {"embedder": ["minilm"], "hybrid": False, "ks": [1, 5]}
    else:
        fp |= {"agent": "vrag", "model": "m", "judge": "exact", "max_steps": 4}
    fp |= fingerprint
    (folder / "eval.json").write_text(
        json.dumps({"fingerprint": fp, "dataset": "/x/qs.json", "created": created})
    )
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary: dict[str, Any] = {"kind": kind, "items": len(rows), "complete": complete}
    if kind == "retrieval":
        summary |= {"ks": fp["ks"], "overall": {"hit@5": sum(r["hit@5"] for r in rows) / len(rows)}}
    else:
        summary["accuracy"] = sum(r["judge"] or 0 for r in rows) / len(rows)
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def rrow(uid: str, rank: int | None) -> dict[str, Any]:
    hit = lambda k: float(rank is not None and rank <= k)  # noqa: E731
    return {
        "uid": uid,
        "query": f"question {uid}",
        "rank": rank,
        "mrr": 1 / rank if rank else 0.0,
        "ndcg_original": hit(5),
        **{f"{m}@{k}": hit(k) for k in (1, 5) for m in ("hit", "recall", "ndcg")},
        "seconds": 0.01,
    }


def arow(uid: str, judge: float | None, run_id: str = "") -> dict[str, Any]:
    return {
        "uid": uid,
        "query": f"question {uid}",
        "judge": judge,
        "format": 1.0,
        "ndcg": 0.5,
        "reward": 0.5,
        "steps": 2,
        "seconds": 3.0,
        "error": None,
        "run_id": run_id or f"run-{uid}",
    }


def test_retrieval_flips_deltas_and_items_in_one_only(tmp_path: Path) -> None:
    a = make_eval(tmp_path / "a", "retrieval", [rrow("q1", 1), rrow("q2", 7), rrow("q3", 2), rrow("qa", 1)])
    b = make_eval(tmp_path / "b", "retrieval", [rrow("q1", 1), rrow("q2", 3), rrow("q3", 1), rrow("qb", 1)])
    c = compare(a, b)
    assert c.warnings == [] and c.differs == []
    assert c.k == 5
    assert [(d.uid, d.direction, d.flipped) for d in c.items] == [
        ("q2", "better", True),  # miss@5 -> hit@5
        ("q3", "better", False),  # rank 2 -> 1, a hit in both
        ("q1", "same", False),
    ]
    assert c.items[0].a == "miss@5 (rank 7)" and c.items[0].b == "hit@5 (rank 3)"
    assert [d.uid for d in c.better] == ["q2"] and c.worse == []
    assert c.only_a == ["qa"] and c.only_b == ["qb"]
    deltas = {m: (va, vb, d) for m, va, vb, d in c.deltas}
    assert deltas["hit@5"] == (2 / 3, 1.0, 1 - 2 / 3)
    assert deltas["hit@1"][2] == 1 / 3


def test_answers_flip_worse_and_verdict_lost(tmp_path: Path) -> None:
    a = make_eval(tmp_path / "a", "answers", [arow("q1", 1.0), arow("q2", 1.0), arow("q3", 0.0)])
    b = make_eval(tmp_path / "b", "answers", [arow("q1", 0.0), arow("q2", None), arow("q3", 0.0)])
    c = compare(a, b)
    got = {d.uid: (d.a, d.b, d.direction, d.flipped) for d in c.items}
    assert got["q1"] == ("correct", "incorrect", "worse", True)
    assert got["q2"] == ("correct", "no verdict", "worse", True)
    assert got["q3"] == ("incorrect", "incorrect", "same", False)
    assert c.items[-1].uid == "q3"
    assert c.items[0].run_a == c.items[0].uid.replace("q", "run-q")
    accuracy = next(d for d in c.deltas if d[0] == "accuracy")
    assert accuracy[1] == 2 / 3 and accuracy[2] == 0.0


def test_not_comparable_is_said(tmp_path: Path) -> None:
    base = make_eval(tmp_path / "a", "retrieval", [rrow("q1", 1)])
    other_ds = make_eval(tmp_path / "b", "retrieval", [rrow("q1", 1)], dataset_sha256="d2")
    other_emb = make_eval(tmp_path / "c", "retrieval", [rrow("q1", 1)], embedder=["qwen"])
    other_corpora = make_eval(tmp_path / "d", "retrieval", [rrow("q1", 1)], corpora=["robots", "x"])
    unfinished = make_eval(tmp_path / "e", "retrieval", [rrow("q1", 1)], complete=False)
    assert any("Different datasets" in w for w in compare(base, other_ds).warnings)
    assert any("different embedders" in w and "qwen" in w for w in compare(base, other_emb).warnings)
    assert compare(base, other_emb).differs == ["embedder: minilm → qwen"]
    w = compare(base, other_corpora).warnings
    assert any("Different corpora" in x for x in w) and not any("embedders" in x for x in w)
    assert any("incomplete" in x for x in compare(base, unfinished).warnings)
    ja = make_eval(tmp_path / "ja", "answers", [arow("q1", 1.0)])
    jb = make_eval(tmp_path / "jb", "answers", [arow("q1", 1.0)], judge="model:p:gpt")
    assert any("Different judges" in x for x in compare(ja, jb).warnings)
    assert any("do not measure the same thing" in x for x in compare(base, ja).warnings)
    assert compare(base, base).warnings == []


def test_list_evaluations_newest_first_damaged_with_reason(tmp_path: Path) -> None:
    root = tmp_path / "evaluations"
    make_eval(root / "old", "retrieval", [rrow("q1", 1)], created=1.0)
    make_eval(root / "new", "answers", [arow("q1", 1.0)], created=5.0)
    (root / "broken").mkdir()
    (root / "broken" / "eval.json").write_text("{not json")
    (root / "empty").mkdir()
    torn = make_eval(root / "torn", "retrieval", [rrow("q1", 1), rrow("q2", 2)], created=3.0)
    (torn / "summary.json").unlink()
    with open(torn / "results.jsonl", "a") as fh:
        fh.write('{"uid": "q3", "ra')
    infos = {i.name: i for i in list_evaluations(tmp_path)}
    assert list(infos)[:3] == ["new", "torn", "old"]
    assert "damaged" in (infos["broken"].problem or "")
    assert "no eval.json" in (infos["empty"].problem or "")
    assert infos["torn"].done == 2 and not infos["torn"].complete and infos["torn"].problem is None
    assert infos["new"].main_metric == ("accuracy", 1.0) and infos["new"].complete
    assert infos["old"].main_metric == ("hit@5", 1.0) and infos["old"].dataset == "qs"
    assert (torn / "results.jsonl").read_bytes().endswith(b'"ra')  # reading never truncates
    assert [r["uid"] for r in read_rows(torn)] == ["q1", "q2"]
    assert list_evaluations(tmp_path / "nowhere") == []
    assert read_evaluation(root / "broken").header == {}
