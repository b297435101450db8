"""Code written for the original keeps working: the README's ``generator=False``, the VRAG demo's
``(kind, content, extra)`` tuples with the answer as the generator's return value, the VimRAG demo's
event names and keys (``search_done``/``results``, ``memorize``/``summary``, ``answer``/``sample``).
Real index, real HTTP model double (the model's words are scripted), real agents."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image
from scripted_openai import ScriptedOpenAI
from test_api_and_runs import SCRIPT, _corpus

from vrag_desktop import VRAG, VimRAG
from vrag_desktop.core.agents.events import Answer, Memorize, SearchResults, SearchStarted
from vrag_desktop.core.agents.original import CROP_OUTLINE
from vrag_desktop.core.run.store import RunStore

QUESTION = "How heavy a load can the Atlas robot carry?"


def _vrag(srv: ScriptedOpenAI, data_dir: Path, **kw: object) -> VRAG:
    return VRAG(
        base_url=srv.base_url,
        search_url=None,
        model_name="m",
        api_key="EMPTY",
        corpora=["c"],
        data_dir=data_dir,
        **kw,
    )


def test_generator_false_returns_the_answer_as_in_the_original_readme(
    library, minilm, make_pdf, data_dir: Path
) -> None:  # type: ignore[no-untyped-def]
    _corpus(library, minilm, make_pdf)
    with ScriptedOpenAI(SCRIPT) as srv:
        answer = _vrag(srv, data_dir, generator=False).run(QUESTION)
    assert answer == "450 kg"
    (run,) = RunStore(data_dir / "runs").list()
    assert run.status == "answered" and run.answer == "450 kg"


def test_vrag_demo_tuples_and_the_answer_as_return_value(library, minilm, make_pdf, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    _corpus(library, minilm, make_pdf)
    with ScriptedOpenAI(SCRIPT) as srv:
        gen = _vrag(srv, data_dir).run_original(QUESTION)
        seen = []
        try:
            while True:
                seen.append(next(gen))
        except StopIteration as stop:
            final = stop.value
    kinds = [k for k, _, _ in seen]
    assert kinds == ["think", "search", "search_image", "think", "bbox", "crop_image", "think"]
    assert seen[0][1] == "I need the spec page." and seen[0][2] == SCRIPT[0]["content"]
    assert seen[1][1] == "Atlas robot payload" and seen[4][1] == "[20, 30, 300, 200]"
    shown, raw = seen[2][1], seen[2][2]
    assert isinstance(shown, Image.Image) and isinstance(raw, Image.Image)
    assert shown.width * shown.height <= 401_408 <= raw.width * raw.height
    crop, marked = seen[5][1], seen[5][2]
    assert isinstance(crop, Image.Image) and marked.size == shown.size
    assert marked.convert("RGB").getpixel((20, 100)) == CROP_OUTLINE  # the box drawn on the page shown
    assert final == ("answer", "450 kg", SCRIPT[2]["content"])


def test_vimrag_events_carry_the_original_names_and_sample(library, minilm, make_pdf, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    _corpus(library, minilm, make_pdf)
    turns = json.loads(Path(__file__).with_name("data").joinpath("vimrag_turns.json").read_text())
    with ScriptedOpenAI(turns) as srv:
        agent = VimRAG(
            base_url=srv.base_url,
            search_url=None,
            model_name="qwen3.5-plus",
            api_key="EMPTY",
            corpora=["c"],
            data_dir=data_dir,
            search_top_k=2,
        )
        events = list(agent.run({"query": QUESTION}))
    search = next(e for e in events if isinstance(e, SearchStarted))
    assert search["query"] == search.content and search["node_id"]
    done = next(e for e in events if isinstance(e, SearchResults))
    assert done.original_event == "search_done" and done["results"] == done.hits
    assert done.to_original()["event"] == "search_done"
    mem = next(e for e in events if isinstance(e, Memorize))
    assert mem["summary"] == mem.content
    answer = next(e for e in events if isinstance(e, Answer))
    sample = answer["sample"]
    assert set(sample) >= {"trajectory", "search_results", "graph", "generate", "generate_times"}
    assert sample["graph"][0]["id"] == "root" and sample["graph"][-1]["id"] == "answer"
    assert sample["graph"][0]["content"] == f"Initial query from user: {QUESTION}"
    search_node = sample["graph"][1]
    assert search_node["parent_ids"] == ["root"] and search_node["query"] == search.content
    assert search_node["summary"] == mem.content
    assert len(sample["generate"]) == len(sample["generate_times"]) >= 3
    assert sample["generate"][-1] == turns[-1]["content"]
    assert sample["search_results"][0]["query"] == search.content
    assert sample["search_results"][0]["results"][0]["file_path"]
    # saved runs keep the events without the derived sample, and still compare equal
    (run,) = RunStore(data_dir / "runs").list()
    saved = list(RunStore(data_dir / "runs").events(run.id))
    assert saved == events and next(e for e in saved if isinstance(e, Answer)).sample is None


def test_vimrag_original_dict_stream(library, minilm, make_pdf, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    _corpus(library, minilm, make_pdf)
    turns = json.loads(Path(__file__).with_name("data").joinpath("vimrag_turns.json").read_text())
    with ScriptedOpenAI(turns) as srv:
        agent = VimRAG(
            base_url=srv.base_url,
            search_url=None,
            model_name="qwen3.5-plus",
            api_key="EMPTY",
            corpora=["c"],
            data_dir=data_dir,
            search_top_k=2,
        )
        events = list(agent.run_original({"query": QUESTION}))
    names = [e["event"] for e in events]
    assert {"search", "search_done", "memorize", "answer"} <= set(names)
    assert "search_results" not in names and "graph" not in names
    done = next(e for e in events if e["event"] == "search_done")
    assert done["results"] and json.dumps(events[-1]["sample"], default=str)
    assert events[-1]["event"] == "answer" and events[-1]["content"] == "450 kg"
