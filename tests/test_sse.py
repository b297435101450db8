"""Server-sent events read at a pace (core/endpoints/sse.py): every payload, in order, wherever the
network splits the lines, and a fast stream read in few wake-ups, over real HTTP."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator

import pytest
from scripted_openai import ScriptedOpenAI

from vrag_desktop.core.endpoints.client import OpenAIChatModel
from vrag_desktop.core.endpoints.sse import sse_data

pytestmark = pytest.mark.timeout(60)


async def pieces(texts: list[str], wait_before: set[int] | None = None) -> AsyncIterator[str]:
    """``texts`` as an HTTP layer hands them over; those in ``wait_before`` after a wait on the loop."""
    for i, text in enumerate(texts):
        if wait_before is not None and i in wait_before:
            await asyncio.sleep(0)
        yield text


def data_of(texts: list[str], pace_s: float = 0.0) -> list[str]:
    async def go() -> list[str]:
        return [d async for d in sse_data(pieces(texts), pace_s)]

    return asyncio.run(go())


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_every_payload_whatever_the_line_ends(eol: str) -> None:
    stream = eol.join(
        ['data: {"a": 1}', "", ": a comment", "event: x", 'data:{"b": 2}', "", "data: [DONE]", ""]
    )
    assert data_of([stream]) == ['{"a": 1}', '{"b": 2}', "[DONE]"]
    # split after every character: lines and line ends across reads, a CRLF cut between CR and LF
    assert data_of(list(stream)) == ['{"a": 1}', '{"b": 2}', "[DONE]"]


def test_a_last_line_without_its_end_is_read_and_other_lines_are_not_data() -> None:
    assert data_of(["data: 1\n\ndat", "a: 2"]) == ["1", "2"]
    assert data_of(["id: 7\nretry: 10\ndatum: no\n\n"]) == []
    assert data_of([]) == []


def test_only_a_piece_read_from_the_network_is_followed_by_a_pause() -> None:
    """Pieces a read brought along follow at once; after one that waited on the loop, a pause."""

    async def took(wait_before: set[int]) -> tuple[list[str], float]:
        t0 = time.monotonic()
        out = [d async for d in sse_data(pieces([f"data: {i}\n" for i in range(6)], wait_before), 0.1)]
        return out, time.monotonic() - t0

    out, quick = asyncio.run(took(set()))
    assert out == [str(i) for i in range(6)] and quick < 0.05
    out, paced = asyncio.run(took({0, 3}))
    assert out == [str(i) for i in range(6)] and 0.2 <= paced < 0.5


def test_a_fast_stream_is_read_in_few_wakeups_and_nothing_is_lost() -> None:
    """Real HTTP: 60 chunks 5 ms apart. Read as they come, they would reach the caller at ~60
    moments; paced at 50 ms, in bursts (about one per 50 ms) with all the text."""
    turn = {"content": "abcdefghij" * 24, "chunk": 4, "delay": 0.005}
    moments: list[float] = []
    texts: list[str] = []

    def on_delta(kind: str, text: str) -> None:
        moments.append(time.monotonic())
        texts.append(text)

    async def go(srv: ScriptedOpenAI, pace_s: float) -> str:
        m = OpenAIChatModel(srv.base_url, "m", None, stream_pace_s=pace_s, total_timeout=20)
        try:
            return (await m.chat([{"role": "user", "content": "q"}], on_delta=on_delta)).content
        finally:
            await m.aclose()

    def bursts() -> int:
        return 1 + sum(1 for a, b in itertools.pairwise(moments) if b - a > 0.002)

    with ScriptedOpenAI([turn, turn]) as srv:
        content = asyncio.run(go(srv, 0.0))
        unpaced = bursts()
        assert content == "".join(texts) == turn["content"] and len(texts) == 60
        moments.clear()
        texts.clear()
        content = asyncio.run(go(srv, 0.05))
        paced = bursts()
        assert content == "".join(texts) == turn["content"] and len(texts) == 60
    assert unpaced >= 30  # the server really streams them apart
    assert paced <= 12, (paced, unpaced)
