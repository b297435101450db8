"""VimRAG encodes the next context's pictures ahead, while the model writes its judgement (issue 8).

The rebuild after a memorize must then find its encodings made, and the model must receive the
bytes it receives without encoding ahead — however the model judged, and however fast it replied
(the encoding ahead is then still running while the rebuild starts). Real pages (JPEG files of a
200-dpi render), the agents' own run objects.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from agent_script import PageSearcher, RecordingModel, make_pages, vimrag_replies

from vrag_desktop.core.agents import memory_energy
from vrag_desktop.core.agents.memory_energy import Frame, MemoryEntry, energies, outcomes, select
from vrag_desktop.core.agents.memory_graph import MemoryGraph
from vrag_desktop.core.agents.vimrag import VimRAGAgent
from vrag_desktop.core.agents.vimrag import _Run as VimRun
from vrag_desktop.core.agents.vimrag_media import _Pending


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_pages(tmp_path_factory.mktemp("pages"), 9)


def grown(pages: list[Path], out: Path, encode_ahead: bool, judgements: list[list[int | None]]) -> list[str]:
    """A run searching once per judgement (3 pages each), judged as given (None: not useful), the
    context rebuilt after each; the digests of the contexts, and checks on who encoded what."""
    agent = VimRAGAgent(None, PageSearcher(pages), image_dir=out, encode_ahead=encode_ahead)  # type: ignore[arg-type]
    out.mkdir(parents=True, exist_ok=True)
    run = VimRun(agent, "What was the revenue?")
    made_here: list[int] = []
    lock = threading.Lock()
    original = memory_energy.MemoryPictures._run_job

    def counting(self: Any, job: Any, kept: Any) -> Any:  # during the rebuild, on any thread
        with lock:
            made_here[-1] += 1
        return original(self, job, kept)

    digests = []
    for i, priorities in enumerate(judgements):
        node = f"step {i}"
        run.step = i + 1  # names the step's files
        run.graph.add_search(node, ["root" if i == 0 else f"step {i - 1}"], f"revenue part {i}")
        run.pending = _Pending(node, run.prepare(agent.searcher.search(node, 3)).items)
        if encode_ahead:
            run.speculate_pending(run.pending)
            run.settle(60)  # the model took its time
        memorize = [
            {
                "information_id": f"Picture {j + 1}",
                "is_useful": p is not None,
                "priority_score": p or 1,
                "key_timestamp": [],
            }
            for j, p in enumerate(priorities)
        ]
        entries, _, problems = run.judge(run.pending, memorize)
        assert problems == []
        run.graph.memorize(node, "found", entries)
        run.pending = None
        made_here.append(0)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(memory_energy.MemoryPictures, "_run_job", counting)
            context = run.build_context()
        digests.append(hashlib.sha256(json.dumps(context, sort_keys=True).encode()).hexdigest())
        if encode_ahead:
            assert made_here[-1] == 0, f"step {i}: the rebuild encoded {made_here[-1]} pictures itself"
    return digests


def test_rebuilds_find_their_encodings_made_and_send_the_same_bytes(
    pages: list[Path], tmp_path: Path
) -> None:
    judgements: list[list[int | None]] = [
        [5, 3, None],
        [2, None, 4],
        [1, 1, 1],
        [None, None, None],
        [4, 5, 3],
        [3, None, 2],
    ]
    ahead = grown(pages, tmp_path / "ahead", True, judgements)
    plain = grown(pages, tmp_path / "plain", False, judgements)
    assert ahead == plain and len(set(ahead)) == len(judgements)


def test_a_prefetch_that_starts_after_its_rebuild_encodes_nothing(pages: list[Path], tmp_path: Path) -> None:
    """The encoder threads are busy while a rebuild runs, so it makes its pictures itself; the jobs
    it prefetched, started afterwards, must not encode them again (they did, and a CI run counted
    them in the next rebuild)."""
    agent = VimRAGAgent(None, PageSearcher(pages), image_dir=tmp_path, encode_ahead=False)  # type: ignore[arg-type]
    run = VimRun(agent, "What was the revenue?")
    run.graph.add_search("s", ["root"], "revenue")
    pending = _Pending("s", run.prepare(agent.searcher.search("s", 3)).items)
    judged = [
        {"information_id": f"Picture {j + 1}", "is_useful": True, "priority_score": 3, "key_timestamp": []}
        for j in range(3)
    ]
    entries, _, problems = run.judge(pending, judged)
    assert problems == [] and len(entries) == 3
    run.graph.memorize("s", "found", entries)

    pool = memory_energy._encoders()
    n = pool._max_workers
    gate = threading.Event()
    busy = [pool.submit(gate.wait, 30) for _ in range(n)]
    calls: list[str] = []
    original = memory_energy.MemoryPictures._run_job

    def counting(self: Any, job: Any, kept: Any) -> Any:
        calls.append(threading.current_thread().name)
        return original(self, job, kept)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(memory_energy.MemoryPictures, "_run_job", counting)
        run.build_context()
        assert calls == ["MainThread"] * 3  # the rebuild made its three pictures itself
        gate.set()
        for f in busy:
            f.result(5)
        everyone = threading.Barrier(n)
        for f in [pool.submit(everyone.wait, 5) for _ in range(n)]:
            f.result(10)  # every thread got here: all the prefetched jobs before have run
    assert calls == ["MainThread"] * 3


def test_a_model_replying_at_once_gets_the_same_bytes(pages: list[Path], tmp_path: Path) -> None:
    """The encoding ahead races the rebuild (a scripted model answers instantly): same requests."""

    def digests(encode_ahead: bool, out: Path) -> list[str]:
        model = RecordingModel(vimrag_replies(6))
        agent = VimRAGAgent(
            model, PageSearcher(pages), image_dir=out, max_steps=14, encode_ahead=encode_ahead
        )

        async def go() -> list[str]:
            return [type(ev).__name__ async for ev in agent.run("What was the revenue?")]

        assert asyncio.run(go())[-1] == "Answer"
        return model.digests

    assert digests(True, tmp_path / "a") == digests(False, tmp_path / "b")


def test_the_real_judgement_is_among_the_outcomes_encoded_ahead(pages: list[Path]) -> None:
    g = MemoryGraph("Q")
    for i in range(7):
        g.add_search(f"n{i}", ["root" if i < 2 else f"n{i - 2}"], f"query {i}")
        g.memorize(f"n{i}", "s", [MemoryEntry("Picture 1", "image", 1 + i % 5, [Frame(str(pages[i]))])])
    g.add_search("new", ["n6", "n3"], "latest")
    candidates = [MemoryEntry(f"Picture {j + 1}", "image", 3, [Frame(str(pages[j]))]) for j in range(3)]
    possible = outcomes(g.nodes, "new", candidates, top_k=5, total_pixels=2_007_040)
    assert len(possible) == 6**3
    g.memorize(
        "new",
        "s",
        [
            MemoryEntry("Picture 1", "image", 4, candidates[0].frames),
            MemoryEntry("Picture 3", "image", 2, candidates[2].frames),
        ],
    )
    assert g.select_memory(5, 2_007_040) in possible
    # the energy is the graph's: the same numbers from the node list alone
    assert select(g.nodes, 5, 2_007_040) == g.select_memory(5, 2_007_040)
    assert [s.omega for s in energies(g.nodes)] == [s.omega for s in g.energies()]
    many = [MemoryEntry(f"Picture {j + 1}", "image", 3, [Frame(str(pages[j]))]) for j in range(5)]
    assert len(outcomes(g.nodes, "new", many)) == 6  # beyond 3 items: one priority for all
