"""The Evaluations dock on real work: a retrieval evaluation started from the dock on the indexed
robots corpus (progress to the end, the per-question table), one cancelled mid-way and resumed, two
compared (an item flipped), a damaged folder listed with its reason, and an answers evaluation whose
row opens its saved run."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from vrag_desktop.core.datasets import DatasetItem
from vrag_desktop.core.progress import Progress
from vrag_desktop.qt.evaluation.evaluations_panel import EvaluationsPanel
from vrag_desktop.qt.evaluation.report_view import COLUMNS, RUN_ROLE
from vrag_desktop.qt.evaluation.runner import EvalRequest

ATLAS = [
    "How heavy a load can the Atlas robot carry?",
    "What is the battery life of the Atlas warehouse robot?",
    "How fast can the Atlas robot go?",
]


def _panel(qtbot: Any, ctx: Any) -> EvaluationsPanel:
    panel = EvaluationsPanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(1000, 700)
    panel.show()
    return panel


def _listed(qtbot: Any, panel: EvaluationsPanel) -> None:
    with qtbot.waitSignal(panel.listed, timeout=5000):
        panel.refresh()


def _select(qtbot: Any, panel: EvaluationsPanel, *folders: Path) -> None:
    panel.list.clearSelection()
    with qtbot.waitSignal(panel.reportShown, timeout=5000, raising=False):
        for i in range(panel.list.topLevelItemCount()):
            item = panel.list.topLevelItem(i)
            if Path(item.data(0, Qt.ItemDataRole.UserRole + 1)) in folders:
                item.setSelected(True)


def _dataset(ctx: Any, name: str, count: int) -> Path:
    store = ctx.datasets
    for i in range(count):
        item = DatasetItem(f"q{i:03d}", ATLAS[i % len(ATLAS)], "450 kg", "robots.pdf", (2,))
        store.add_item(name, item, create=True)
    return store.path(name)


def _run(qtbot: Any, panel: EvaluationsPanel, start: Any, outcome: str = "done") -> str:
    with qtbot.waitSignal(panel.evaluationEnded, timeout=60000) as got:
        start()
    assert got.args[0] == outcome, got.args
    return str(got.args[1])


def test_a_retrieval_evaluation_from_the_dock(
    qtbot: Any, indexed: Any, reports: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _dataset(indexed, "atlas", 3)
    panel = _panel(qtbot, indexed)
    _listed(qtbot, panel)
    assert panel.list.topLevelItemCount() == 0 and "No evaluation yet" in panel.report.summary.text()
    dlg = panel.new_evaluation()
    assert dlg.dataset.currentText() == "atlas" and dlg.corpora.item(0).text() == "robots"
    assert not dlg.agent.isVisible()  # answers-only rows hidden for retrieval
    seen: list[Progress] = []
    panel.runner.progress.connect(seen.append)
    folder = Path(_run(qtbot, panel, dlg.accept))
    assert folder == indexed.data_dir / "evaluations" / "retrieval-atlas-robots"
    assert seen[-1].done == seen[-1].total == 3
    assert not panel.progress.isVisible() and reports == []
    qtbot.waitUntil(lambda: panel.list.topLevelItemCount() == 1, timeout=5000)
    row = [panel.list.topLevelItem(0).text(c) for c in range(7)]
    assert row[:3] == ["retrieval", "atlas", "robots"] and row[3]  # row[3]: the index's embedder
    assert row[5].startswith("hit@5 ") and row[6] == "complete"
    qtbot.waitUntil(lambda: panel.report.table.rowCount() == 3, timeout=5000)
    t = panel.report.table
    cells = {COLUMNS[c]: t.item(0, c).text() for c in range(len(COLUMNS))}
    assert cells["UID"] == "q000" and cells["Question"] == ATLAS[0]
    assert cells["Outcome"].startswith(("hit@5", "miss@5")) and cells["Rank"] in {"1", "2", "–"}
    assert t.isColumnHidden(COLUMNS.index("Judge"))
    assert "Retrieval" in panel.report.summary.text() and "complete" in panel.report.summary.text()
    qtbot.waitUntil(panel.html_button.isEnabled, timeout=5000)
    assert not panel.resume_button.isEnabled()
    _no_browser_says_where_the_report_is(panel, folder, monkeypatch)


def _no_browser_says_where_the_report_is(
    panel: EvaluationsPanel, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No program takes the HTML report: the person is told where it is, and can copy its path
    or open its folder (before, the button did nothing visible)."""
    from PySide6.QtCore import QUrl
    from PySide6.QtGui import QGuiApplication

    from vrag_desktop.qt.infra import open_file

    asked: list[QUrl] = []
    monkeypatch.setattr(open_file, "opener", lambda url: asked.append(url) or False)
    panel.html_button.click()
    box = panel.findChild(open_file.NotOpened)
    assert box is not None and box.isVisible() and not box.isModal()
    report = folder / "report.html"
    assert asked == [QUrl.fromLocalFile(str(report))]
    assert "HTML report" in box.text() and str(report) in box.informativeText()
    assert box.folder_button is not None and box.folder_button.text() == "Open folder"
    box.open_folder()  # no file manager either: the path goes to the clipboard, and it is said
    assert asked[-1] == QUrl.fromLocalFile(str(folder))
    QGuiApplication.clipboard().clear()
    box.copy_button.click()
    assert QGuiApplication.clipboard().text() == str(report)


def test_cancel_mid_way_then_resume(
    qtbot: Any, indexed: Any, monkeypatch: pytest.MonkeyPatch, reports: list[Any]
) -> None:
    from vrag_desktop.core.search.engine import SearchEngine

    path = _dataset(indexed, "many", 40)
    gate, calls = threading.Event(), [0]
    real = SearchEngine.search_batch

    def held(self: Any, queries: Any, k: int = 10) -> Any:
        calls[0] += 1
        if calls[0] == 2:  # the second batch waits until the test pressed Cancel
            gate.wait(10)
        return real(self, queries, k)

    monkeypatch.setattr(SearchEngine, "search_batch", held)
    panel = _panel(qtbot, indexed)

    def cancel_once(p: Progress) -> None:
        if p.done == 8 and not gate.is_set():  # only the first run: the resume starts at 8 or 16
            panel.cancel()
            gate.set()

    panel.runner.progress.connect(cancel_once)
    folder = Path(_run(qtbot, panel, lambda: panel.start(EvalRequest("retrieval", str(path))), "cancelled"))
    rows = (folder / "results.jsonl").read_text().splitlines()
    assert 8 <= len(rows) < 40
    qtbot.waitUntil(lambda: panel.list.topLevelItemCount() == 1, timeout=5000)
    _select(qtbot, panel, folder)
    assert "incomplete" in panel.list.topLevelItem(0).text(6)
    assert panel.resume_button.isEnabled() and "incomplete" in panel.report.summary.text()
    seen: list[Progress] = []
    panel.runner.progress.connect(seen.append)
    assert _run(qtbot, panel, panel.resume_button.click) == str(folder)
    assert seen[0].done == len(rows)  # the core resumed: finished items not redone
    uids = [json.loads(x)["uid"] for x in (folder / "results.jsonl").read_text().splitlines()]
    assert len(uids) == len(set(uids)) == 40
    qtbot.waitUntil(lambda: panel.list.topLevelItem(0).text(6) == "complete", timeout=5000)
    assert reports == []


def _copy_flipped(src: Path, dst: Path) -> None:
    """``dst``: ``src`` evaluated again, with its first item now missed."""
    shutil.copytree(src, dst)
    head = json.loads((dst / "eval.json").read_text())
    head["created"] += 60
    (dst / "eval.json").write_text(json.dumps(head))
    rows = [json.loads(x) for x in (dst / "results.jsonl").read_text().splitlines()]
    rows[0] |= {"rank": None, "mrr": 0.0, **{k: 0.0 for k in rows[0] if "@" in k}}
    (dst / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_compare_two_and_a_damaged_folder(qtbot: Any, indexed: Any) -> None:
    _dataset(indexed, "atlas", 3)
    panel = _panel(qtbot, indexed)
    a = Path(
        _run(
            qtbot,
            panel,
            lambda: panel.start(EvalRequest("retrieval", str(indexed.datasets.path("atlas")))),
        )
    )
    first = json.loads((a / "results.jsonl").read_text().splitlines()[0])
    b = a.parent / "retrieval-atlas-robots-again"
    _copy_flipped(a, b)
    broken = a.parent / "broken"
    broken.mkdir()
    (broken / "eval.json").write_text("{oops")
    _listed(qtbot, panel)
    states = {panel.list.topLevelItem(i).toolTip(0): panel.list.topLevelItem(i).text(6) for i in range(3)}
    assert states[str(broken)].startswith("damaged: eval.json is damaged")
    _select(qtbot, panel, a, b)
    assert [i.folder for i in panel.selected()] == [b, a], [(i.folder, i.created) for i in panel.infos]
    dlg = panel.compare_selected()
    with qtbot.waitSignal(dlg.compared, timeout=5000) as got:
        pass
    c = got.args[0]
    assert (dlg.a.currentData(), dlg.b.currentData()) == (str(a), str(b))
    assert dlg.b.count() == 2  # the damaged one cannot be compared
    if first["rank"] is not None and first["rank"] <= 5:
        assert [d.uid for d in c.worse] == [first["uid"]]
        assert dlg.items.item(0, 0).text() == "▼ worse" and dlg.items.item(0, 1).text() == first["uid"]
    assert not dlg.warnings.isVisible() and dlg.deltas.rowCount() > 0
    head = json.loads((b / "eval.json").read_text())
    head["fingerprint"]["embedder"] = ["another-embedder"]
    (b / "eval.json").write_text(json.dumps(head))
    with qtbot.waitSignal(dlg.compared, timeout=5000):
        dlg.refresh()
    assert dlg.warnings.isVisible() and "different embedders" in dlg.warnings.label.text()


def test_clicking_an_answers_row_opens_its_run(qtbot: Any, ctx: Any, tmp_path: Path) -> None:
    from qt.test_history_panel import record, vrag_events

    run_id = record(ctx.runs, "How heavy a load can Atlas carry?", vrag_events)
    folder = ctx.data_dir / "evaluations" / "answers-vrag-atlas-robots"
    folder.mkdir(parents=True)
    fp = {"kind": "answers", "dataset_sha256": "x", "corpora": ["robots"], "agent": "vrag", "judge": "exact"}
    (folder / "eval.json").write_text(
        json.dumps({"fingerprint": fp, "dataset": "/d/atlas.json", "created": 1})
    )
    row = {"uid": "a1", "query": "How heavy?", "judge": 1.0, "ndcg": 1.0, "steps": 3, "seconds": 4.2}
    rows = [
        row | {"run_id": run_id},
        row | {"uid": "a2", "judge": None, "judge_error": "timeout", "run_id": None},
    ]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    panel = _panel(qtbot, ctx)
    _listed(qtbot, panel)
    assert panel.list.topLevelItem(0).text(6) == "incomplete (2 done)"
    _select(qtbot, panel, folder)
    t = panel.report.table
    assert t.rowCount() == 2 and t.item(0, 0).data(RUN_ROLE) == run_id
    assert t.item(1, COLUMNS.index("Outcome")).text() == "no verdict"
    assert "timeout" in t.item(1, COLUMNS.index("Judge")).text()
    with qtbot.waitSignal(panel.openRunRequested, timeout=2000) as got:
        t.cellClicked.emit(0, 1)
    assert got.args == [run_id]


def test_the_dock_opens_in_the_right_column_from_the_view_menu(
    qtbot: Any, ctx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vrag_desktop.qt.main_window import MainWindow

    opened: list[str] = []
    monkeypatch.setattr(MainWindow, "open_run", lambda _self, run_id: opened.append(run_id))
    w = MainWindow(ctx, first_run=False)
    qtbot.addWidget(w)
    w.show()
    # hidden until used, then a tab of the right column (the wide one), not of the side column
    assert not w.evaluations_dock.isVisibleTo(w)
    view = next(a.menu() for a in w.menuBar().actions() if a.text() == "&View")
    next(a for a in view.actions() if a.text() == "Evaluations").trigger()
    assert w.evaluations_dock.isVisibleTo(w)
    assert w.evaluations_dock in w.tabifiedDockWidgets(w.evidence_dock)
    w.evaluations.openRunRequested.emit("r1")  # what a click on an answers row emits
    assert opened == ["r1"]
