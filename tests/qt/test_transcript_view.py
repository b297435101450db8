"""The transcript view appends streamed text instead of drawing the whole document again, and what it
draws that way is exactly what a whole render draws (Qt's own HTML of both documents is compared)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from vrag_desktop.core.agents.events import ContentDelta, Crop, SearchStarted, ThinkDelta
from vrag_desktop.core.run.transcript import Transcript
from vrag_desktop.qt.ask.transcript_view import TranscriptView, shown_text

PIECES = ["word ", "two words ", "\n", "\n\n", "  indented", "<tag> & 'quote'", "tab\there", "é ✓ 中文", "x"]


def _view(qtbot: Any) -> TranscriptView:
    view = TranscriptView()
    qtbot.addWidget(view)
    view.resize(500, 300)
    view.show()
    return view


def _live(qtbot: Any, question: str) -> TranscriptView:
    """A view of a live run of ``question``, recording the events it is fed (see :func:`_feed`)."""
    view = _view(qtbot)
    view.events = []  # type: ignore[attr-defined]
    view.reset(question)
    view.running = True
    return view


def _whole(qtbot: Any, view: TranscriptView) -> str:
    """The document a whole render of ``view``'s state gives."""
    fresh = _view(qtbot)
    fresh.transcript = Transcript.from_events(view.events)  # type: ignore[attr-defined]
    fresh.question, fresh.running = view.question, view.running
    fresh.expanded, fresh.collapsed = set(view.expanded), set(view.collapsed)
    fresh.draw()
    assert fresh.appends == 0
    return fresh.document().toHtml()


def _feed(view: TranscriptView, ev: Any) -> None:
    view.events.append(ev)  # type: ignore[attr-defined]
    view.transcript.apply(ev)


@pytest.mark.parametrize("kind", ["think", "output"])
def test_streamed_text_is_appended_and_matches_a_whole_render(qtbot: Any, kind: str) -> None:
    rng = random.Random(7)
    view = _live(qtbot, "What does the table say?")
    make = ThinkDelta if kind == "think" else ContentDelta
    _feed(view, make(step=1, content="First piece"))
    view.draw()
    if kind == "output":  # raw output streams folded; the person opens it to watch
        view.toggle(len(view.transcript.blocks) - 1)
    for i in range(60):
        _feed(view, make(step=1, content="".join(rng.choice(PIECES) for _ in range(rng.randint(1, 4)))))
        view.draw()
        if i % 7 == 0:
            assert view.document().toHtml() == _whole(qtbot, view), f"after piece {i}"
    assert view.document().toHtml() == _whole(qtbot, view)
    assert view.toPlainText().endswith(shown_text(view.transcript.blocks[-1].text))
    assert view.appends >= 40  # the fallback (a whole render) only where a piece starts the text


def test_raw_text_and_thinking_streamed_together_append(qtbot: Any) -> None:
    """What the VRAG agent streams: each raw piece (folded) is followed by the thinking inside it
    (open, last): the folded block's line must not change, so the thinking is appended."""
    rng = random.Random(11)
    view = _live(qtbot, "q")
    _feed(view, ContentDelta(step=1, content="<think>"))
    for i in range(40):
        piece = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 3)))
        _feed(view, ContentDelta(step=1, content=piece))
        _feed(view, ThinkDelta(step=1, content=piece))
        view.draw()
        if i % 9 == 0:
            assert view.document().toHtml() == _whole(qtbot, view), f"after piece {i}"
    assert view.appends >= 30
    _feed(view, SearchStarted(step=1, content="q"))  # the reply is over: the raw line gets its count
    view.draw()
    assert f"raw model output ({len(view.transcript.blocks[1].text)} chars)" in view.toPlainText()
    assert view.document().toHtml() == _whole(qtbot, view)


def test_folded_stream_draws_nothing_and_actions_draw_the_whole_document(qtbot: Any) -> None:
    view = _live(qtbot, "q")
    _feed(view, ContentDelta(step=1, content="<search>atlas"))
    view.draw()
    html = view.document().toHtml()
    _feed(view, ContentDelta(step=1, content=" payload</search>"))
    view.draw()  # folded raw output: nothing visible changed
    assert view.document().toHtml() == html and view.appends == 0
    _feed(view, SearchStarted(step=1, content="atlas payload"))
    _feed(view, Crop(step=1, region=(1, 2, 30, 40), source="/a/b.pdf", page=2))
    view.draw()
    assert "Search · atlas payload" in view.toPlainText() and "✂ crop 29×38 px" in view.toPlainText()
    assert view.document().toHtml() == _whole(qtbot, view)
    view.running = False  # the run ends: the last block loses its live form
    view.draw()
    assert view.document().toHtml() == _whole(qtbot, view)


def test_appending_keeps_the_bottom_while_running_and_a_selection(qtbot: Any) -> None:
    view = _live(qtbot, "q")
    _feed(view, ThinkDelta(step=1, content="line\n" * 80))
    view.draw()
    bar = view.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == bar.maximum()
    cursor = view.textCursor()
    cursor.setPosition(0)
    cursor.setPosition(1, cursor.MoveMode.KeepAnchor)
    view.setTextCursor(cursor)
    bar.setValue(bar.maximum())  # the person reads the end again
    _feed(view, ThinkDelta(step=1, content="more\n" * 20 + "end"))
    view.draw()
    assert view.appends == 1
    assert bar.value() == bar.maximum()  # still following the stream
    assert view.textCursor().selectedText() == "q"  # a whole render would have dropped it
    bar.setValue(0)  # the person scrolls up to read: the stream no longer pulls the view down
    _feed(view, ThinkDelta(step=1, content=" and more"))
    view.draw()
    assert view.appends == 2 and bar.value() == 0


def test_a_long_file_name_in_the_evidence_wraps_at_its_underscores(qtbot: Any) -> None:
    """In the Ask column at 1280×800 an evidence link broke "…report_2024.pd" / "f p. 2"."""
    from vrag_desktop.core.agents.events import Answer, Evidence

    view = _live(qtbot, "Which region sold most?")
    view.resize(200, 400)
    _feed(
        view,
        Answer(
            step=2, content="North America", evidence=(Evidence("northwind_annual_report_2024.pdf", page=2),)
        ),
    )
    view.running = False
    view.draw()
    doc = view.document()
    doc.setTextWidth(view.viewport().width())
    block = doc.findBlock(doc.toPlainText().index("northwind"))
    text, layout = block.text(), block.layout()
    assert layout.lineCount() >= 2, "the column is narrower than the name: it must wrap"
    ends = [
        layout.lineAt(i).textStart() + layout.lineAt(i).textLength() for i in range(layout.lineCount() - 1)
    ]
    for end in ends:  # every line but the last ends after an underscore, a break or a space
        assert text[end - 1] in "_\u200b " or text[end - 2 : end] == "_\u200b", (text, ends)
    assert "northwind_annual_report_2024.pdf p. 2" in text.replace("\u200b", "")
