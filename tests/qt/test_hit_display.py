"""How the app shows a search's hits (issue 31, items 4 and 5): the score that ranks them (so the list
reads in order), the cosine only labelled, and a page held by two corpora once, naming the other."""

from __future__ import annotations

from typing import Any

from vrag_desktop.core.agents.events import SearchResults, SearchStarted
from vrag_desktop.core.run.graph_nodes import NodeInfo
from vrag_desktop.core.search.hit import Hit, Location
from vrag_desktop.qt.ask.transcript_view import TranscriptView
from vrag_desktop.qt.graph.node_details import NodeDetails

HITS = (
    Hit(
        score=0.0325,
        name="northwind_annual_report_2024_2",
        source="/docs/northwind_annual_report_2024.pdf",
        modality="page",
        page=2,
        corpus="sample",
        dense_score=0.382,
        lexical_score=7.5,
        content_id="aa:page:2",
        also_in=(Location("mine", "/home/me/copy/northwind_annual_report_2024.pdf", 9),),
        label="Image 1",
    ),
    Hit(
        score=0.0320,
        name="memo_1",
        source="/docs/memo.pdf",
        modality="page",
        page=1,
        corpus="sample",
        dense_score=0.393,
        content_id="bb:page:1",
    ),
)


def test_the_ask_transcript_shows_the_ranking_score_and_the_other_corpus(qtbot: Any) -> None:
    view = TranscriptView()
    qtbot.addWidget(view)
    view.reset("What was the revenue?")
    view.transcript.apply(SearchStarted(step=1, content="revenue 2024"))
    view.transcript.apply(SearchResults(step=1, content="revenue 2024", hits=HITS, shown=(0,)))
    view.draw()
    text = view.toPlainText()
    first, second = (line for line in text.splitlines() if ".pdf p." in line)
    assert "0.0325" in first and "northwind_annual_report_2024.pdf p. 2" in first
    assert "also in 'mine'" in first and "Image 1" in first
    assert "0.0320" in second and "also in" not in second
    assert "0.382" not in text and "0.393" not in text  # a bare cosine would read out of order
    assert text.count("northwind_annual_report_2024.pdf") == 1


def test_node_details_show_the_ranking_score_and_both_locations(qtbot: Any) -> None:
    details = NodeDetails()
    qtbot.addWidget(details)
    details.show_node(
        NodeInfo(id="s1", kind="search", query="revenue 2024", searched=True, hits=HITS, shown=(0,))
    )
    t = details.tables["hits"]
    assert [t.item(r, 2).text() for r in range(t.rowCount())] == ["0.0325", "0.0320"]
    assert "cosine 0.382" in t.item(0, 2).toolTip() and "fused vote" in t.item(0, 2).toolTip()
    assert t.item(0, 1).text() == "northwind_annual_report_2024.pdf · p.2 (+1 copy)"
    tip = t.item(0, 1).toolTip()
    assert "/docs/northwind_annual_report_2024.pdf ('sample')" in tip
    assert "/home/me/copy/northwind_annual_report_2024.pdf ('mine')" in tip
    assert t.item(1, 1).text() == "memo.pdf · p.1"
