"""One name per agent wherever a person reads it (issue 31, item 9): VRAG and VimRAG, each with one
description, in the Ask panel, the evaluation and settings dialogs, History, the status bar, the
command line's run listing and the reports; files keep the ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from vrag_desktop.cli.main import main
from vrag_desktop.core.agents.names import AGENT_CHOICES, agent_choice, agent_name
from vrag_desktop.core.eval.report import answers_report


def _combo(combo: Any) -> list[tuple[str, str]]:
    return [(combo.itemData(i), combo.itemText(i)) for i in range(combo.count())]


def test_every_list_of_agents_reads_the_same(qtbot: Any, ctx: Any) -> None:
    from vrag_desktop.qt.ask.ask_panel import AskPanel
    from vrag_desktop.qt.evaluation.new_dialog import NewEvaluationDialog
    from vrag_desktop.qt.settings_dialog import SettingsDialog

    expected = [("vrag", "VRAG — search, crop and zoom"), ("vimrag", "VimRAG — multimodal memory graph")]
    assert list(AGENT_CHOICES) == expected
    ask = AskPanel(ctx)
    qtbot.addWidget(ask)
    new_eval = NewEvaluationDialog(ctx)
    qtbot.addWidget(new_eval)
    settings = SettingsDialog(ctx)
    qtbot.addWidget(settings)
    assert _combo(ask.agent_combo) == _combo(new_eval.agent) == _combo(settings.agent_combo) == expected


def test_history_and_the_command_line_name_the_agent(qtbot: Any, ctx: Any, capsys: Any) -> None:
    from qt.test_history_panel import record, vrag_events
    from vrag_desktop.qt.history.run_table import RunTableModel

    run_id = record(ctx.runs, "How heavy a load can Atlas carry?", vrag_events, agent="vimrag")
    (summary,) = ctx.runs.list()
    texts = [cell[int(Qt.ItemDataRole.DisplayRole)] for cell in RunTableModel().row_cells(summary)]
    assert "VimRAG" in texts and "vimrag" not in texts
    assert main(["--data-dir", str(ctx.data_dir), "runs", "list"]) == 0
    assert main(["--data-dir", str(ctx.data_dir), "runs", "show", run_id]) == 0
    out = capsys.readouterr().out
    assert "VimRAG" in out and "vimrag" not in out
    # the file keeps the id: it is data, read by exports and the trainer
    assert json.loads((Path(ctx.data_dir) / "runs" / run_id / "run.json").read_text())["agent"] == "vimrag"


def test_reports_and_unknown_ids() -> None:
    summary = {
        "accuracy": 1.0,
        "format": 1.0,
        "ndcg": 0.5,
        "reward": 0.9,
        "items": 0,
        "judge_failures": 0,
        "errors": 0,
        "by_query_type": {},
        "settings": {"kind": "answers", "agent": "vrag"},
    }
    html = answers_report(summary, [])
    assert "<td>VRAG</td>" in html and "<td>vrag</td>" not in html
    assert agent_name("newagent") == "newagent" and agent_choice("newagent") == "newagent"
    assert agent_name(None) == "None"


def test_the_command_lines_help_says_which_id_is_which_agent(capsys: Any) -> None:
    import pytest

    for args in (["ask", "--help"], ["eval", "answers", "--help"]):
        with pytest.raises(SystemExit):
            main(args)
        out = " ".join(capsys.readouterr().out.split())
        assert "vrag: VRAG — search, crop and zoom; vimrag: VimRAG — multimodal memory graph" in out
