"""Streamed text joined for the window: order kept, nothing lost, the wait bounded by the window."""

from __future__ import annotations

import asyncio
import random

from vrag_desktop.core.agents.events import AgentEvent, ContentDelta, SearchStarted, ThinkDelta
from vrag_desktop.core.run.coalesce import DeltaCoalescer
from vrag_desktop.core.run.transcript import Transcript


def _run(events: list[AgentEvent], window_s: float) -> list[AgentEvent]:
    out: list[AgentEvent] = []

    async def main() -> None:
        c = DeltaCoalescer(out.append, window_s)
        for ev in events:
            c.push(ev)
        c.flush()

    asyncio.run(main())
    return out


def test_joins_a_steps_pieces_per_kind_in_the_order_kinds_first_came() -> None:
    events: list[AgentEvent] = [
        ContentDelta(step=1, content="<think>a"),  # raw text, then the thinking inside it
        ThinkDelta(step=1, content="a"),
        ContentDelta(step=1, content="b</think><search>"),
        ThinkDelta(step=1, content="b"),
        ContentDelta(step=1, content="q</search>"),
        SearchStarted(step=1, content="q"),
        ThinkDelta(step=2, content="c"),
        ThinkDelta(step=3, content="d"),
    ]
    out = _run(events, 10.0)
    assert [(type(e).__name__, e.step, getattr(e, "content", "")) for e in out] == [
        ("ContentDelta", 1, "<think>ab</think><search>q</search>"),
        ("ThinkDelta", 1, "ab"),
        ("SearchStarted", 1, "q"),
        ("ThinkDelta", 2, "c"),
        ("ThinkDelta", 3, "d"),
    ]
    assert out[0].time == events[0].time


def test_the_window_hands_text_on_without_a_next_event() -> None:
    seen: list[tuple[float, AgentEvent]] = []

    async def main() -> float:
        loop = asyncio.get_running_loop()
        c = DeltaCoalescer(lambda ev: seen.append((loop.time(), ev)), 0.05)
        start = loop.time()
        c.push(ThinkDelta(step=1, content="x"))
        c.push(ThinkDelta(step=1, content="y"))
        assert seen == []  # waiting for more
        await asyncio.sleep(0.3)  # no more comes: the window hands it on
        c.flush()  # nothing left: no second event
        return start

    start = asyncio.run(main())
    assert len(seen) == 1 and seen[0][1] == ThinkDelta(step=1, content="xy")
    assert 0.04 <= seen[0][0] - start < 0.25


def test_a_transcript_from_joined_events_equals_one_from_every_piece() -> None:
    rng = random.Random(3)
    events: list[AgentEvent] = []
    for step in range(1, 4):
        for _ in range(200):
            kind = ThinkDelta if rng.random() < 0.7 else ContentDelta
            events.append(kind(step=step, content=rng.choice(["a", "bc ", "\n", "<b>", "é"])))
        events.append(SearchStarted(step=step, content=f"query {step}"))
    joined = _run(events, 10.0)
    assert len(joined) == 9  # per step: one event per kind and the search
    whole, parts = Transcript.from_events(events), Transcript.from_events(joined)
    assert [(b.kind, b.step, b.text) for b in whole.blocks] == [
        (b.kind, b.step, b.text) for b in parts.blocks
    ]
    assert _run(events, 0.0) == events  # no window: every piece as it came
