"""The ``data:`` payloads of a server-sent-event stream, read from the network at a measured pace.

Why paced: a model server streams one small chunk per token or two, hundreds a second. Read as they
come, every chunk wakes the app's event-loop thread for a full turn of the HTTP stack's Python
(~170 calls), run cold after each idle gap: 0.3–0.5 ms of CPU *holding the GIL* per chunk on the
2-core development machine, up to a quarter of a core at 500 chunks a second, and the GUI thread
waits for that GIL before each of its own Python calls. Waiting up to ``pace_s`` after a read that
waited on the network lets the chunks that come meanwhile arrive in one read: the same text, one
wake-up instead of five. The delay (10 ms) is far below what a person sees; the transcript redraws
every 100 ms. Nothing is sent later: the request goes at once, and a chunk that comes after a quiet
``pace_s`` is read as it comes.

Why our own line split: the SDK's stream hides whether ``data: [DONE]`` arrived (see client.py),
and httpx's line iterator reads the network again whenever its buffer is empty, which leaves no
point between reads to wait at. Lines end with CRLF, LF or CR (the SSE specification).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator

__all__ = ["PACE_S", "sse_data"]

#: The shortest time between two network reads of one stream.
PACE_S = 0.01

_EOL = re.compile(r"\r\n|\r|\n")


async def sse_data(texts: AsyncIterator[str], pace_s: float = PACE_S) -> AsyncGenerator[str, None]:
    """Each event line's ``data`` field (stripped), in order, from decoded text pieces as read.

    Comment lines, other fields and blank lines are skipped. A last line without its end of line
    is still read (a server that closes right after it)."""
    loop = asyncio.get_running_loop()
    rest = ""
    while True:
        # A piece that makes the iterator wait on the loop was read from the network; the pieces
        # the same read brought follow without waiting (the HTTP layer splits them per chunk).
        waited = _Flag()
        tick = loop.call_soon(waited.set)
        try:
            text = await anext(texts)
        except StopAsyncIteration:
            break
        finally:
            tick.cancel()
        arrived = time.monotonic()
        # a CRLF split across two reads ends the line at the CR, then reads a blank line: skipped
        lines = _EOL.split(rest + text)
        rest = lines.pop()
        for line in lines:
            if line.startswith("data:"):
                yield line[5:].strip()
        if waited.value:  # let the next chunks gather in the socket before the next read
            await asyncio.sleep(max(0.0, pace_s - (time.monotonic() - arrived)))
    if rest.startswith("data:"):
        yield rest[5:].strip()


class _Flag:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = False

    def set(self) -> None:
        self.value = True
