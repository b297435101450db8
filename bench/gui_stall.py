#!/usr/bin/env python
"""GUI-thread stalls while the app indexes a few hundred pages and streams an agent run at once.

What a person feels as a freeze is the GUI thread not getting back to its event loop. A heartbeat
``QTimer`` (5 ms, precise) on the GUI thread of a real :class:`MainWindow` records the gap between its
beats; every gap is a moment the window could not repaint or take input, so the longest gap is the
longest freeze. While it beats, in the same window:

(a) **indexing**: ``window.corpora.add_and_index(...)`` of a folder of generated PDFs (default 15
    PDFs, 300 pages: text, drawn tables and shapes, and one scanned page per 20 with no text layer,
    which the product OCRs) with the real indexer, the real MiniLM embedder and OCR;
(b) **a streamed agent run**, started with ``window.start_run(...)`` (what the ask panel's Ask does)
    against ``tests/scripted_openai.py`` over real HTTP: a VRAG run of 9 model turns (search, crop,
    search, crop, …, answer) whose replies stream in 4-character chunks every 2 ms (~6,900 stream
    events a run) and search a small pre-built corpus. A new run starts whenever one ends, until the
    indexing has finished.

Repetition 1 includes the first use of the embedder (torch import and model load, in the worker);
repetitions 2 and 3 index the same files into new corpora with the model loaded.

Why a gap happened: Python code on the GUI thread, Qt's own C++ work (layout, painting), or another
thread holding the GIL (the GUI thread needs it for every Python slot, the heartbeat's included).
A **monitor process** (it shares no GIL with the app) watches the heartbeat through a shared memory
page; when a beat is 35 ms late it runs ``py-spy dump --nonblocking --json`` on the app (py-spy
reads the process from outside without pausing it; ``pip install py-spy``; without it the bench
still measures, it just cannot explain), and again at 280 ms into the same stall. A dump says
which thread **holds the GIL** and every thread's Python stack, so each stall is attributed to:
Python on the GUI thread (its stack), a worker holding the GIL (its stack), or Qt C++ on the GUI
thread without the GIL (the GUI thread active with only the event loop's Python frame). A
``gc.callbacks`` probe records every garbage collection (one holds the GIL throughout); a stall
mostly covered by one is put down to it.

Where a stall's time went, without a profiler: a **clock process** (its own GIL) reads the GUI
thread's ``schedstat`` every 2 ms, and every thread's (the app's and its children's) every 10 ms.
Each long stall is then split into the GUI thread on a CPU (its own Python and Qt work), waiting for
a CPU (runnable, the cores taken), stolen by the hypervisor (``/proc/stat``), and asleep (waiting
for the GIL or a lock), with the threads that ran meanwhile (docs/benchmarks.md §5.17).

Tried first and dropped, because they break what they measure: ``faulthandler.dump_traceback_later``
reads other threads' frames without the GIL and crashed the process under this load; sampling with
``sys._current_frames()`` keeps frames alive past their return (see :class:`Sampler`) and crashed Qt
painting; ``py-spy record`` traces do not say when a thread stopped holding the GIL.

Baselines, in the same run:

- **idle** (noise floor): the same window, nothing running. What the timer and the machine give.
- **one run alone**: the stream without indexing (the product's throttled rendering).
- **unthrottled stream**: one run, with the transcript re-rendered on every event (the ask panel
  renders at most every 100 ms). What the stream would cost without the throttle.
- **indexing on the GUI thread**: the product's own indexing generator (``qt.indexer.run_job``),
  stepped one ``yield`` per event-loop turn on the GUI thread, over 2 of the PDFs (model loaded).
  What the window would suffer without the worker thread.

Target (issue 4): longest GUI-thread stall ≤ 50 ms while indexing and streaming, on the 2-core
development machine.

(c) **training** (issue 12; ``--phases training``, alone or with the others): a real GRPO run of the
    tiny Qwen2-VL on CPU launched through the Training dock (``TrainingPanel.launch_new``), the run
    shown while it streams metrics and log lines, its tabs switched Plots ↔ Log every 2 s; the
    trainer (a child process) competes for the cores. Needs ``.venv-trainer``.

(d) **tab switches** (issue 31; every phase, ``--dock-switch-s``, 0 turns them off): the side docks
    (History, Datasets, Evaluations, Training, Runtime) shown as one group of tabs and raised in turn
    every 1.3 s, as a person moving between them; the Training view's Plots ↔ Log switches count too.
    Each switch's cost is the longest GUI-thread gap ending within 0.3 s of it (the switch, then the
    panel's layout and first paint); the target is ≤ 50 ms.

    .venv/bin/python bench/gui_stall.py [--pdfs 15 --pages 300 --reps 3] [--py-spy PATH] [--xcb]
        [--phases index,baselines,training]

Experiments (not the product): ``--renice-workers 10`` (every thread but the GUI thread at lower CPU
priority), ``--gc-freeze`` (no collections until the embedder has loaded, then ``gc.freeze()``);
``--native-dumps`` adds C++ frames (py-spy then pauses the app per dump: diagnosis only).

Writes bench/out/gui_stall.json (every gap ≥ 20 ms with its context) and prints markdown tables.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
if os.environ.get("VRAG_BENCH_TREE"):  # bench/gui_stall_ab.py: measure another source tree's app
    sys.path.insert(0, os.environ["VRAG_BENCH_TREE"])

TARGET_MS = 50.0
BEAT_MS = 5
SWITCH_WINDOW_S = 0.3  # a tab switch's cost: the longest gap ending this soon after it
KEEP_STALL_MS = 20  # gaps kept individually (with their context) in the JSON
QUESTION = "What payload can the Atlas warehouse robot carry, and how long does its battery last?"

_WORD_TEXT = """
robot warehouse payload battery sensor conveyor pallet forklift lidar camera shelf inventory
throughput shift maintenance motor gearbox torque safety zone charger dock route aisle picker
order quarterly revenue margin supplier contract region forecast budget capacity latency
firmware calibration temperature humidity vibration alarm operator manual appendix figure
north south east west annual report summary outlook growth decline steady improved reduced
"""
WORDS = _WORD_TEXT.split()


def _module(*names: str) -> Any:
    """The first of ``names`` that imports (module paths moved in commit 4c67e44; older trees)."""
    import importlib

    for name in names[:-1]:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return importlib.import_module(names[-1])


# ============================================================================ data (child process)
def _para(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    out, i = [], 0
    while i < len(words):
        k = rng.randint(8, 18)
        s = " ".join(words[i : i + k])
        out.append(s[:1].upper() + s[1:] + ".")
        i += k
    return " ".join(out)


def _text_page(doc: Any, title: str, body: str, rng: random.Random) -> Any:
    import pymupdf

    page = doc.new_page()
    page.insert_text((50, 60), title, fontsize=16)
    page.insert_textbox(pymupdf.Rect(50, 80, 545, 470), body, fontsize=10)
    # a drawn table and a chart-like figure: vector shapes the renderer and the crop have to draw
    x0, y0 = 50, 490
    for r in range(6):
        for c in range(4):
            rect = pymupdf.Rect(x0 + c * 120, y0 + r * 22, x0 + (c + 1) * 120, y0 + (r + 1) * 22)
            page.draw_rect(rect, color=(0.2, 0.2, 0.2), width=0.6)
            page.insert_text(
                (rect.x0 + 4, rect.y1 - 7), f"{rng.choice(WORDS)} {rng.randint(1, 999)}", fontsize=8
            )
    for i in range(8):
        h = rng.randint(20, 120)
        page.draw_rect(
            pymupdf.Rect(70 + i * 55, 790 - h, 105 + i * 55, 790), color=None, fill=(0.2, 0.4, 0.8)
        )
    page.draw_circle((480, 720), 40, color=(0.8, 0.1, 0.1), width=2)
    return page


def prepare(work: Path, n_pdfs: int, n_pages: int, ocr_every: int, seed: int) -> None:
    """PDFs for indexing, and the small corpus the scripted run searches (indexed here, in a child
    process, so the measuring process has not imported torch when repetition 1 starts)."""
    import pymupdf

    rng = random.Random(seed)
    docs = work / "docs"
    docs.mkdir(parents=True)
    per = max(1, n_pages // n_pdfs)
    pages_done, scanned = 0, 0
    for d in range(n_pdfs):
        doc = pymupdf.open()
        count = per if d < n_pdfs - 1 else n_pages - pages_done
        for p in range(count):
            title = f"Section {d + 1}.{p + 1}: {rng.choice(WORDS)} {rng.choice(WORDS)}"
            body = _para(rng, rng.randint(220, 320))
            if ocr_every and p % ocr_every == ocr_every - 1:  # a scanned page: an image, no text layer
                tmp = pymupdf.open()
                _text_page(tmp, title, body, rng)
                pix = tmp[0].get_pixmap(dpi=110)
                page = doc.new_page()
                page.insert_image(page.rect, stream=pix.tobytes("png"))
                tmp.close()
                scanned += 1
            else:
                _text_page(doc, title, body, rng)
        doc.save(str(docs / f"report_{d + 1:02d}.pdf"))
        doc.close()
        pages_done += count
    small = work / "docs_small"
    small.mkdir()
    for f in sorted(docs.glob("*.pdf"))[:2]:
        shutil.copy(f, small / f.name)

    robots = work / "robots"
    robots.mkdir()
    doc = pymupdf.open()
    facts = [
        "Atlas warehouse robot specifications: payload 450 kg, battery 14 hours, top speed 2 m/s.",
        "Atlas charging dock: full charge in 3 hours; the battery lasts 14 hours per shift.",
        "Hermes picker robot: payload 35 kg, battery 9 hours, lidar and two cameras.",
        "Northwind annual report: revenue grew in the north and east regions; margins steady.",
        "Maintenance schedule for Atlas robots: gearbox every 2,000 hours, sensors monthly.",
        "Safety zones around Atlas robots: 1.5 m at full payload, 0.8 m when empty.",
    ]
    for i, fact in enumerate(facts):
        _text_page(doc, f"Robots {i + 1}", fact + " " + _para(rng, 120), rng)
    doc.save(str(robots / "robots.pdf"))
    doc.close()

    from vrag_desktop.core.embedders import create_embedder

    Library = _module("vrag_desktop.core.corpus.library", "vrag_desktop.core.library").Library

    emb = create_embedder("minilm")
    corpus = Library(work / "data").open("robots", create=True)
    corpus.add_paths([str(robots)])
    for gen in (corpus.scan(), corpus.build(emb)):
        for _ in gen:
            pass
    corpus.close()
    (work / "prepared.json").write_text(
        json.dumps({"pdfs": n_pdfs, "pages": pages_done, "scanned_pages": scanned})
    )


def prepare_training(work: Path) -> None:
    """What the training phase's run needs (in a child process, so the measuring process never imports
    torch): the tiny Qwen2-VL of tests/tiny_vl_models.py with the VRAG tags as tokens, the toy corpus
    of tests/toy_training.py indexed with MiniLM as ``toy`` in the app's data dir, and its dataset."""
    import pymupdf
    import tiny_vl_models
    from toy_training import DOCS, EXAMPLES, TAGS

    from vrag_desktop.core.embedders import create_embedder

    Library = _module("vrag_desktop.core.corpus.library", "vrag_desktop.core.library").Library
    tiny_vl_models.build_tiny_qwen2_vl(work / "tiny-qwen2-vl", with_lm_head=True, extra_tokens=TAGS)
    docs = work / "toy_docs"
    docs.mkdir(parents=True)
    for name, pages in DOCS.items():
        doc = pymupdf.open()
        for text in pages:
            doc.new_page().insert_textbox(pymupdf.Rect(50, 50, 550, 800), text, fontsize=12)
        doc.save(str(docs / name))
        doc.close()
    corpus = Library(work / "data").open("toy", create=True)
    corpus.add_paths([str(docs / name) for name in DOCS])
    emb = create_embedder("minilm")
    for gen in (corpus.scan(), corpus.build(emb)):
        for _ in gen:
            pass
    corpus.close()
    (work / "dataset.json").write_text(json.dumps({"examples": EXAMPLES}), encoding="utf-8")


# ============================================================================ the scripted model
def _thinking(rng: random.Random, chars: int) -> str:
    return _para(rng, chars // 6)[:chars]


def make_turns(think_chars: int, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    queries = ["Atlas robot payload", "Atlas battery hours", "Atlas charging dock", "Atlas safety zone"]
    turns = []
    for q in queries:
        turns.append({"content": f"<think>{_thinking(rng, think_chars)}</think>\n<search>{q}</search>"})
        box = [rng.randint(10, 120), rng.randint(20, 200), rng.randint(300, 480), rng.randint(260, 420)]
        turns.append({"content": f"<think>{_thinking(rng, think_chars)}</think>\n<bbox>{box}</bbox>"})
    turns.append(
        {
            "content": f"<think>{_thinking(rng, think_chars)}</think>\n"
            "<answer>The Atlas robot carries 450 kg and its battery lasts 14 hours.</answer>"
        }
    )
    return turns


def _reply_for(turns: list[dict[str, Any]], chunk: int, delay: float) -> Any:
    def reply(body: dict[str, Any]) -> dict[str, Any]:  # the step is how many replies the run has
        step = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        return {**turns[min(step, len(turns) - 1)], "chunk": chunk, "delay": delay}

    return reply


def scripted_server(turns: list[dict[str, Any]], chunk: int, delay: float, where: str = "process") -> Any:
    """The scripted model server. ``process`` (the default since 2026-11-26): a child process, as a
    real model server is (vLLM, a remote endpoint): its 500 chunks/s do not take the app's GIL.
    ``thread``: inside the app's process, as the bench ran before (its Python competes for the app's
    GIL: a harder workload than any real endpoint)."""
    from scripted_openai import ScriptedOpenAI

    if where == "thread":
        return ScriptedOpenAI([], default=_reply_for(turns, chunk, delay)).start()
    return _ServerProcess(turns, chunk, delay)


_SERVER_CHILD = """
import json, sys
sys.path[:0] = [sys.argv[2], sys.argv[3]]
from gui_stall import _reply_for
from scripted_openai import ScriptedOpenAI
turns = json.loads(open(sys.argv[1], encoding="utf-8").read())
srv = ScriptedOpenAI([], default=_reply_for(turns, int(sys.argv[4]), float(sys.argv[5]))).start()
print(srv.base_url, flush=True)
sys.stdin.read()  # until the bench closes our stdin (or dies)
srv.stop()
"""


class _ServerProcess:
    """The scripted server in a child process; ``base_url`` and ``stop()`` as the in-process one."""

    def __init__(self, turns: list[dict[str, Any]], chunk: int, delay: float) -> None:
        fd, self._script = tempfile.mkstemp(prefix="gui-stall-turns-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(turns, fh)
        # its stderr (connection resets when the app closes a pooled connection) goes to a log
        self._log = tempfile.NamedTemporaryFile(prefix="gui-stall-server-", suffix=".log", delete=False)  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _SERVER_CHILD,
                self._script,
                str(ROOT / "bench"),
                str(ROOT / "tests"),
                str(chunk),
                str(delay),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            self.proc.wait(10)
            raise RuntimeError(
                "the scripted server's process did not start:\n" + Path(self._log.name).read_text()[-3000:]
            )

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.unlink(self._script)
        self._log.close()
        os.unlink(self._log.name)


# ============================================================================ measuring
def percentile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return 0.0
    i = min(len(sorted_vals) - 1, max(0, round(q / 100 * (len(sorted_vals) - 1))))
    return sorted_vals[i]


def _short(path: str) -> str:
    for mark in ("/work/main/", "/site-packages/"):
        if mark in path:
            return path.split(mark, 1)[1]
    if "/lib/python3." in path:
        return "stdlib/" + path.split("/lib/python3.", 1)[1].split("/", 1)[-1]
    return path


def summarize(frames: list[str]) -> str:
    """Innermost frame; the module being imported, if any; the innermost app frame."""
    if not frames:
        return "?"
    parts = [frames[0]]
    mod = next((f for f in frames if f.endswith(" <module>") and "<frozen" not in f), None)
    if mod and mod != frames[0]:
        parts.append(f"importing {mod.rsplit(':', 1)[0]}")
    app = next((f for f in frames if f.startswith("vrag_desktop/")), None)
    if app and app != frames[0]:
        parts.append(f"in {app}")
    return " · ".join(parts)


def agent_events(controller: Any) -> Any:
    """The run controller's event signal (``agentEvent``; ``event`` in trees before issue 8)."""
    return getattr(controller, "agentEvent", None) or controller.event


def render_transcript(ask: Any) -> None:
    """Redraw the ask panel's transcript (``render_transcript``; ``render`` in older trees)."""
    if hasattr(ask, "render_transcript"):
        ask.render_transcript()
    else:
        ask.render()


class Heartbeat:
    """A 5 ms precise QTimer on the GUI thread; the gaps between its beats."""

    def __init__(self) -> None:
        from PySide6.QtCore import Qt, QTimer

        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(BEAT_MS)
        self.timer.timeout.connect(self._beat)
        self.last = time.perf_counter()
        self.recording = False
        self.gaps: list[float] = []
        self.stalls: list[dict[str, Any]] = []
        self.tag = ""  # what is going on (set by the workload's slots)
        self.monitor: Monitor | None = None
        self._tag_at_beat = ""
        self.t0 = 0.0
        self.beats: list[tuple[float, float, float]] = []  # (end, gap ms, GUI-thread CPU ms) while recording
        self.cpu_last = time.thread_time()

    def start(self) -> None:
        self.last = time.perf_counter()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def record(self, on: bool) -> None:
        if on:
            # A phase's first gap starts with the phase: the time since the last beat was the
            # bench's own bookkeeping of the phase before (its figures, ``gc.get_objects()``), which
            # used to be counted as the new phase's first stall (20-50 ms at 0.02-0.04 s, §5.18).
            self.gaps, self.stalls, self.t0, self.beats = [], [], time.perf_counter(), []
            self.last = self.t0
        self.recording = on
        if self.monitor is not None:
            self.monitor.beat(self.last, on)

    def _beat(self) -> None:
        now = time.perf_counter()
        cpu = time.thread_time()  # this (the GUI) thread's CPU: its own work in the gap
        gap = (now - self.last) * 1000
        if self.recording:
            self.gaps.append(gap)
            self.beats.append((now, gap, (cpu - self.cpu_last) * 1000))
            if gap >= KEEP_STALL_MS:
                self.stalls.append(
                    {
                        "gap_ms": round(gap, 2),
                        "end_s": round(now - self.t0, 3),
                        "during": self._tag_at_beat,
                        "_window": (self.last, now),
                    }
                )
        self.last, self.cpu_last = now, cpu
        self._tag_at_beat = self.tag
        if self.monitor is not None:
            self.monitor.beat(now, self.recording)


class TabSwitches:
    """Tab switches as a person makes them, each timed (issue 31: 150-370 ms were seen during indexing
    and training). A switch's cost is the longest time, from the switch on, that the GUI thread did not
    get back to its event loop in the :data:`SWITCH_WINDOW_S` after it (the switch itself, then the
    newly shown panel's layout and first paint, which Qt does on the event loop's next turns); its own
    work is the GUI thread's CPU in those gaps (what the Qt layer controls; the rest is waiting for a
    core or the GIL). ``targets`` are switched in turn every ``interval_s``; switches made elsewhere
    (the Training view's Plots ↔ Log) are recorded with :meth:`mark`."""

    def __init__(self, hb: Heartbeat, qtimer: Any, interval_s: float, targets: list[tuple[str, Any]]) -> None:
        self.hb, self.targets, self.at = hb, targets, []
        self.timer = qtimer()
        self.timer.setInterval(int(interval_s * 1000))
        self.timer.timeout.connect(self._switch)
        self._next = 0

    def mark(self, name: str) -> None:
        self.at.append((time.perf_counter(), name))

    def _switch(self) -> None:
        name, fn = self.targets[self._next % len(self.targets)]
        self._next += 1
        self.mark(name)
        fn()

    def start(self) -> None:
        self.at = []
        if self.targets:
            self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def summary(self) -> dict[str, Any]:
        costs, own = [], []
        for t, name in self.at:
            # the gaps overlapping [t, t + window]: each counts from the switch on
            hit = [
                (end, g, c) for end, g, c in self.hb.beats if end > t and end - g / 1000 < t + SWITCH_WINDOW_S
            ]
            costs.append(
                (
                    round(max(((end - max(end - g / 1000, t)) * 1000 for end, g, _ in hit), default=0.0), 1),
                    name,
                )
            )
            own.append(round(sum(c for *_, c in hit), 1))
        ms, cpu = sorted(c for c, _ in costs), sorted(own)
        return {
            "switches": len(costs),
            "max_ms": ms[-1] if ms else None,
            "median_ms": ms[len(ms) // 2] if ms else None,
            "over_50ms": sum(c > TARGET_MS for c in ms),
            "gui_cpu_max_ms": cpu[-1] if cpu else None,
            "gui_cpu_median_ms": cpu[len(cpu) // 2] if cpu else None,
            "worst": sorted(costs, reverse=True)[:5],
        }


class Sampler(threading.Thread):
    """Wakes every 10 ms and records how late it woke while a beat is late: a late wake-up means some
    thread held the GIL (or the CPUs were taken). It deliberately takes no stacks: holding another
    thread's frames (``sys._current_frames()``) keeps their locals alive past the function's return,
    and a ``QPainter`` left alive after a ``paintEvent`` that relies on reference counting to end it
    crashed Qt painting in an early version of this bench. py-spy reads the stacks from outside."""

    def __init__(self, hb: Heartbeat) -> None:
        super().__init__(name="stall-sampler", daemon=True)
        self.hb = hb
        self.samples: list[tuple[float, float]] = []  # (t, woke late ms)
        self.names: dict[int, str] = {}
        self.native_names: dict[int, str] = {}  # Python thread names by OS thread id (for the clock)
        self._stop_evt = threading.Event()

    def run(self) -> None:
        expected = time.perf_counter() + 0.010
        n = 0
        while not self._stop_evt.wait(max(0.0, expected - time.perf_counter())):
            n += 1
            if n % 50 == 1:
                self.native_names.update({t.native_id: t.name for t in threading.enumerate() if t.native_id})
            now = time.perf_counter()
            late = (now - expected) * 1000
            expected = now + 0.010
            if self.hb.recording and now - self.hb.last > 0.020:
                self.samples.append((now, round(late, 1)))
                self.names.update({t.ident: t.name for t in threading.enumerate() if t.ident is not None})

    def stop(self) -> None:
        self._stop_evt.set()


class GcWatch:
    """Every garbage collection: when, which generation, how long (it holds the GIL throughout, in
    whichever thread allocated the object that triggered it)."""

    def __init__(self) -> None:
        self.events: list[tuple[float, float, int, int]] = []  # (start, end, generation, collected)
        self._start = 0.0
        gc.callbacks.append(self._cb)

    def _cb(self, phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._start = now
        else:
            self.events.append((self._start, now, info["generation"], info["collected"]))

    def during(self, t0: float, t1: float) -> list[dict[str, Any]]:
        return [
            {"generation": g, "ms": round((b - a) * 1000, 1), "collected": c}
            for a, b, g, c in self.events
            if b >= t0 and a <= t1 and b - a >= 0.005
        ]

    def summary(self, t0: float, t1: float) -> dict[str, Any]:
        inside = [(b - a, g) for a, b, g, _ in self.events if t0 <= a <= t1]
        gen2 = [d for d, g in inside if g == 2]
        return {
            "collections": len(inside),
            "total_ms": round(sum(d for d, _ in inside) * 1000),
            "gen2": len(gen2),
            "gen2_max_ms": round(max(gen2) * 1000, 1) if gen2 else None,
        }


MONITOR = r"""
import json, mmap, os, struct, subprocess, sys, time
shm, pid, spy, out, first_ms, native = sys.argv[1:7]
extra = ["--native"] if native == "1" else ["--nonblocking"]  # native stacks need a paused process
first = float(first_ms) / 1000
try:
    os.nice(-5)  # dump promptly when the CPUs are busy (allowed for root only; harmless otherwise)
except OSError:
    pass
with open(shm, "r+b") as f:
    mm = mmap.mmap(f.fileno(), 24)
dumped_for, n, running = None, 0, []
with open(out, "a") as log:
    def reap(block):
        for item in list(running):
            proc, beat, lag, t, path = item
            if block or proc.poll() is not None:
                proc.wait()
                text = open(path).read()
                os.unlink(path)
                try:
                    threads, stderr = json.loads(text), ""
                except ValueError:
                    threads, stderr = None, text
                log.write(json.dumps({"beat": beat, "lag_ms": round(lag * 1000, 1), "t": t,
                                      "took_ms": round((time.perf_counter() - t) * 1000, 1),
                                      "threads": threads, "err": stderr[-300:] if threads is None else ""}) + "\n")
                log.flush()
                running.remove(item)
    while True:
        last, recording, stop = struct.unpack_from("ddd", mm, 0)
        if stop:
            break
        reap(False)
        lag = time.perf_counter() - last
        if recording and lag > first and len(running) < 2:
            if last != dumped_for:
                dumped_for, n = last, 0
            if n < 2 and lag > first * 8 ** n:  # at 1x and 8x the threshold into one stall
                n += 1
                t = time.perf_counter()
                path = f"{out}.{t:.6f}.tmp"  # a file, not a pipe: a big dump must not block py-spy
                with open(path, "w") as sink:
                    proc = subprocess.Popen([spy, "dump", "--pid", pid, "--json", *extra],
                                            stdout=sink, stderr=subprocess.STDOUT)
                running.append((proc, last, lag, t, path))
        time.sleep(0.002)
    reap(True)
"""


CLOCK = r"""
import os, sys, time
out, period, pid = sys.argv[1], float(sys.argv[2]), sys.argv[3]
expected = time.perf_counter() + period
sched = open(f"/proc/{pid}/task/{pid}/schedstat", "rb", buffering=0)
stat = open("/proc/stat", "rb", buffering=0)
tasks = {}  # (pid, tid) -> open schedstat of every thread of the app and of its child processes


def sample():
    sched.seek(0)
    cpu, wait, _ = sched.read(200).split()
    stat.seek(0)
    steal = stat.read(200).split(b"\n", 1)[0].split()[8]
    return f"{int(cpu)} {int(wait)} {int(steal)}"


def discover(log):
    pids, i = [pid], 0
    while i < len(pids):  # the app and its descendants (children of any of their threads)
        for tid in os.listdir(f"/proc/{pids[i]}/task") if os.path.isdir(f"/proc/{pids[i]}") else ():
            try:
                pids += open(f"/proc/{pids[i]}/task/{tid}/children").read().split()
            except OSError:
                pass
        i += 1
    seen = set()
    for p in pids:
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            key = (p, tid)
            seen.add(key)
            if key not in tasks:
                try:
                    comm = open(f"/proc/{p}/task/{tid}/comm").read().strip().replace(" ", "_")
                    if p != pid:  # a child process: say which
                        cmd = open(f"/proc/{p}/cmdline", "rb").read()
                        role = [r for k, r in ((b"derive", "derive"), (b"gui-stall-turns", "server"),
                                               (b"schedstat", "clock"), (b"py-spy", "py-spy")) if k in cmd]
                        comm = f"{role[0] if role else 'child'}:{comm}" + ("" if tid == p else "-thread")
                    tasks[key] = open(f"/proc/{p}/task/{tid}/schedstat", "rb", buffering=0)
                except OSError:
                    continue
                log.write(f"N {p} {tid} {comm}\n")
    for key in set(tasks) - seen:
        tasks.pop(key).close()


def threads():
    parts = []
    for (p, tid), f in list(tasks.items()):
        try:
            f.seek(0)
            cpu, wait, _ = f.read(200).split()
        except (OSError, ValueError):
            continue
        parts.append(f"{tid}:{int(cpu) // 1000}:{int(wait) // 1000}")
    return " ".join(parts)


with open(out, "w") as log:
    n = 0
    while True:
        time.sleep(max(0.0, expected - time.perf_counter()))
        now = time.perf_counter()
        log.write(f"{now:.6f} {(now - expected) * 1000:.1f} {sample()}\n")
        n += 1
        if n % 100 == 1:
            discover(log)
        if n % 5 == 0:  # every thread's CPU and run-queue wait, every 10 ms (µs)
            log.write(f"T {now:.6f} {threads()}\n")
        if n % 50 == 0:
            log.flush()
        expected = now + period
"""


class Clock:
    """A process of its own at the app's priority that wakes every 2 ms and logs how late it woke.
    It shares no GIL with the app, so when it too wakes late during a stall, the machine's CPUs were
    taken (by every runnable thread and process, the app's own at lower priority included); when it
    wakes on time, the stall was the app's (its GIL or its GUI thread's work). ``perf_counter`` is
    ``CLOCK_MONOTONIC`` on Linux, the same clock in both processes.

    Each wake-up also reads the GUI thread's ``schedstat`` (ns on a CPU, ns runnable but waiting for
    one) and the machine's stolen time (``/proc/stat``, ticks a hypervisor gave the cores to another
    guest), so a stall splits into: the GUI thread working, waiting for a core, stolen from the whole
    machine, and asleep (waiting for the GIL, or for a lock)."""

    def __init__(self, work: Path, pid: int) -> None:
        self.log = work / "clock.txt"
        self.proc = subprocess.Popen([sys.executable, "-c", CLOCK, str(self.log), "0.002", str(pid)])

    def stop(self) -> list[tuple[float, ...]]:
        """(t, ms late, GUI thread's CPU ns, its run-queue wait ns, machine steal ticks) per wake-up;
        every thread's samples go to :attr:`threads` (see :meth:`busiest`)."""
        self.proc.terminate()
        self.proc.wait(10)
        if not self.log.exists():
            return []
        out: list[tuple[float, ...]] = []
        self.names: dict[str, str] = {}
        self.threads: list[tuple[float, dict[str, tuple[int, int]]]] = []
        for line in self.log.read_text().splitlines():
            fields = line.split()
            if len(fields) == 5:
                out.append(tuple(float(v) for v in fields))
            elif fields and fields[0] == "N" and len(fields) == 4:
                self.names[fields[2]] = f"{fields[3]}@{fields[1]}"
            elif fields and fields[0] == "T" and len(fields) >= 2:
                cur = {}
                for part in fields[2:]:
                    tid, cpu, wait = part.split(":")
                    cur[tid] = (int(cpu), int(wait))
                self.threads.append((float(fields[1]), cur))
        return out

    def busiest(self, t0: float, t1: float, names: dict[int, str]) -> list[tuple[str, float, float]]:
        """(thread, ms on a CPU, ms waiting for one) of every thread that ran during [t0, t1], most
        CPU first; ``names`` are the app's Python thread names by native id."""
        import bisect

        times = [t for t, _ in self.threads]
        i, j = bisect.bisect_right(times, t0) - 1, bisect.bisect_left(times, t1)
        if i < 0 or j >= len(self.threads):
            return []
        a, b = self.threads[i][1], self.threads[j][1]
        rows = []
        for tid, (cpu, wait) in b.items():
            c0, w0 = a.get(tid, (cpu, wait))
            if cpu - c0 >= 1000 or wait - w0 >= 1000:
                name = names.get(int(tid)) or self.names.get(tid, tid)
                rows.append((name, (cpu - c0) / 1000, (wait - w0) / 1000))
        return sorted(rows, key=lambda r: -r[1])


def split_stall(samples: list[tuple[float, ...]], t0: float, t1: float) -> dict[str, float] | None:
    """How the GUI thread spent a stall [t0, t1], from the clock's samples around it: ms on a CPU,
    ms runnable waiting for one, ms stolen from the machine (both cores, /proc/stat), ms asleep."""
    import bisect

    times = [s[0] for s in samples]
    i, j = bisect.bisect_right(times, t0) - 1, bisect.bisect_left(times, t1)
    if i < 0 or j >= len(samples):
        return None
    a, b = samples[i], samples[j]
    span = (b[0] - a[0]) * 1000
    cpu, wait = (b[2] - a[2]) / 1e6, (b[3] - a[3]) / 1e6
    steal = (b[4] - a[4]) * 10.0 / 2  # USER_HZ ticks summed over the 2 cores
    return {
        "window_ms": round(span, 1),
        "on_cpu_ms": round(cpu, 1),
        "runnable_ms": round(wait, 1),
        "stolen_ms": round(steal, 1),
        "asleep_ms": round(max(0.0, span - cpu - wait), 1),
    }


class Monitor:
    """The stall monitor process (see the module docstring) and the shared page it watches."""

    FIRST_MS = 35.0

    def __init__(self, spy: str, work: Path, native: bool = False) -> None:
        import mmap

        self.shm, self.log = work / "heartbeat.shm", work / "dumps.jsonl"
        self.shm.write_bytes(b"\0" * 24)
        self._f = open(self.shm, "r+b")  # noqa: SIM115 (lives as long as the bench)
        self.mm = mmap.mmap(self._f.fileno(), 24)
        argv = [
            str(self.shm),
            str(os.getpid()),
            spy,
            str(self.log),
            str(self.FIRST_MS),
            "1" if native else "0",
        ]
        self.proc = subprocess.Popen([sys.executable, "-c", MONITOR, *argv])

    def beat(self, t: float, recording: bool) -> None:
        struct.pack_into("dd", self.mm, 0, t, 1.0 if recording else 0.0)

    def stop(self) -> list[dict[str, Any]]:
        struct.pack_into("d", self.mm, 16, 1.0)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


def _spy_frames(thread: dict[str, Any]) -> list[str]:
    return [
        f"{_short(f.get('filename', '?'))}:{f.get('line')} {f.get('name')}" for f in thread.get("frames", [])
    ]


def _func(frame: str) -> str:
    """'path/file.py:123 Class.method' -> 'file.py Class.method'."""
    where, _, name = frame.partition(" ")
    return f"{where.rsplit(':', 1)[0].rsplit('/', 1)[-1]} {name}"


def explain_dump(dump: dict[str, Any]) -> dict[str, Any]:
    """One py-spy dump taken during a stall: who held the GIL, what the GUI thread was doing."""
    threads = dump.get("threads") or []
    gui = next((t for t in threads if t.get("thread_name") == "MainThread"), None)
    holder = next((t for t in threads if t.get("owns_gil")), None)
    gui_frames = _spy_frames(gui) if gui else []
    in_python = [f for f in gui_frames if ".py:" in f and not f.startswith("bench/gui_stall.py")]
    native = [f.split(" ", 1)[-1] for f in gui_frames if ".py:" not in f and "::" in f]  # --native-dumps
    active = bool(gui and gui.get("active"))
    if in_python:
        app = next((f for f in in_python if f.startswith("vrag_desktop/")), in_python[0])
        verdict = f"GUI thread runs Python: {app}"
        category = f"GUI thread in {_func(app)}"
        if holder is not gui:
            verdict += " (in a call that released the GIL)" if holder is None else " (waiting for the GIL)"
    elif holder is not None and holder is not gui:
        doing = "in Qt C++" if active else "waiting"
        hf = _spy_frames(holder)
        verdict = f"{holder.get('thread_name')} holds the GIL (GUI thread {doing}): {summarize(hf)}"
        what = (
            "importing"
            if any(f.endswith(" <module>") for f in hf)
            else _func(next((f for f in hf if f.startswith("vrag_desktop/")), hf[0] if hf else "?"))
        )
        category = f"{re.sub(r'[-_]?[0-9]+', '', str(holder.get('thread_name')))} holds the GIL: {what}"
    elif holder is gui:
        verdict = category = "GUI thread in Qt C++, holding the GIL"
        if native:
            verdict += ": " + " < ".join(native[:4])
    elif active:
        verdict = category = "GUI thread in Qt C++, GIL free"
        if native:
            verdict += ": " + " < ".join(native[:4])
    else:
        verdict = category = "GUI thread not running, GIL free (waiting for a CPU?)"
    out = {
        "lag_ms": dump.get("lag_ms"),
        "done_s": dump.get("t", 0.0) + (dump.get("took_ms") or 0.0) / 1000,
        "dump_took_ms": dump.get("took_ms"),
        "verdict": verdict,
        "category": category,
        "gil_holder": holder.get("thread_name") if holder else None,
        "gil_holder_stack": _spy_frames(holder)[:60] if holder else [],
        "gui_active": bool(gui and gui.get("active")),
        "gui_stack": gui_frames[:40],
        "busy_threads": {
            t.get("thread_name"): summarize(_spy_frames(t))
            for t in threads
            if t.get("active") and t is not gui and t is not holder
        },
    }
    if dump.get("err"):
        out["error"] = dump["err"]
    return out


# ============================================================================ the bench
class Bench:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        from PySide6.QtCore import QEventLoop, QTimer
        from PySide6.QtWidgets import QApplication

        from vrag_desktop.core.endpoints.profiles import EndpointProfile
        from vrag_desktop.core.settings import AppSettings, save_settings
        from vrag_desktop.qt.context import AppContext

        error_sink = _module("vrag_desktop.qt.infra.errors", "vrag_desktop.qt.errors").error_sink
        from vrag_desktop.qt.main_window import MainWindow

        self.args, self.work = args, work
        # what the app's main() does first (trees before it had no such step)
        try:
            priority: Any = _module("vrag_desktop.core.priority")
        except ImportError:
            priority = None
        if hasattr(priority, "passive_omp_workers") and not args.omp_spin:
            if "torch" in sys.modules:
                raise SystemExit("torch was imported before the app's OpenMP setting: fix the bench")
            priority.passive_omp_workers()
        if hasattr(priority, "derive_in_background"):  # the app's indexing workers: idle CPU only
            priority.derive_in_background()
        self.app = QApplication.instance() or QApplication([sys.argv[0]])
        save_settings(AppSettings(first_run_done=True), work / "cfg")
        self.ctx = AppContext.for_dirs(data_dir=work / "data", config_dir=work / "cfg")
        self.reports: list[tuple[float, str, str, str]] = []
        error_sink().reported.connect(lambda lv, t, m: self.reports.append((time.perf_counter(), lv, t, m)))

        self.turns = make_turns(args.think_chars)
        self.srv = scripted_server(self.turns, args.chunk, args.chunk_delay, args.server)
        profiles = self.ctx.profiles
        profiles.save(
            EndpointProfile(
                name="Scripted", kind="custom", base_url=self.srv.base_url, model="scripted-model"
            )
        )
        profiles.set_api_key("Scripted", "k-bench", session_only=True)

        self.window = MainWindow(self.ctx, first_run=False)
        self.window.show()
        try:  # what qt/app.main does right after the window shows (trees that have it)
            from vrag_desktop.core import warmup

            start = getattr(self.ctx, "start_warmup", warmup.start)  # + the embedder's preload
            self.warmup = start()
        except ImportError:
            self.warmup = None
        self.hb = Heartbeat()
        self.tabs = TabSwitches(self.hb, QTimer, args.dock_switch_s, self._dock_targets(args.dock_switch_s))
        self.gc = GcWatch()
        self.sampler = Sampler(self.hb)
        self.clock_samples: list[tuple[float, ...]] = []  # Clock.stop's samples
        self.clock: Clock | None = None
        self._QEventLoop, self._QTimer = QEventLoop, QTimer

        # workload state, shared by the slots below
        self.keep_running = False
        self.runs: list[tuple[str, str]] = []
        self.deltas = 0
        self.indexed: set[str] = set()
        self.ended: dict[str, str] = {}
        self._busy, self._run_tag = "", ""
        w = self.window
        w.corpora.indexed.connect(self.indexed.add)
        w.corpora.indexer.jobEnded.connect(lambda n, outcome: self.ended.__setitem__(n, outcome))
        w.corpora.busyChanged.connect(self._on_busy)
        agent_events(w.controller).connect(self._on_event)
        w.controller.finished.connect(self._on_run_finished)

    def _dock_targets(self, interval_s: float) -> list[tuple[str, Any]]:
        """The side docks a person moves between (History, Datasets, Evaluations, Training, Runtime),
        shown as one group of tabs, each raised in turn; none when ``interval_s`` is 0."""
        w = self.window
        names = ("history_dock", "datasets_dock", "evaluations_dock", "training_dock", "runtime_dock")
        docks = [getattr(w, n) for n in names if hasattr(w, n)]
        if interval_s <= 0 or len(docks) < 2:
            return []
        for d in docks:
            d.show()
        for d in docks[1:]:
            if d not in w.tabifiedDockWidgets(docks[0]):
                w.tabifyDockWidget(docks[0], d)
        return [(d.windowTitle(), d.raise_) for d in docks]

    # ---- slots
    def _retag(self) -> None:
        self.hb.tag = f"{self._busy or 'not indexing'} | {self._run_tag or 'no run'}"

    def _on_busy(self, busy: bool, text: str) -> None:
        self._busy = text if busy else ""
        self._retag()

    def _on_event(self, ev: Any) -> None:
        kind = type(ev).__name__
        if kind in ("ThinkDelta", "ContentDelta"):
            self.deltas += 1
            if self._run_tag.startswith("streaming"):
                return
            self._run_tag = "streaming a reply"
        else:
            self._run_tag = f"run event {kind}"
        self._retag()

    def _on_run_finished(self, status: str, run_id: str) -> None:
        self.runs.append((status, run_id))
        self._run_tag = ""
        self._retag()
        if self.keep_running:
            self._QTimer.singleShot(50, self.start_run)

    def start_run(self) -> None:
        RunRequest = _module(
            "vrag_desktop.qt.ask.run_controller", "vrag_desktop.qt.run_controller"
        ).RunRequest

        if self.keep_running and not self.window.controller.running:
            req = RunRequest(
                QUESTION, agent="vrag", profile="Scripted", corpora=("robots",), top_k=3, max_steps=10
            )
            self.window.start_run(req)

    # ---- running
    def wait_until(self, done: Any, timeout_s: float) -> bool:
        loop = self._QEventLoop()
        poll = self._QTimer()
        poll.setInterval(20)
        deadline = time.monotonic() + timeout_s
        poll.timeout.connect(lambda: loop.quit() if done() or time.monotonic() > deadline else None)
        poll.start()
        loop.exec()
        poll.stop()
        return bool(done())

    def measure(self, label: str, start: Any, done: Any, timeout_s: float) -> dict[str, Any]:
        from bench.ingest import Phase

        self.runs, self.deltas = [], 0
        n_reports = len(self.reports)
        self.hb.record(True)
        t0 = time.perf_counter()
        self.tabs.start()
        with Phase() as ph:
            start()
            finished = self.wait_until(done, timeout_s)
        self.tabs.stop()
        self.hb.record(False)
        self._phase_window = (t0, time.perf_counter())
        gaps = sorted(self.hb.gaps)
        return {
            "label": label,
            "finished": finished,
            "seconds": round(time.perf_counter() - t0, 1),
            "beats": len(gaps),
            "max_ms": round(gaps[-1], 1) if gaps else None,
            "p50_ms": round(percentile(gaps, 50), 2),
            "p99_ms": round(percentile(gaps, 99), 2),
            "p999_ms": round(percentile(gaps, 99.9), 2),
            "over_50ms": sum(g > 50 for g in gaps),
            "over_100ms": sum(g > 100 for g in gaps),
            "runs": [s for s, _ in self.runs],
            "stream_deltas": self.deltas,
            "cpu": ph.info,
            "reports": [r[1:] for r in self.reports[n_reports:]],
            "stalls": sorted(self.hb.stalls, key=lambda s: -s["gap_ms"]),
            "gc": self.gc.summary(*self._phase_window),
            "gc_tracked_objects_after": len(gc.get_objects()),  # frozen ones excluded
            "tab_switches": self.tabs.summary(),
        }

    def rep(self, k: int) -> dict[str, Any]:
        name = f"bench{k}"

        def start() -> None:
            self.keep_running = True
            self.window.corpora.add_and_index(name, [self.work / "docs"])
            # the question on the event loop's next turn, as a person's second click comes: both at
            # once made one GUI-thread turn of two actions' work (~25 ms each the first time)
            self._QTimer.singleShot(0, self.start_run)

        def done() -> bool:
            finished = name in self.indexed or name in self.ended
            if finished:
                self.keep_running = False
            return finished and not self.window.controller.running

        res = self.measure(f"index + stream, rep {k}", start, done, self.args.timeout)
        res["indexing_outcome"] = self.ended.get(name)
        return res

    def startup(self, seconds: float) -> dict[str, Any]:
        """From the window showing until the app's start-up work (the warm-up) is done, or
        ``seconds`` for an app that has none: what a person sees before doing anything."""
        until = time.monotonic() + seconds
        warm = self.warmup

        def done() -> bool:
            return not warm.is_alive() if warm is not None else time.monotonic() >= until

        res = self.measure("start-up (window shown → warm-up done)", lambda: None, done, 300)
        res["warmup"] = warm is not None
        return res

    def idle(self, seconds: float) -> dict[str, Any]:
        until = time.monotonic() + seconds
        return self.measure(
            "idle (noise floor)", lambda: None, lambda: time.monotonic() >= until, seconds + 5
        )

    def one_run(self, label: str) -> dict[str, Any]:
        def start() -> None:
            self.keep_running = True
            self.start_run()
            self.keep_running = False

        return self.measure(label, start, lambda: bool(self.runs) and not self.window.controller.running, 300)

    def unthrottled_stream(self) -> dict[str, Any]:
        w = self.window

        def render(_ev: Any) -> None:
            render_transcript(w.ask)

        agent_events(w.controller).connect(render)
        try:
            return self.one_run("baseline: one run, transcript rendered per event")
        finally:
            agent_events(w.controller).disconnect(render)

    def render_cost(self, repeat: int = 10) -> dict[str, Any] | None:
        """What one transcript redraw costs the GUI thread at the end of a run: the ask panel's
        ``render()`` (``setHtml`` of the whole transcript, every 100 ms while a run streams), then the
        layout and paint Qt does for it, forced here with a synchronous repaint."""
        runs = self.ctx.runs.list()
        if not runs:
            return None
        rid = runs[0].id
        ask = self.window.ask
        ask.load(QUESTION, self.ctx.runs.events(rid))
        html_chars = len(ask.to_html())
        render, paint = [], []
        for _ in range(repeat):
            t = time.perf_counter()
            render_transcript(ask)
            t1 = time.perf_counter()
            ask.view.viewport().repaint()
            paint.append((time.perf_counter() - t1) * 1000)
            render.append((t1 - t) * 1000)
            self.app.processEvents()
        render.sort()
        paint.sort()
        return {
            "run_blocks": len(ask.transcript.blocks),
            "html_chars": html_chars,
            "render_ms_median": round(render[len(render) // 2], 1),
            "render_ms_max": round(render[-1], 1),
            "layout_paint_ms_median": round(paint[len(paint) // 2], 1),
            "layout_paint_ms_max": round(paint[-1], 1),
        }

    def gui_thread_indexing(self) -> dict[str, Any]:
        from vrag_desktop.core.progress import CancelToken

        indexer = _module("vrag_desktop.qt.corpora.indexer", "vrag_desktop.qt.indexer")
        Job, run_job = indexer.Job, indexer.run_job

        state: dict[str, Any] = {"done": False}
        gen = run_job(
            self.ctx, Job("gui-thread", [str(self.work / "docs_small")], create=True), CancelToken()
        )
        ticker = self._QTimer()
        ticker.setInterval(0)

        def step() -> None:
            try:
                next(gen)
            except StopIteration:
                state["done"] = True
                ticker.stop()

        ticker.timeout.connect(step)
        res = self.measure(
            "baseline: indexing 2 PDFs on the GUI thread", ticker.start, lambda: state["done"], 600
        )
        ticker.stop()
        return res

    def training(self, max_steps: int, save_steps: int, switch_s: float) -> dict[str, Any]:
        """A real GRPO run of the tiny Qwen2-VL on CPU, launched through the Training dock's own path
        (``TrainingPanel.launch_new``, the trainer in its own env as a child process competing for the
        cores), with the dock raised and the run selected; the view's tabs are switched between Plots
        and Log every ``switch_s`` so the plots redraw and the log appends in view. Config: the
        ``train_config`` of tests/qt/test_training_panel.py with ``max_steps``/``save_steps``."""
        from vrag_desktop.core.runtime.trainer_env import find_trainer_python
        from vrag_desktop.core.training.config import TrainConfig

        python = find_trainer_python(None)
        if python is None:
            raise SystemExit("no trainer environment (.venv-trainer): the training phase needs one")
        os.environ["VRAG_TRAINER_PYTHON"] = str(python)
        for k, v in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("OMP_NUM_THREADS", "1")):
            os.environ[k] = v
        from toy_training import toy_run

        cfg = TrainConfig.from_mapping(
            toy_run(
                model=str(self.work / "tiny-qwen2-vl"),
                dataset=str(self.work / "dataset.json"),
                data_dir=str(self.ctx.data_dir),
                max_turns=2,
                max_response_length=24,
                max_model_len=2048,
                max_steps=max_steps,
                save_steps=save_steps,
            )
        )
        w = self.window
        panel, view = w.training, w.training.view
        w.training_dock.show()
        w.training_dock.raise_()
        tabs = [view.tabs.indexOf(view.plots), view.tabs.indexOf(view.log_view)]
        state: dict[str, Any] = {"root": None, "switches": 0, "seen_running": False}

        def retag() -> None:
            tab = view.tabs.tabText(view.tabs.currentIndex())
            self.hb.tag = (
                f"training: {view.status_text or 'starting'}, {view.rows_seen} steps plotted | tab {tab}"
            )

        def switch() -> None:
            self.tabs.mark("Training: " + ("Plots", "Log")[state["switches"] % len(tabs)])
            view.tabs.setCurrentIndex(tabs[state["switches"] % len(tabs)])
            state["switches"] += 1
            retag()

        switcher = self._QTimer()
        switcher.setInterval(int(switch_s * 1000))
        switcher.timeout.connect(switch)

        def start() -> None:
            state["root"] = panel.launch_new(cfg, self.ctx.layout.training / "bench")
            if state["root"] is None:
                raise SystemExit("the Training panel refused to launch the run (see the errors above)")
            switcher.start()
            retag()

        def done() -> bool:
            root = state["root"]
            if root is None or view.root != root:
                return False
            status = view.status_text
            state["seen_running"] |= status == "running"
            retag()
            return (
                state["seen_running"]
                and status in ("finished", "failed", "stopped", "interrupted")
                and not panel.processes.is_ours(root)
            )

        label = f"training: real GRPO run ({max_steps} steps, tiny Qwen2-VL, CPU), Training dock shown"
        try:
            res = self.measure(label, start, done, self.args.timeout)
        finally:
            switcher.stop()
        root = state["root"]
        log = root / "train.log" if root is not None else None
        res["training"] = {
            "status": view.status_text,
            "steps_plotted": view.rows_seen,
            "points_reward": view.plots.point_count("reward"),
            "tab_switches": state["switches"],
            "log_lines": len(log.read_text(errors="replace").splitlines()) if log and log.exists() else None,
            "trainer_python": str(python),
        }
        return res

    def explain(self, res: dict[str, Any], dumps: list[dict[str, Any]] | None) -> None:
        """Attach to each of the top stalls the py-spy dumps taken during it, and the watchdog's lateness."""
        by_beat: dict[float, list[dict[str, Any]]] = {}
        for d in dumps or []:
            by_beat.setdefault(d["beat"], []).append(d)
        tally: dict[str, list[float]] = {}
        for i, s in enumerate(res["stalls"]):
            t0, t1 = s.pop("_window")
            if i >= self.args.top and s["gap_ms"] <= TARGET_MS:
                continue
            if dumps is not None:
                s["dumps"] = [explain_dump(d) for d in by_beat.get(t0, [])]
                for d in s["dumps"]:  # py-spy reads the stacks at the end of its run
                    d["finished_inside_stall"] = d.pop("done_s") <= t1
            gcs = self.gc.during(t0, t1)
            s["gc"] = gcs
            big_gc = [g for g in gcs if g["ms"] >= s["gap_ms"] / 2]
            if dumps is not None and s["gap_ms"] > TARGET_MS:
                inside = [d for d in s["dumps"] if d["finished_inside_stall"]]
                if big_gc:
                    cat = f"garbage collection (generation {big_gc[0]['generation']})"
                else:
                    cat = inside[0]["category"] if inside else "no dump finished inside the stall"
                tally.setdefault(cat, []).append(s["gap_ms"])
            late = [late for (t, late) in self.sampler.samples if t0 <= t <= t1 + 0.011]
            s["watchdog_max_late_ms"] = max(late, default=None)
            other = [c[1] for c in self.clock_samples if t0 <= c[0] <= t1 + 0.003 and c[1] > 4.0]
            s["clock_max_late_ms"] = max(other, default=0.0)
            s["gui_thread"] = split_stall(self.clock_samples, t0, t1)
            if self.clock is not None:
                s["threads"] = [
                    {"thread": n, "cpu_ms": round(c, 1), "runnable_ms": round(w, 1)}
                    for n, c, w in self.clock.busiest(t0, t1, self.sampler.native_names)
                ]
        if dumps is not None:
            res["causes_over_50ms"] = sorted(
                (
                    {"cause": c, "count": len(g), "total_ms": round(sum(g)), "max_ms": round(max(g))}
                    for c, g in tally.items()
                ),
                key=lambda r: -r["total_ms"],
            )

    def renice_workers(self, nice: int) -> None:
        """Experiment: lower the CPU priority of every thread but the GUI thread (and the scripted
        server's, which stands for a remote machine), re-applied as threads come and go. Threads
        created by a reniced thread (torch's and onnxruntime's pools) inherit its priority."""
        gui = threading.get_native_id()

        def apply() -> None:
            server = {
                t.native_id
                for t in threading.enumerate()
                if t.name.startswith("scripted-openai") or "process_request_thread" in t.name
            }
            for tid in os.listdir("/proc/self/task"):
                if int(tid) != gui and int(tid) not in server:
                    try:
                        if os.getpriority(os.PRIO_PROCESS, int(tid)) != nice:
                            os.setpriority(os.PRIO_PROCESS, int(tid), nice)
                    except OSError:
                        pass

        self._renice = self._QTimer()
        self._renice.setInterval(200)
        self._renice.timeout.connect(apply)
        self._renice.start()
        apply()

    def freeze_gc_after_model_load(self) -> None:
        """Experiment, the fix proposed for the collector's stalls: no collections while torch and
        transformers load (each one walks the growing heap holding the GIL), then ``gc.freeze()``
        so later full collections skip the ~400k long-lived objects they leave (a full collection
        of them holds the GIL ~0.2 s on an idle machine, longer on a busy one)."""
        gc.disable()
        timer = self._QTimer()
        timer.setInterval(100)

        def check() -> None:
            if "embedder" in self.ctx._cache:
                gc.freeze()
                gc.enable()
                timer.stop()
                print(f"  (gc.freeze(): {gc.get_freeze_count()} objects)", flush=True)

        timer.timeout.connect(check)
        timer.start()
        self._freeze_timer = timer

    def close(self) -> None:
        self.window.close()
        self.srv.stop()


def find_py_spy(arg: str | None) -> str | None:
    if arg:
        return None if arg == "none" else arg
    in_venv = Path(sys.prefix) / "bin" / "py-spy"  # pip install py-spy into the venv
    return shutil.which("py-spy") or (str(in_venv) if in_venv.exists() else None)


def stall_cause(s: dict[str, Any]) -> str:
    """One line: a garbage collection covering the stall, else the first dump taken during it."""
    big_gc = [g for g in s.get("gc", []) if g["ms"] >= s["gap_ms"] / 2]
    if big_gc:
        g = big_gc[0]
        return f"garbage collection, generation {g['generation']}: {g['ms']:.0f} ms ({g['collected']} objects freed)"
    dumps = s.get("dumps")
    if dumps is None:
        late = s.get("watchdog_max_late_ms")
        return f"(no py-spy) a watchdog thread woke {late} ms late" if late else "(no py-spy)"
    if not dumps:
        return "(stall ended before the monitor's dump)"
    d = dumps[0]
    late = "" if d["finished_inside_stall"] else ", read after the stall ended"
    return f"{d['verdict']} (dump at {d['lag_ms']:.0f} ms{late})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pdfs", type=int, default=15)
    ap.add_argument("--pages", type=int, default=300)
    ap.add_argument("--ocr-every", type=int, default=20, help="every Nth page is a scan with no text layer")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--think-chars", type=int, default=1500, help="thinking text per model turn")
    ap.add_argument("--chunk", type=int, default=4, help="characters per streamed chunk")
    ap.add_argument("--chunk-delay", type=float, default=0.002, help="seconds between chunks")
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument(
        "--phases",
        default="index,baselines",
        help="comma-separated, in order: index (the index + stream repetitions), baselines (idle, one run, "
        "unthrottled stream, GUI-thread indexing), training (a real tiny GRPO run shown in the Training "
        "dock; needs .venv-trainer)",
    )
    ap.add_argument("--train-steps", type=int, default=30, help="training phase: max_steps")
    ap.add_argument("--train-save-steps", type=int, default=10, help="training phase: save_steps")
    ap.add_argument(
        "--tab-switch-s", type=float, default=2.0, help="training phase: seconds between tab switches"
    )
    ap.add_argument(
        "--dock-switch-s",
        type=float,
        default=1.3,
        help="every phase: seconds between switches of the side docks' tabs (History, Datasets, …); 0: none",
    )
    ap.add_argument(
        "--startup",
        type=float,
        default=0.0,
        metavar="S",
        help="measure from the window showing until the warm-up ends (S seconds for an app without one)",
    )
    ap.add_argument("--top", type=int, default=5, help="stalls explained per phase")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per repetition at most")
    ap.add_argument(
        "--py-spy", default=None, help="path to py-spy ('none': without it; default: found on PATH)"
    )
    ap.add_argument(
        "--xcb", action="store_true", help="the X11 platform (needs a display) instead of offscreen"
    )
    ap.add_argument(
        "--server",
        choices=("process", "thread"),
        default="process",
        help="where the scripted model server runs: a child process, as a real endpoint (default), "
        "or a thread of the app's process (as before 2026-11-26; it then competes for the app's GIL)",
    )
    ap.add_argument(
        "--renice-workers",
        type=int,
        default=None,
        metavar="N",
        help="experiment, not the product: give every thread of the app but the GUI thread nice N",
    )
    ap.add_argument(
        "--gc-freeze",
        action="store_true",
        help="experiment, not the product: no garbage collection until the embedder has loaded, then gc.freeze()",
    )
    ap.add_argument(
        "--switch-interval",
        type=float,
        help="experiment: sys.setswitchinterval(S) before the app starts (how soon a thread waiting for "
        "the GIL asks its holder to let go; Python's default is 0.005)",
    )
    ap.add_argument(
        "--native-dumps",
        action="store_true",
        help="diagnosis only: dumps with C/C++ frames (py-spy pauses the app ~0.2 s per dump, so the "
        "figures of such a run are distorted)",
    )
    ap.add_argument(
        "--no-clock",
        action="store_true",
        help="without the clock process (it wakes every 2 ms; does its keeping a core awake change the figures?)",
    )
    ap.add_argument(
        "--omp-spin",
        action="store_true",
        help="experiment: leave OpenMP's default wait policy (workers spin after each region) as before §5.17",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "gui_stall.json")
    ap.add_argument("--prepare", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--prepare-training", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    if args.prepare:
        prepare(args.prepare, args.pdfs, args.pages, args.ocr_every, seed=7)
        return
    if args.prepare_training:
        prepare_training(args.prepare_training)
        return
    wanted = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = set(wanted) - {"index", "baselines", "training"}
    if unknown:
        ap.error(f"unknown phases: {sorted(unknown)}")
    if args.no_baselines and "baselines" in wanted:
        wanted.remove("baselines")

    work = Path(tempfile.mkdtemp(prefix="vrag-guistall-"))
    t = time.perf_counter()
    prepared = {"pdfs": 0, "pages": 0, "scanned_pages": 0}
    if "index" in wanted or "baselines" in wanted:
        sizes = ["--pdfs", str(args.pdfs), "--pages", str(args.pages), "--ocr-every", str(args.ocr_every)]
        subprocess.run([sys.executable, __file__, "--prepare", str(work), *sizes], check=True)
        prepared = json.loads((work / "prepared.json").read_text())
        print(f"prepared {prepared} in {time.perf_counter() - t:.0f} s", flush=True)
    if "training" in wanted:
        t = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--prepare-training", str(work)], check=True)
        print(f"prepared the tiny model and toy corpus in {time.perf_counter() - t:.0f} s", flush=True)
    os.environ["QT_QPA_PLATFORM"] = "xcb" if args.xcb else "offscreen"
    os.environ["VRAG_DESKTOP_DATA_DIR"] = str(work / "data")
    os.environ["VRAG_DESKTOP_CONFIG_DIR"] = str(work / "cfg")
    os.environ.setdefault("QT_API", "pyside6")

    bench = Bench(args, work)
    if not args.startup:
        # the window settles: at least 2 s, and until the app's start-up warm-up has ended (its
        # imports hold the GIL in 50-100 ms slices; --startup measures them as a phase of their own)
        settle_from = time.monotonic()
        warm = bench.warmup
        bench.wait_until(
            lambda: time.monotonic() - settle_from >= 2.0 and (warm is None or not warm.is_alive()), 300
        )
        print(f"  settled: {time.monotonic() - settle_from:.1f} s (warm-up ended)", flush=True)
    spy_exe = find_py_spy(args.py_spy)
    monitor = Monitor(spy_exe, work, native=args.native_dumps) if spy_exe else None
    bench.hb.monitor = monitor
    if args.renice_workers is not None:
        bench.renice_workers(args.renice_workers)
    if args.gc_freeze:
        bench.freeze_gc_after_model_load()
    clock = None if args.no_clock else Clock(work, os.getpid())
    bench.hb.start()
    bench.sampler.start()
    phases: list[dict[str, Any]] = []
    try:
        if args.startup:
            phases.append(bench.startup(args.startup))
            print(
                f"  {phases[-1]['label']}: {phases[-1]['seconds']} s, max {phases[-1]['max_ms']} ms",
                flush=True,
            )
        render = None
        if "baselines" in wanted:  # the noise floor first, as always
            phases.append(bench.idle(args.idle_seconds))
            print(f"  {phases[-1]['label']}: max {phases[-1]['max_ms']} ms", flush=True)
        for which in wanted:
            if which == "index":
                for k in range(1, args.reps + 1):
                    phases.append(bench.rep(k))
                    p = phases[-1]
                    print(
                        f"  {p['label']}: {p['seconds']} s, max {p['max_ms']} ms, p99 {p['p99_ms']} ms, "
                        f"{p['over_50ms']} gaps > 50 ms, runs {p['runs']}",
                        flush=True,
                    )
            elif which == "baselines":
                for fn in (
                    lambda: bench.one_run("one run alone (product rendering)"),
                    bench.unthrottled_stream,
                    bench.gui_thread_indexing,
                ):
                    phases.append(fn())
                    print(f"  {phases[-1]['label']}: max {phases[-1]['max_ms']} ms", flush=True)
                render = bench.render_cost()
            elif which == "training":
                phases.append(bench.training(args.train_steps, args.train_save_steps, args.tab_switch_s))
                p = phases[-1]
                print(
                    f"  {p['label']}: {p['seconds']} s, max {p['max_ms']} ms, p99 {p['p99_ms']} ms, "
                    f"{p['over_50ms']} gaps > 50 ms, {p['training']}",
                    flush=True,
                )
    finally:
        bench.sampler.stop()
        bench.hb.stop()
        bench.close()
    dumps = monitor.stop() if monitor is not None else None
    bench.clock_samples = clock.stop() if clock is not None else []
    bench.clock = clock
    for p in phases:
        bench.explain(p, dumps)

    from bench.ingest import machine_info

    report = {
        "machine": machine_info(),
        "platform_plugin": os.environ["QT_QPA_PLATFORM"],
        "switch_interval_s": sys.getswitchinterval(),
        "heartbeat_ms": BEAT_MS,
        "target_ms": TARGET_MS,
        "py_spy": spy_exe,
        "renice_workers": args.renice_workers,
        "server": args.server,
        "native_dumps": args.native_dumps,
        "gc_freeze": args.gc_freeze,
        "stall_dumps_taken": len(dumps) if dumps is not None else None,
        "corpus": prepared,
        "stream": {
            "turns_per_run": len(bench.turns),
            "chunk_chars": args.chunk,
            "chunk_delay_s": args.chunk_delay,
            "think_chars": args.think_chars,
        },
        "phases": phases,
        "transcript_redraw": render,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str))
    if args.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)

    print(
        f"\n{prepared['pages']} pages in {prepared['pdfs']} PDFs ({prepared['scanned_pages']} scanned, OCR'd); "
        f"runs of {len(bench.turns)} turns streamed in {args.chunk}-char chunks every "
        f"{args.chunk_delay * 1000:.0f} ms; heartbeat {BEAT_MS} ms; platform {os.environ['QT_QPA_PLATFORM']}; "
        f"py-spy {'on' if spy_exe else 'off'}; scripted server in a {args.server}"
        + (
            f"; EXPERIMENT: other threads at nice {args.renice_workers}"
            if args.renice_workers is not None
            else ""
        )
        + ("; EXPERIMENT: gc off until the model loaded, then gc.freeze()" if args.gc_freeze else "")
        + "\n"
    )
    print(
        "| Phase | s | max gap ms | p99 | p99.9 | gaps > 50 ms | runs | stream events | gen-2 GCs (longest ms) "
        "| others' CPU |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for p in phases:
        print(
            f"| {p['label']} | {p['seconds']} | **{p['max_ms']}** | {p['p99_ms']} | {p['p999_ms']} | "
            f"{p['over_50ms']} | {len(p['runs'])} | {p['stream_deltas']} | "
            f"{p['gc']['gen2']} ({p['gc']['gen2_max_ms']}) | "
            f"{p['cpu']['other_cpu_share']:.0%} |"
        )
    print(f"\nTarget: longest stall ≤ {TARGET_MS:.0f} ms while indexing and streaming.")
    print(
        "\n| Phase | tab switches | longest switch ms | median ms | switches > 50 ms "
        "| GUI thread's own CPU per switch, median / max ms | slowest (ms, tab) |"
    )
    print("|---|---|---|---|---|---|---|")
    for p in phases:
        t = p.get("tab_switches") or {}
        if t.get("switches"):
            worst = ", ".join(f"{ms} {name}" for ms, name in t["worst"][:3])
            print(
                f"| {p['label']} | {t['switches']} | **{t['max_ms']}** | {t['median_ms']} | "
                f"{t['over_50ms']} | {t.get('gui_cpu_median_ms')} / {t.get('gui_cpu_max_ms')} | {worst} |"
            )
    if render:
        print(
            f"\nOne transcript redraw at the end of a run ({render['run_blocks']} blocks, {render['html_chars']:,} "
            f"chars of HTML), app otherwise idle: render() {render['render_ms_median']} ms, then layout "
            f"and paint {render['layout_paint_ms_median']} ms (medians of 10)"
        )
    for p in phases:
        top = [s for s in p["stalls"][: args.top] if s["gap_ms"] > TARGET_MS]
        if not top:
            continue
        print(f"\n### {p['label']}: stalls > {TARGET_MS:.0f} ms\n")
        print(
            "| gap ms | at s | during | cause (py-spy dump during the stall) | watchdog thread / "
            "other process woke late, ms |"
        )
        print("|---|---|---|---|---|")
        for s in top:
            print(
                f"| {s['gap_ms']:.0f} | {s['end_s']:.1f} | {s['during']} | {stall_cause(s)} | "
                f"{s.get('watchdog_max_late_ms')} / {s.get('clock_max_late_ms')} |"
            )
    for p in phases:
        split = [s for s in p["stalls"][: args.top] if s.get("gui_thread")][:5]
        if split and p["label"].startswith(("index + stream", "training")):
            print(
                f"\n{p['label']}: the {len(split)} longest stalls, how the GUI thread spent them "
                "(its schedstat; stolen: the machine's cores taken by the hypervisor)\n"
            )
            print(
                "| gap ms | during | on a CPU | waiting for a CPU | stolen | asleep (GIL, locks) "
                "| other threads on a CPU, ms |"
            )
            print("|---|---|---|---|---|---|---|")
            for s in split:
                g = s["gui_thread"]
                others = ", ".join(
                    f"{t['thread']} {t['cpu_ms']:.0f}"
                    for t in s.get("threads", [])
                    if t["thread"] != "MainThread"
                )
                print(
                    f"| {s['gap_ms']:.0f} | {s['during']} | {g['on_cpu_ms']} | {g['runnable_ms']} | "
                    f"{g['stolen_ms']} | {g['asleep_ms']} | {others[:160]} |"
                )
    for p in phases:
        if p.get("causes_over_50ms") and p["label"].startswith(("index + stream", "training")):
            print(
                f"\n{p['label']}: all {p['over_50ms']} stalls > {TARGET_MS:.0f} ms by cause "
                "(first dump read inside it)\n"
            )
            print("| cause | stalls | total ms | longest ms |\n|---|---|---|---|")
            for c in p["causes_over_50ms"]:
                print(f"| {c['cause']} | {c['count']} | {c['total_ms']} | {c['max_ms']} |")
    errors = [r for p in phases for r in p["reports"] if r[0] == "error"]
    if errors:
        print("\nErrors reported during the bench:", *errors, sep="\n  ")


if __name__ == "__main__":
    main()
