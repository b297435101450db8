"""The Ask transcript numbers the steps of the budget, not the model's turns (issue 31).

An invalid reply (no action tag) gets a corrective turn that uses no step (``TurnPolicy.max_invalid``
per run). The transcript numbered every turn, so a run with "Steps 2" showed "Step 4"; now such a
turn is headed "Retry (invalid reply)" and the steps shown are the ones the agent counted. The run is
real: the VRAG agent searches an indexed corpus and a scripted OpenAI-compatible server writes the
model's replies.
"""

from __future__ import annotations

import re
from typing import Any

from scripted_openai import ScriptedOpenAI

from qt.test_ask_panel import use_scripted
from vrag_desktop.core.agents.events import Timing
from vrag_desktop.core.run.transcript import FINAL_LABEL, RETRY_LABEL, STEP, Transcript
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.main_window import MainWindow

SCRIPT = [
    {"content": "The payload is probably 450 kg."},  # no tag: a free retry
    {"content": "<think>I need the spec page.</think>\n<search>Atlas robot payload</search>"},
    {"content": "It says 450 kg, I think."},  # no tag again: another free retry
    {"content": "<think>The table says 450 kg.</think>\n<answer>450 kg</answer>"},
]
WANT = [RETRY_LABEL, "Step 1", RETRY_LABEL, "Step 2"]


def _headers(t: Transcript) -> list[str]:
    return [b.text for b in t.blocks if b.kind == STEP]


def _run_with_two_steps(
    qtbot: Any, indexed: AppContext, script: list[dict[str, Any]]
) -> tuple[Any, list[Any], str, str]:
    """A real VRAG run with Steps 2 in the main window against ``script``: the window, the agent's
    events, the run's status and id."""
    w = MainWindow(indexed, first_run=False)
    qtbot.addWidget(w)
    w.show()
    seen: list[Any] = []
    w.controller.agentEvent.connect(seen.append)
    ends: list[tuple[str, str]] = []
    w.controller.finished.connect(lambda s, r: ends.append((s, r)))
    with ScriptedOpenAI(script, api_key="k-1") as srv:
        use_scripted(w.ask, indexed, srv.base_url, "k-1")
        w.ask.max_steps.setValue(2)
        w.ask.question_edit.setPlainText("How heavy a load can the Atlas robot carry?")
        w.ask.send()
        qtbot.waitUntil(lambda: bool(ends), timeout=30_000)
    status, run_id = ends[0]
    return w, seen, status, run_id


def test_free_retries_are_labelled_and_do_not_advance_the_step_number(
    qtbot: Any, indexed: AppContext
) -> None:
    w, seen, status, run_id = _run_with_two_steps(qtbot, indexed, SCRIPT)
    assert status == "answered"
    timings = [e for e in seen if isinstance(e, Timing)]
    assert [e.free_retry for e in timings] == [True, False, True, False]  # the agent says which were free
    assert _headers(w.ask.transcript) == WANT

    shown = w.ask.view.toPlainText()
    assert re.findall(r"── (Step \d+|Retry \(invalid reply\))", shown) == WANT
    assert "Step 3" not in shown and "Step 4" not in shown  # 2 steps of the budget, 2 shown

    # the saved run reads the same when reopened from History
    w.open_run(run_id)
    qtbot.waitUntil(lambda: _headers(w.ask.transcript) == WANT, timeout=10_000)


def test_a_turn_is_a_step_until_its_end_says_otherwise() -> None:
    """Live: the header of a turn under way shows the next step; its Timing may make it a retry."""
    from vrag_desktop.core.agents.events import ContentDelta

    t = Transcript()
    t.apply(ContentDelta(step=1, content="no tags"))
    assert _headers(t) == ["Step 1"]
    changed = t.apply(Timing(step=1, free_retry=True))
    assert _headers(t) == [RETRY_LABEL] and t.blocks[0].id in changed  # redrawn
    t.apply(ContentDelta(step=2, content="<search>q</search>"))
    t.apply(Timing(step=2))
    t.apply(ContentDelta(step=3, content="<answer>a</answer>"))
    assert _headers(t) == [RETRY_LABEL, "Step 1", "Step 2"]
    # a run saved before Timing said so: every turn a step, as it was recorded
    old = Transcript.from_events([ContentDelta(step=1, content="x"), Timing(step=1), ContentDelta(step=2)])
    assert _headers(old) == ["Step 1", "Step 2"]


def test_the_turn_after_the_budget_is_headed_as_the_final_answer_not_a_step() -> None:
    """With Steps 2 the agent's third turn may only answer: it is headed as such, not "Step 3"."""
    from vrag_desktop.core.agents.events import Answer, ContentDelta, MaxSteps

    t = Transcript()
    for step in (1, 2):
        t.apply(ContentDelta(step=step, content="<search>q</search>"))
        t.apply(Timing(step=step))
    t.apply(ContentDelta(step=3, content="<search>again</search>"))
    t.apply(MaxSteps(step=3))
    changed = t.apply(Timing(step=3, final=True))
    t.apply(Answer(step=3, content="fallback", forced=True))
    (header,) = [b for b in t.blocks if b.kind == STEP and b.step == 3]
    assert _headers(t) == ["Step 1", "Step 2", FINAL_LABEL] and header.id in changed  # redrawn


def test_a_run_out_of_steps_shows_two_steps_then_the_final_answer(qtbot: Any, indexed: AppContext) -> None:
    """A real VRAG run with Steps 2 whose model keeps searching: the agent marks its third turn
    final, and the transcript, live and reopened, shows Step 1, Step 2 and the final answer."""
    searching = [
        {"content": f"<think>More.</think>\n<search>Atlas robot payload {i}</search>"} for i in range(3)
    ]
    w, seen, _status, run_id = _run_with_two_steps(qtbot, indexed, searching)
    assert [e.final for e in seen if isinstance(e, Timing)] == [False, False, True]
    want = ["Step 1", "Step 2", FINAL_LABEL]
    assert _headers(w.ask.transcript) == want
    assert "Step 3" not in w.ask.view.toPlainText()
    w.open_run(run_id)
    qtbot.waitUntil(lambda: _headers(w.ask.transcript) == want, timeout=10_000)
