"""An evaluation's ``results.jsonl`` with a damaged line: the line alone is set aside (kept in
``results.damaged.txt``), the results after it are kept, a torn last line is dropped, and the person
is told. Real files; the second test is the real ``eval retrieval`` command over the sample index."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import SAMPLE, cli

from vrag_desktop.core.eval.compare import read_rows
from vrag_desktop.core.eval.store import DAMAGED, RESULTS, EvalStore

HEAD = {"fingerprint": {"kind": "retrieval", "ks": [5]}}


def _line(uid: str) -> bytes:
    return (json.dumps({"uid": uid, "recall@5": 1.0}) + "\n").encode()


def test_a_damaged_line_costs_its_own_item_only(tmp_path: Path) -> None:
    folder = tmp_path / "ev"
    store = EvalStore.open(folder, HEAD)
    for i in range(1, 11):
        store.add({"uid": f"q{i}", "recall@5": 1.0})
    lines = (folder / RESULTS).read_bytes().splitlines(keepends=True)
    bad = [b'{"uid": "q4", "recall@5": 1.\x00\x00\x00\r garbage\n', b'["not", "a row"]\n', b"\xff\xfe\n"]
    damaged = [*lines[:3], bad[0], *lines[4:6], *bad[1:], *lines[6:], b'{"uid": "q11", "rec']
    (folder / RESULTS).write_bytes(b"".join(damaged))
    assert sorted(r["uid"] for r in read_rows(folder)) == sorted(f"q{i}" for i in range(1, 11) if i != 4)

    again = EvalStore.open(folder, HEAD)
    assert sorted(again.results) == sorted(f"q{i}" for i in range(1, 11) if i != 4)  # q5…q10 kept
    assert not again.done("q4") and not again.done("q11")  # the damaged and the torn one: redone
    assert again.damaged == 3
    assert again.warning == f"3 damaged lines in {RESULTS} moved to {DAMAGED}; their items are done again"
    assert (folder / DAMAGED).read_bytes() == b"".join(bad)  # never thrown away
    assert (folder / RESULTS).read_bytes() == b"".join(lines[:3] + lines[4:])  # the rest byte for byte
    again.add({"uid": "q4", "recall@5": 0.5})

    third = EvalStore.open(folder, HEAD)  # clean now: nothing more to say, nothing moved twice
    assert third.warning is None and len(third.results) == 10
    assert (folder / DAMAGED).read_bytes() == b"".join(bad)
    EvalStore.open(folder, HEAD, restart=True)
    assert not (folder / DAMAGED).exists()  # a restart deletes the earlier results, these too


def test_eval_retrieval_redoes_only_the_damaged_item_and_says_so(sample_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "ev"
    args = ("eval", "retrieval", "--dataset", str(SAMPLE / "questions.json"), "--out", str(out), "--json")
    assert cli(*args, data_dir=sample_index).returncode == 0
    lines = (out / RESULTS).read_bytes().splitlines(keepends=True)
    lost = json.loads(lines[4])["uid"]
    (out / RESULTS).write_bytes(b"".join([*lines[:4], b"#### disk error ####\n", *lines[5:]]))
    (out / "summary.json").unlink()
    proc = cli(*args, data_dir=sample_index)
    assert proc.returncode == 0, proc.stderr
    assert f"1 damaged line in {RESULTS} moved to {DAMAGED}" in proc.stderr
    again = (out / RESULTS).read_bytes().splitlines(keepends=True)
    assert again[:-1] == lines[:4] + lines[5:]  # 23 results kept byte for byte, not redone
    assert json.loads(again[-1])["uid"] == lost  # the damaged item alone was done again
    summary = json.loads(proc.stdout)
    assert summary["items"] == 24 and summary["complete"]
    assert (out / DAMAGED).read_bytes() == b"#### disk error ####\n"
