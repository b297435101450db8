"""The original-shaped Python API (`from vrag_desktop import VRAG`) end to end against a scripted model
over real HTTP and a real index; every run saved, listed, replayed identically, and exported."""

from __future__ import annotations

import json
import time
from pathlib import Path

from conftest import index_paths
from scripted_openai import ScriptedOpenAI

from vrag_desktop import VRAG
from vrag_desktop.core.agents.vrag_protocol import VRAG_PROMPT
from vrag_desktop.core.run.export import export_rl, export_sft
from vrag_desktop.core.run.store import RunStore

SCRIPT = [
    {"content": "<think>I need the spec page.</think>\n<search>Atlas robot payload</search>"},
    {"content": "<think>Zoom into the table.</think>\n<bbox>[20, 30, 300, 200]</bbox>"},
    {"content": "<think>It says 450 kg.</think>\n<answer>450 kg</answer>"},
]


def _corpus(library, minilm, make_pdf) -> None:  # type: ignore[no-untyped-def]
    pdf = make_pdf(
        "robots.pdf",
        [
            "Northwind annual report. Letter to shareholders about a good year.",
            "Atlas warehouse robot specifications: payload 450 kg, battery 14 hours, top speed 2 m/s.",
            "Safety: seven minor incidents, no injuries.",
        ],
    )
    index_paths(library, "c", [pdf], minilm)


def test_vrag_api_runs_saves_and_replays(library, minilm, make_pdf, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    _corpus(library, minilm, make_pdf)
    with ScriptedOpenAI(SCRIPT, api_key="secret-key-123") as srv:
        agent = VRAG(
            base_url=srv.base_url,
            search_url=None,
            model_name="served-name",
            api_key="secret-key-123",
            corpora=["c"],
            data_dir=data_dir,
        )
        events = list(agent.run("How heavy a load can the Atlas robot carry?"))
        bodies = srv.chat_bodies
    kinds = [e["event"] for e in events]
    for k in ("search", "search_results", "search_image", "bbox", "crop_image", "answer"):
        assert k in kinds, kinds
    answer = (
        events[-1] if events[-1]["event"] == "answer" else next(e for e in events if e["event"] == "answer")
    )
    assert answer["content"] == "450 kg"
    assert [b["model"] for b in bodies] == ["served-name"] * 3
    first_user = bodies[0]["messages"][0]["content"]
    text = first_user if isinstance(first_user, str) else first_user[0]["text"]
    assert text.startswith(VRAG_PROMPT.split("{question}")[0]) and "Atlas robot" in text
    shown = next(e for e in events if e["event"] == "search_image")
    assert Path(shown["source"]).name == "robots.pdf" and shown["page"] == 2

    store = RunStore(data_dir / "runs")
    (run,) = store.list()
    assert run.agent == "vrag" and run.status == "answered" and run.answer == "450 kg"
    assert run.question.startswith("How heavy") and run.model == "served-name"
    assert "secret-key-123" not in (data_dir / "runs" / run.id / "run.json").read_text()
    replayed = list(store.events(run.id))
    assert replayed == events  # same types, same fields, same order
    for e in replayed:
        if e["event"] in ("search_image", "crop_image"):
            assert Path(e["image"]).exists() and (data_dir / "runs" / run.id) in Path(e["image"]).parents

    dataset = _dataset(data_dir / "labels.jsonl")
    report = export_sft(store, [run.id], dataset, data_dir / "export" / "sft.json")
    (sample,) = json.loads((data_dir / "export" / "sft.json").read_text())
    assert report.count == 1
    roles = [m["role"] for m in sample["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert sample["messages"][1]["content"].endswith("<search>Atlas robot payload</search>")
    assert sample["messages"][-1]["content"].endswith("<answer>450 kg</answer>")
    assert len(sample["images"]) == 2 and all((data_dir / "export" / p).exists() for p in sample["images"])

    assert export_rl(store, [run.id], dataset, data_dir / "export" / "rl.jsonl", jsonl=True).count == 1
    row = json.loads((data_dir / "export" / "rl.jsonl").read_text())
    # the ground truth is the dataset's label, not the run's own answer
    assert row["reward_model"] == {"style": "rule", "ground_truth": "450 kg payload, 14 h battery"}
    assert row["file_name"] == "robots.pdf" and row["reference_page"] == [2]
    assert row["prompt"][0]["content"].endswith("Question: How heavy a load can the Atlas robot carry?")


def _dataset(path: Path) -> Path:
    """The label a person gave the Atlas question (JSON lines form of the original's examples)."""
    example = {
        "uid": "atlas",
        "query": "How heavy a load can the Atlas robot carry?",
        "reference_answer": "450 kg payload, 14 h battery",
        "meta_info": {"file_name": "robots.pdf", "reference_page": [2]},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(example) + "\n")
    return path


def test_closing_the_generator_cancels_and_saves(library, minilm, make_pdf, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    _corpus(library, minilm, make_pdf)
    script = [SCRIPT[0], {"hang": 30, "content": "never"}]
    with ScriptedOpenAI(script) as srv:
        gen = VRAG(
            base_url=srv.base_url, search_url=None, model_name="m", corpora=["c"], data_dir=data_dir
        ).run("q")
        for ev in gen:
            if ev["event"] == "search_image":
                break
        assert srv.wait_requests(2, timeout=10)  # the second (hanging) model call is in flight
        time.sleep(0.2)
        t0 = time.monotonic()
        gen.close()
        assert time.monotonic() - t0 < 5
        assert srv.wait_disconnect(5)
    (run,) = RunStore(data_dir / "runs").list()
    assert run.status == "cancelled"
    assert any(e["event"] == "search_image" for e in RunStore(data_dir / "runs").events(run.id))


def test_unreachable_endpoint_is_an_event_not_an_exception(library, minilm, make_pdf, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    from conftest import free_port

    _corpus(library, minilm, make_pdf)
    url = f"http://127.0.0.1:{free_port()}/v1"
    events = list(
        VRAG(base_url=url, search_url=None, model_name="m", corpora=["c"], data_dir=data_dir).run("q")
    )
    errors = [e for e in events if e["event"] == "error"]
    assert errors and not errors[-1]["recoverable"] and errors[-1]["kind"] == "endpoint"
    (run,) = RunStore(data_dir / "runs").list()
    assert run.status == "failed"


def test_cli_ask_and_runs(library, minilm, make_pdf, data_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from conftest import cli

    _corpus(library, minilm, make_pdf)
    with ScriptedOpenAI(SCRIPT, api_key="k-abcdef") as srv:
        proc = cli(
            "ask",
            "How heavy a load can the Atlas robot carry?",
            "--base-url",
            srv.base_url,
            "--model",
            "served",
            "--corpus",
            "c",
            data_dir=data_dir,
            env={"VRAG_DESKTOP_API_KEY": "k-abcdef"},
        )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "search: Atlas robot payload" in out and "robots.pdf p2" in out
    assert "crop" in out and "Answer: 450 kg" in out and "evidence: robots.pdf, page 2" in out
    runs = json.loads(cli("runs", "list", "--json", data_dir=data_dir, check=True).stdout)
    assert len(runs) == 1 and runs[0]["status"] == "answered"
    lines = cli("runs", "show", "last", "--json", data_dir=data_dir, check=True).stdout.splitlines()
    assert json.loads(lines[-1])["event"] in ("answer", "graph", "timing", "usage")
    assert any(json.loads(x)["event"] == "answer" for x in lines)
    out_file = tmp_path / "rl.parquet"
    labels = str(_dataset(tmp_path / "labels.jsonl"))
    args = ("runs", "export", "--format", "rl", "--dataset", labels, "--out", str(out_file))
    proc = cli(*args, data_dir=data_dir, check=True)
    assert "Exported 1 record" in proc.stdout and out_file.exists()
    # a wrong key: a clear error, the key not echoed, a non-zero exit
    with ScriptedOpenAI(SCRIPT, api_key="right-key") as srv:
        proc = cli(
            "ask",
            "q",
            "--base-url",
            srv.base_url,
            "--model",
            "m",
            "--corpus",
            "c",
            data_dir=data_dir,
            env={"VRAG_DESKTOP_API_KEY": "wrong-key-999"},
        )
    assert proc.returncode == 1 and "auth" in proc.stdout and "wrong-key-999" not in proc.stdout + proc.stderr


def test_vimrag_api_original_shape(library, minilm, make_pdf, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop import VimRAG

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
        events = list(agent.run({"query": "How heavy a load can the Atlas robot carry?"}))
        body = srv.chat_bodies[0]
    assert body["messages"][0]["role"] == "system" and "add_search_node" in body["messages"][0]["content"]
    assert body.get("chat_template_kwargs", {}).get("enable_thinking") is True
    kinds = [e["event"] for e in events]
    assert kinds.index("search") < kinds.index("memorize") < kinds.index("answer")
    answer = next(e for e in events if e["event"] == "answer")
    assert answer["content"] == "450 kg" and Path(answer["evidence"][0].source).name == "robots.pdf"
    graph = [e for e in events if e["event"] == "graph"][-1]
    assert [n.kind for n in graph["nodes"]] == ["root", "search", "answer"]
    (run,) = RunStore(data_dir / "runs").list()
    assert run.agent == "vimrag" and run.status == "answered"
    assert list(RunStore(data_dir / "runs").events(run.id)) == events


def test_one_assembly_for_api_cli_and_app(library, minilm, make_pdf, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """An endpoint and a ready search engine (what the app passes) assemble the same agent as URLs do;
    the engine's own hit reaches the run's events, labelled, with a snippet rather than a document."""
    import asyncio

    import pytest

    from vrag_desktop.core.run.assemble import AgentOptions, AssembleError, Endpoint, SearchSource, assemble
    from vrag_desktop.core.search import SearchEngine
    from vrag_desktop.core.search.hit import SNIPPET_CHARS, Hit

    _corpus(library, minilm, make_pdf)
    engine = SearchEngine(library, ["c"], embedder=minilm)
    try:
        with ScriptedOpenAI(SCRIPT) as srv:
            agent = VRAG(
                endpoint=Endpoint.from_url(srv.base_url, "served-name"),
                search=SearchSource(engine=engine),
                data_dir=data_dir,
            )
            events = list(agent.run("How heavy a load can the Atlas robot carry?"))
    finally:
        engine.close()
    assert events[-1]["event"] == "answer" and events[-1]["content"] == "450 kg"
    results = next(e for e in events if e["event"] == "search_results")
    top = results["hits"][results["shown"][0]]
    assert isinstance(top, Hit) and top.corpus == "c" and top.item_id is not None and top.page == 2
    assert top.label == "Image 1" and 0 < len(top.text) <= SNIPPET_CHARS
    (run,) = RunStore(data_dir / "runs").list()
    assert run.model == "served-name"
    assert list(RunStore(data_dir / "runs").events(run.id)) == events  # the hit survives the saved run

    # bad input: a clear message, nothing left running
    with pytest.raises(AssembleError, match="needs both the base URL and the served model name"):
        Endpoint.from_url("", "m")
    closed: list[bool] = []

    class Client:
        model_name = "m"

        async def aclose(self) -> None:
            closed.append(True)

    endpoint = Endpoint.from_factory(Client)  # type: ignore[arg-type]
    with pytest.raises(AssembleError, match="unknown agent 'rag'"):
        asyncio.run(assemble("rag", endpoint, SearchSource(), AgentOptions(), data_dir))
    with pytest.raises(Exception, match="no corpus named 'nope'"):
        nowhere = SearchSource(corpora=["nope"], data_dir=data_dir)
        asyncio.run(assemble("vrag", endpoint, nowhere, AgentOptions(), data_dir))
    assert closed == [True]  # the client made before the searcher failed was closed
    failed = list(VRAG(endpoint=endpoint, search=nowhere, data_dir=data_dir).run("q"))
    assert failed[-1]["event"] == "error" and "no corpus named 'nope'" in failed[-1]["content"]
