#!/usr/bin/env python
"""CPU the run's event-loop thread spends per streamed chunk, reading at a pace or as chunks come.

Why: while a reply streams, the loop thread is the GIL's main holder besides the GUI thread
(docs/benchmarks.md §5.12), and every moment it holds the GIL the GUI thread may wait. Each chunk
read from the network costs a turn of the HTTP stack's Python, run cold after the idle gap before
it. :mod:`vrag_desktop.core.endpoints.sse` reads at most once per 10 ms after a network read, so
the chunks that came meanwhile arrive in one read.

The reply comes from ``tests/scripted_openai.py`` in a child process (as a real model server is),
in ``--chunk``-character chunks every ``--delay`` seconds; the client is the product's
:class:`OpenAIChatModel`. For each pace, alternating over ``--trials``: the loop thread's user and
system CPU per chunk, its voluntary context switches (wake-ups) per chunk, the wall time of the
reply, and that the text arrived whole.

    .venv/bin/python bench/stream_read.py [--chunks 2000 --chunk 4 --delay 0.002 --trials 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests"), str(ROOT)]

from gui_stall import _ServerProcess  # noqa: E402 - the bench's scripted server in a child process

from vrag_desktop.core.endpoints.client import OpenAIChatModel  # noqa: E402
from vrag_desktop.core.endpoints.sse import PACE_S  # noqa: E402


async def one_reply(base_url: str, pace_s: float, expect: str) -> dict[str, Any]:
    model = OpenAIChatModel(base_url, "scripted-model", None, stream_pace_s=pace_s, total_timeout=600)
    deltas = 0

    def on_delta(_kind: str, _text: str) -> None:
        nonlocal deltas
        deltas += 1

    try:
        await model.chat([{"role": "user", "content": "warm"}], stream=False)  # connection pooled
        r0, w0 = resource.getrusage(resource.RUSAGE_THREAD), time.perf_counter()
        res = await model.chat([{"role": "user", "content": "q"}], on_delta=on_delta)
        r1, wall = resource.getrusage(resource.RUSAGE_THREAD), time.perf_counter() - w0
    finally:
        await model.aclose()
    if res.content != expect:
        raise SystemExit(
            f"pace {pace_s}: the reply arrived altered ({len(res.content)} of {len(expect)} chars)"
        )
    return {
        "user_us": (r1.ru_utime - r0.ru_utime) / deltas * 1e6,
        "sys_us": (r1.ru_stime - r0.ru_stime) / deltas * 1e6,
        "wakeups": (r1.ru_nvcsw - r0.ru_nvcsw) / deltas,
        "wall_s": wall,
        "chunks": deltas,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=2000)
    ap.add_argument("--chunk", type=int, default=4, help="characters per chunk")
    ap.add_argument("--delay", type=float, default=0.002, help="seconds between chunks")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "stream_read.json")
    args = ap.parse_args()

    text = ("lorem ipsum dolor sit amet " * (args.chunks * args.chunk // 27 + 1))[: args.chunks * args.chunk]
    srv = _ServerProcess([{"content": text}], args.chunk, args.delay)
    paces = {"as chunks come (0 ms)": 0.0, f"paced ({PACE_S * 1000:g} ms)": PACE_S}
    rows: dict[str, list[dict[str, Any]]] = {k: [] for k in paces}
    try:
        for trial in range(args.trials):
            order = list(paces) if trial % 2 == 0 else list(reversed(paces))
            for name in order:
                rows[name].append(asyncio.run(one_reply(srv.base_url, paces[name], text)))
    finally:
        srv.stop()

    print(
        f"{args.chunks} chunks of {args.chunk} chars every {args.delay * 1000:g} ms; {args.trials} trials each\n"
    )
    print("| read | loop-thread CPU per chunk (user + sys), median | wake-ups per chunk | reply wall time |")
    print("|---|---|---|---|")
    summary = {}
    for name, rs in rows.items():
        cpu = statistics.median(r["user_us"] + r["sys_us"] for r in rs)
        wake = statistics.median(r["wakeups"] for r in rs)
        wall = statistics.median(r["wall_s"] for r in rs)
        summary[name] = {"cpu_us_per_chunk": cpu, "wakeups_per_chunk": wake, "wall_s": wall, "trials": rs}
        per_trial = " / ".join(f"{r['user_us'] + r['sys_us']:.0f}" for r in rs)
        print(f"| {name} | **{cpu:.0f} µs** ({per_trial}) | {wake:.2f} | {wall:.2f} s |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"args": vars(args) | {"out": str(args.out)}, "results": summary}, indent=2)
    )


if __name__ == "__main__":
    main()
