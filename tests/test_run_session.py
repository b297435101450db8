"""The one run path (issue 28, 5): :class:`RunSession` records, assembles and runs an agent, and every
front door — the Python API, ``vrag-desktop ask``, evaluations, the Ask panel — goes through it.

A scripted model over real HTTP answers; the corpus is real (MiniLM, FAISS, SQLite)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from conftest import cli, index_paths
from scripted_openai import ScriptedOpenAI

from vrag_desktop.core.run.assemble import AgentOptions, Endpoint, SearchSource
from vrag_desktop.core.run.session import RunSession, RunSpec
from vrag_desktop.core.run.store import RunStore

SCRIPT = [
    {"content": "<think>Find the spec page.</think>\n<search>Atlas robot payload</search>"},
    {"content": "<think>It says 450 kg.</think>\n<answer>450 kg</answer>"},
]


@pytest.fixture
def corpus(library, minilm, make_pdf):  # type: ignore[no-untyped-def]
    pdf = make_pdf("robots.pdf", ["Atlas warehouse robot: payload 450 kg, battery 14 hours."])
    index_paths(library, "c", [pdf], minilm)[0].close()
    return "c"


def test_a_session_saves_its_run_with_what_made_it(corpus: str, data_dir: Path) -> None:
    with ScriptedOpenAI(SCRIPT) as srv:
        spec = RunSpec(
            "vrag",
            Endpoint.from_url(srv.base_url, "served"),
            SearchSource(corpora=[corpus], data_dir=data_dir),
            AgentOptions.for_agent("vrag", top_k=2),
            data_dir,
        )
        session = RunSession(spec)
        events = list(session.run("How heavy a load can Atlas carry?"))
    assert events[-1]["event"] == "answer" and events[-1]["content"] == "450 kg"
    assert session.status == "answered" and session.run_id
    run = RunStore(data_dir / "runs").summary(session.run_id)
    assert run.status == "answered" and run.answer == "450 kg"
    assert run.settings == {
        "model": "served",
        "base_url": srv.base_url,
        "search_url": None,
        "corpora": [corpus],
        "max_steps": 10,  # the VRAG demo's default, as ask and the API have it
        "top_k": 2,
    }


def test_a_run_that_cannot_be_assembled_is_a_saved_failure(data_dir: Path) -> None:
    spec = RunSpec(
        "vrag",
        Endpoint.from_url("http://127.0.0.1:9/v1", "m"),
        SearchSource(corpora=["no-such-corpus"], data_dir=data_dir),
        data_dir=data_dir,
    )
    session = RunSession(spec)
    events = list(session.run("anything"))
    assert [e["event"] for e in events] == ["error"] and "no-such-corpus" in events[0]["content"]
    assert session.status == "failed"
    assert RunStore(data_dir / "runs").summary(session.run_id or "").status == "failed"


def test_a_stopped_run_is_saved_as_cancelled(corpus: str, data_dir: Path) -> None:
    slow = [{"content": "<think>Let me think about it at length.</think>", "delay": 30}]
    with ScriptedOpenAI(slow) as srv:
        session = RunSession(
            RunSpec(
                "vrag",
                Endpoint.from_url(srv.base_url, "m"),
                SearchSource(corpora=[corpus], data_dir=data_dir),
                data_dir=data_dir,
            )
        )

        async def main() -> None:
            async def consume() -> None:
                async for _ in session.events("q"):
                    pass

            task = asyncio.ensure_future(consume())
            await asyncio.sleep(1.0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
    assert session.status == "cancelled"
    assert RunStore(data_dir / "runs").summary(session.run_id or "").status == "cancelled"


def test_one_session_asks_many_questions_each_its_own_saved_run(corpus: str, data_dir: Path) -> None:
    """How an evaluation uses it: one session, a run per question, ``run_id`` the latest."""
    with ScriptedOpenAI(SCRIPT * 2) as srv:
        session = RunSession(
            RunSpec(
                "vrag",
                Endpoint.from_url(srv.base_url, "m"),
                SearchSource(corpora=[corpus], data_dir=data_dir),
                data_dir=data_dir,
            )
        )
        ids = []
        for q in ("first?", "second?"):
            list(session.run(q))
            ids.append(session.run_id)
    assert len(set(ids)) == 2
    assert [r.question for r in sorted(RunStore(data_dir / "runs").list(), key=lambda r: r.started_at)] == [
        "first?",
        "second?",
    ]


def test_the_cli_and_the_api_record_the_same_run(corpus: str, data_dir: Path) -> None:
    from vrag_desktop import VRAG

    with ScriptedOpenAI(SCRIPT * 2) as srv:
        api = VRAG(
            base_url=srv.base_url, search_url=None, model_name="m", corpora=[corpus], data_dir=data_dir
        )
        list(api.run("How heavy?"))
        done = cli(
            "ask",
            "How heavy?",
            "--corpus",
            corpus,
            "--base-url",
            srv.base_url,
            "--model",
            "m",
            "--json",
            data_dir=data_dir,
        )
        assert done.returncode == 0, done.stderr
    runs = sorted(RunStore(data_dir / "runs").list(), key=lambda r: r.started_at)
    assert len(runs) == 2 and runs[0].id == api.run_id
    assert runs[0].settings == runs[1].settings  # the same path, the same record
    printed = [json.loads(line) for line in done.stdout.splitlines()]
    assert printed[-1]["event"] == "answer" and printed[-1]["content"] == "450 kg"
