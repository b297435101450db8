"""`vrag-desktop eval retrieval` as a user runs it: the real CLI over the indexed sample corpus and
its labelled questions; resume after a kill; items that cannot be scored named, the rest scored."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import SAMPLE, cli

from vrag_desktop.core.datasets import DatasetItem, load_dataset, write_unified
from vrag_desktop.core.eval.matching import CorpusFile, match_dataset


def _eval(data: Path, dataset: Path, out: Path, *extra: str) -> dict:
    proc = cli(
        "eval", "retrieval", "--dataset", str(dataset), "--out", str(out), "--json", *extra, data_dir=data
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_sample_questions_end_to_end(sample_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "ev"
    summary = _eval(sample_index, SAMPLE / "questions.json", out)
    assert summary["items"] == 24 and summary["not_scored"] == [] and summary["complete"]
    ov = summary["overall"]
    assert ov["recall@5"] >= 0.9 and ov["hit@1"] >= 0.7 and 0 < ov["mrr"] <= 1
    assert ov["recall@1"] <= ov["recall@3"] <= ov["recall@5"] <= ov["recall@10"]
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 24 and {r["uid"] for r in rows} == {f"q{i}" for i in range(1, 25)}
    first = next(r for r in rows if r["uid"] == "q1")
    assert (
        first["golden"] == ["northwind_annual_report_2024_1"] and first["retrieved"][0] == first["golden"][0]
    )
    html = (out / "report.html").read_text()
    assert html.startswith("<!doctype html>") and html.count("<svg") == 3 and "q24" in html
    assert "http" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing fetched
    assert json.loads((out / "summary.json").read_text())["overall"] == ov


def test_a_killed_evaluation_resumes_without_redoing_an_item(sample_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "ev"
    _eval(sample_index, SAMPLE / "questions.json", out)
    lines = (out / "results.jsonl").read_bytes().splitlines(keepends=True)
    # what `kill -9` in the middle of item 11's write leaves: 10 whole lines and a torn one
    kept = b"".join(lines[:10])
    (out / "results.jsonl").write_bytes(kept + lines[10][:37])
    (out / "summary.json").unlink()
    summary = _eval(sample_index, SAMPLE / "questions.json", out)
    again = (out / "results.jsonl").read_bytes()
    assert again.startswith(kept)  # finished items kept byte for byte, not redone
    uids = [json.loads(x)["uid"] for x in again.splitlines()]
    assert len(uids) == 24 == len(set(uids)) and summary["items"] == 24 and summary["complete"]


def test_other_settings_in_the_same_folder_are_refused(sample_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "ev"
    _eval(sample_index, SAMPLE / "questions.json", out, "-k", "5")
    proc = cli(
        "eval",
        "retrieval",
        "--dataset",
        str(SAMPLE / "questions.json"),
        "--out",
        str(out),
        "-k",
        "3",
        data_dir=sample_index,
    )
    assert proc.returncode == 1 and "other settings" in proc.stderr and "ks" in proc.stderr
    assert "Traceback" not in proc.stderr
    summary = _eval(sample_index, SAMPLE / "questions.json", out, "-k", "3", "--restart")
    assert summary["ks"] == [3] and summary["items"] == 24


def test_items_that_cannot_be_scored_are_named_and_the_rest_go_on(sample_index: Path, tmp_path: Path) -> None:
    ds = tmp_path / "mixed.json"
    write_unified(
        ds,
        [
            DatasetItem(
                "ok",
                "How heavy a load can the Atlas robot carry?",
                "450 kg",
                "northwind_annual_report_2024.pdf",
                (3,),
            ),
            DatasetItem("missing", "What is in the appendix?", "x", "appendix.pdf", (1,)),
            DatasetItem("late", "What is on page 40?", "x", "northwind_annual_report_2024.pdf", (40,)),
            DatasetItem("nofile", "Who wrote it?", "x"),
            DatasetItem("image", "What colour is the lighthouse?", "red and white", "harbor_lighthouse.jpg"),
            # no reference answer yet: retrieval needs none, so it is scored
            DatasetItem(
                "unanswered", "Which region sold most?", "", "northwind_annual_report_2024.pdf", (2,)
            ),
            # a 0-based slip in one item: named, the rest go on
            DatasetItem("zero", "What is on the cover?", "x", "northwind_annual_report_2024.pdf", (0,)),
            # a copy-paste slip: the first item's uid again (the first is kept, this one named)
            DatasetItem(
                "ok", "Who signed the letter?", "Maren Alvarez", "northwind_annual_report_2024.pdf", (1,)
            ),
        ],
    )
    summary = _eval(sample_index, ds, tmp_path / "ev")
    assert summary["items"] == 3 and summary["complete"]  # "ok", "image" and "unanswered"
    why = {p["uid"]: p["why"] for p in summary["not_scored"]}
    assert set(why) == {"missing", "late", "nofile", "zero", "ok"}
    assert "examples 1 and 8 share the uid 'ok': example 8 left out" in why["ok"]
    assert "page 0" in why["zero"] and "0-based" in why["zero"]
    assert "appendix.pdf is not in the indexed files of sample" in why["missing"]
    assert "[40]" in why["late"] and "has 8 page(s)" in why["late"]
    assert "names no evidence file" in why["nofile"]
    html = (tmp_path / "ev" / "report.html").read_text()
    assert "5 item(s) not scored" in html and "appendix.pdf" in html


def test_bad_datasets_are_clear_errors(sample_index: Path, tmp_path: Path) -> None:
    cases = {
        "dup.json": (
            '{"examples": [{"uid": 1, "query": "a", "reference_answer": "b"},'
            ' {"uid": 1, "query": "c", "reference_answer": "d"}]}',
            "share the uid '1'",
        ),
        "zero.json": (
            '{"examples": [{"uid": 1, "query": "a", "reference_answer": "b",'
            ' "meta_info": {"file_name": "northwind_annual_report_2024.pdf", "reference_page": [0]}}]}',
            "0-based",  # the only item: named, and nothing is left to score
        ),
        "no_query.json": ('{"examples": [{"uid": 1, "reference_answer": "b"}]}', '"query" must be'),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        proc = cli("eval", "retrieval", "--dataset", str(tmp_path / name), data_dir=sample_index)
        assert proc.returncode == 1 and message in proc.stderr and "Traceback" not in proc.stderr, (
            name,
            proc.stderr,
        )


def test_matching_by_relative_path_and_ambiguous_names() -> None:
    files = [
        CorpusFile("/c/2023/report.pdf", "c", 10),
        CorpusFile("/c/2024/report.pdf", "c", 12),
        CorpusFile("/c/photos/dock.jpg", "c", None),
        CorpusFile("/d/photos/dock.jpg", "d", None),
    ]
    items = [
        DatasetItem("a", "q", "r", "2024/report.pdf", (12,)),
        DatasetItem("b", "q", "r", "report.pdf", (1,)),
        DatasetItem("c", "q", "r", "dock.jpg"),
        DatasetItem("d", "q", "r", "dock.jpg", (1,)),
    ]
    m = match_dataset(items, files)
    assert [x.item.uid for x in m.matched] == ["a", "c"]
    assert m.matched[0].golden == ("report_12",) and m.matched[1].golden == ("dock",)
    assert "a hit on any counts" in m.matched[1].note
    why = dict(m.problems)
    assert "names 2 different files" in why["b"] and "has no pages" in why["d"]


def test_the_sample_question_list_reads_as_a_dataset() -> None:
    ds = load_dataset(SAMPLE / "questions.json")
    assert len(ds) == 24 and ds.items[0].uid == "q1"
    assert ds.items[0].file_name == "pdf/northwind_annual_report_2024.pdf" and ds.items[0].reference_page == (
        1,
    )
    assert any(i.file_name.endswith(".mp4") and i.reference_page == () for i in ds)


def test_a_cli_evaluation_with_its_own_settings_resumes_from_the_apps_request(
    sample_index: Path, tmp_path: Path
) -> None:
    """The app resumes a folder with the request read back from it: other cut-offs and dense search
    started on the command line must not make it a folder "of other settings"."""
    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.endpoints.profiles import ProfileStore
    from vrag_desktop.core.eval.compare import read_evaluation
    from vrag_desktop.core.eval.jobs import EvalRequest, open_job
    from vrag_desktop.core.paths import DataLayout

    out = tmp_path / "ev"
    first = _eval(sample_index, SAMPLE / "questions.json", out, "-k", "2", "-k", "4", "--dense")
    request = EvalRequest.resume(read_evaluation(out))
    assert (request.kind, request.ks, request.hybrid, request.out) == ("retrieval", (2, 4), False, str(out))
    layout = DataLayout.resolve(str(sample_index))
    job = open_job(
        request,
        Library(sample_index),
        layout.root,
        ProfileStore(layout.config),
    )
    try:
        assert job.folder == out
        summary = _drain(job.run(None))
    finally:
        job.close()
    assert summary["ks"] == [2, 4] and summary["overall"] == first["overall"]


def _drain(gen: object) -> dict:
    while True:
        try:
            next(gen)  # type: ignore[call-overload]
        except StopIteration as stop:
            return stop.value
