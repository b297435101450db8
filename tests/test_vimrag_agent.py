"""The VimRAG agent: memory graph rules and energies by hand, the tool-call parser, and whole runs.

Runs go through the real ``OpenAIChatModel`` against ``ScriptedOpenAI`` (real HTTP, SSE streaming with
``reasoning_content``) over a real MiniLM index of a PDF, a text file, a picture and a short video, so
every modality reaches the model; the script decides from the request bodies it receives, and the
tests inspect those bodies (what the model was actually sent)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import math
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import index_paths
from PIL import Image
from scripted_openai import ScriptedOpenAI

from vrag_desktop.core.agents import vimrag_prompts as P
from vrag_desktop.core.agents.events import (
    AgentError,
    AgentEvent,
    Answer,
    ContentDelta,
    GraphChanged,
    MaxSteps,
    Memorize,
    SearchResults,
    SearchStarted,
    ThinkDelta,
    Usage,
)
from vrag_desktop.core.agents.memory_graph import (
    Frame,
    GraphEditError,
    MemoryEntry,
    MemoryGraph,
    normalize_label,
)
from vrag_desktop.core.agents.searchers import EngineSearcher, SearchHit
from vrag_desktop.core.agents.vimrag import VimRAGAgent, encode_capped, keyframe_times, thin_indices
from vrag_desktop.core.endpoints.client import OpenAIChatModel

S_TOTAL = 2_007_040


# ====================================================================== memory graph


def img(priority: int, name: str = "x") -> MemoryEntry:
    return MemoryEntry(
        information_id="Picture 1", modality="image", priority=priority, frames=[Frame(path=f"/m/{name}.jpg")]
    )


def small_graph() -> MemoryGraph:
    """root → A → B, root → C; A: one item p5; B: p3, p4 (video); C: p2."""
    g = MemoryGraph("Who keeps the lighthouse?")
    g.add_search("A", ["root"], "lighthouse keeper")
    g.memorize("A", "A summary.", [img(5, "a")])
    g.add_search("B", ["A"], "keeper name record")
    video = MemoryEntry(
        "Video 1", "video", 4, [Frame("/m/f1.jpg", timestamp=1.0), Frame("/m/f2.jpg", timestamp=2.0)]
    )
    g.memorize("B", "B summary.", [img(3, "b"), video])
    g.add_search("C", ["root"], "harbor history")
    g.memorize("C", "C summary.", [img(2, "c")])
    return g


def test_action_graph_is_the_original_list() -> None:
    g = MemoryGraph("Q {x}?")
    g.add_search("Lighthouse facts", ["root"], "lighthouse built year")
    g.memorize("Lighthouse facts", "Built in 1874.", [])
    g.add_answer(["Lighthouse facts"], "1874")
    assert g.action_graph() == [
        {"id": "root", "name": "Initial Node", "content": "Initial query from user: Q {x}?"},
        {
            "id": "Lighthouse facts",
            "parent_ids": ["root"],
            "query": "lighthouse built year",
            "summary": "Built in 1874.",
        },
        {"id": "answer", "parent_ids": ["Lighthouse facts"]},
    ]
    assert json.loads(g.action_graph_json()) == g.action_graph()
    assert P.build_user_prompt("Q {x}?", g.action_graph_json()) == (
        "### Question\nQ {x}?\n\n### Agent Action Graph\n" + g.action_graph_json()
    )
    nodes = g.snapshot()
    assert [(n.id, n.kind, n.parents) for n in nodes] == [
        ("root", "root", ()),
        ("Lighthouse facts", "search", ("root",)),
        ("answer", "answer", ("Lighthouse facts",)),
    ]
    assert nodes[1].summary == "Built in 1874." and nodes[2].label == "1874"


@pytest.mark.parametrize(
    ("node_id", "parents", "query", "needle"),
    [
        (
            "B",
            ["nowhere"],
            "q2",
            'unknown parent id "nowhere": parent_ids must name existing nodes. Valid parent ids: "root", "A"',
        ),
        ("B", ["root", "x", "y"], "q2", 'unknown parent ids "x", "y"'),
        ("A", ["root"], "q2", 'a node with id "A" already exists'),
        ("a", ["root"], "q2", 'a node with id "A" already exists'),  # titles are compared case-insensitively
        ("B", ["B"], "q2", "cannot be its own parent (that would make a cycle)"),
        ("B", [], "q2", '"parent_ids" must be a non-empty list'),
        ("B", "root", "q2", '"parent_ids" must be a non-empty list'),
        ("root", ["root"], "q2", '"root" is reserved'),
        ("", ["root"], "q2", "must be a short descriptive title"),
        ("x" * 61, ["root"], "q2", "is not a short title (61 characters"),
        ("one two three four five six seven eight nine ten eleven", ["root"], "q2", "11 words"),
        ("B", ["root"], "  Lighthouse   KEEPER ", 'already searched at node "A"'),
        ("B", ["root"], " ", '"query" must be a non-empty'),
    ],
)
def test_rejected_search_edits_leave_the_graph_unchanged(
    node_id: Any, parents: Any, query: str, needle: str
) -> None:
    g = MemoryGraph("Q")
    g.add_search("A", ["root"], "lighthouse keeper")
    before = g.to_dict()
    with pytest.raises(GraphEditError) as err:
        g.add_search(node_id, parents, query)
    assert needle in str(err.value)
    assert g.to_dict() == before and g.ids == ["root", "A"] and g.g.number_of_edges() == 1


def test_answer_validation() -> None:
    g = MemoryGraph("Q")
    g.add_search("A", ["root"], "q")
    with pytest.raises(GraphEditError, match=r'unknown parent id "B".*Valid parent ids: "root", "A"'):
        g.add_answer(["B"], "x")
    with pytest.raises(GraphEditError, match='"answer" must be a non-empty'):
        g.add_answer(["A"], "  ")
    assert g.answer is None and len(g) == 2
    g.add_answer(["A"], "yes")
    with pytest.raises(GraphEditError, match="already has an answer"):
        g.add_search("B", ["A"], "q2")
    with pytest.raises(GraphEditError, match="already has an answer"):
        g.add_answer(["A"], "again")


def test_energy_and_budgets_by_hand() -> None:
    g = small_graph()  # T = 3; outdeg root 2, A 1, B 0, C 0
    e = {(s.node_id, s.position): s for s in g.energies()}
    ea = 1.0 * 2 * math.exp(-0.1 * 2)  # p̂ = 5/5, Φ = 1 + 1, i = 1
    eb1, eb2 = 0.6 * math.exp(-0.1), 0.8 * math.exp(-0.1)  # i = 2, no children
    assert e[("A", 0)].energy == pytest.approx(1.6374615061559636)
    assert e[("A", 0)].energy == pytest.approx(ea)
    assert (e[("B", 0)].energy, e[("B", 1)].energy) == pytest.approx((eb1, eb2))
    assert e[("B", 0)].omega == pytest.approx(eb1)  # leaves get no feedback
    assert e[("A", 0)].omega == pytest.approx(ea + 0.3 * (eb1 + eb2) / 2) == pytest.approx(1.8274773639435151)
    assert e[("C", 0)].omega == pytest.approx(0.4)  # 2/5 · 1 · exp(0)

    groups = g.select_memory(top_k=3, total_pixels=S_TOTAL)
    assert [(gr.node_id, [s.position for s in gr.items]) for gr in groups] == [("A", [0]), ("B", [0, 1])]
    budgets = {(s.node_id, s.position): s.budget for gr in groups for s in gr.items}
    assert budgets == {("A", 0): 1185366, ("B", 1): 469527, ("B", 0): 352145}  # ⌊S·Ω/ΣΩ⌋
    assert sum(budgets.values()) <= S_TOTAL


def test_select_memory_top_k_and_budget_sum() -> None:
    g = small_graph()
    for k in range(0, 6):
        groups = g.select_memory(top_k=k, total_pixels=1000)
        items = [s for gr in groups for s in gr.items]
        assert len(items) == min(k, 4)
        assert sum(s.budget for s in items) <= 1000
        chosen = {(i.node_id, i.position) for i in items}
        if items:
            assert min(s.omega for s in items) >= max(
                (s.omega for s in g.energies() if (s.node_id, s.position) not in chosen), default=0
            )
        order = [g.ids.index(gr.node_id) for gr in groups]
        assert order == sorted(order)  # graph order, grouped by node
    assert g.select_memory(5, S_TOTAL)[-1].node_id == "C"
    assert MemoryGraph("Q").select_memory() == []


def test_answer_path_and_json_round_trip() -> None:
    g = small_graph()
    assert g.answer_path() == []
    g.add_answer(["B"], "Ada Brook")
    assert g.answer_path() == ["root", "A", "B", "answer"]  # C is a dead end
    again = MemoryGraph.from_json(g.to_json())
    assert again.to_dict() == g.to_dict() and again.action_graph() == g.action_graph()
    assert [(s.omega, s.entry.frames) for s in again.energies()] == [
        (s.omega, s.entry.frames) for s in g.energies()
    ]


def test_from_json_rejects_cycles_and_unknown_parents() -> None:
    data = small_graph().to_dict()
    data["nodes"][1]["parent_ids"] = ["B"]  # A ← B ← A
    with pytest.raises(ValueError, match=r"cycle: (A → B → A|B → A → B)"):
        MemoryGraph.from_dict(data)
    data["nodes"][1]["parent_ids"] = ["ghost"]
    with pytest.raises(ValueError, match='unknown parent ids "ghost"'):
        MemoryGraph.from_dict(data)


def test_normalize_label() -> None:
    assert normalize_label("picture1") == "Picture 1" and normalize_label(" Image 2 ") == "Picture 2"
    assert normalize_label("video #3") == "Video 3" and normalize_label("Text 10") == "Text 10"
    assert normalize_label("the first picture") is None


# ====================================================================== tool-call parser


def call(name: str, **arguments: Any) -> str:
    return (
        "<tool_call>\n"
        + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        + "\n</tool_call>"
    )


@pytest.mark.parametrize(
    ("text", "name", "args"),
    [
        (
            call("add_search_node", id="A", parent_ids=["root"], query="q"),
            "add_search_node",
            {"id": "A", "parent_ids": ["root"], "query": "q"},
        ),
        (
            '<think>I should search. {"name": "x"}</think>\n'
            + call("add_answer_node", parent_ids=["A"], answer="B"),
            "add_answer_node",
            {"parent_ids": ["A"], "answer": "B"},
        ),
        (
            "<tool_call>\n{'name': 'add_answer_node', 'arguments': {'parent_ids': ['root',], 'answer': 'Paris',},}\n"
            "</tool_call>",
            "add_answer_node",
            {"parent_ids": ["root"], "answer": "Paris"},
        ),  # json5-ish
        (
            '<tool_call>{"name": "add_answer_node", "arguments": {"parent_ids": ["root"], "answer": "x"}}',
            "add_answer_node",
            {"parent_ids": ["root"], "answer": "x"},
        ),  # unclosed at the end
        (
            '```json\n{"name": "add_answer_node", "arguments": {"parent_ids": ["root"], "answer": "x"}}\n```',
            "add_answer_node",
            {"parent_ids": ["root"], "answer": "x"},
        ),  # fenced
        (
            'Sure: {"name": "add_answer_node", "arguments": "{\\"parent_ids\\": [\\"root\\"], \\"answer\\": \\"x\\"}"}',
            "add_answer_node",
            {"parent_ids": ["root"], "answer": "x"},
        ),  # bare object, arguments as a string
        (
            call(
                "summarize_and_memorize",
                summarize="s",
                memorize=[
                    {
                        "information_id": "Video 1",
                        "is_useful": "true",
                        "key_timestamp": 12,
                        "priority_score": "4",
                    }
                ],
            ),
            "summarize_and_memorize",
            {
                "summarize": "s",
                "memorize": [
                    {
                        "information_id": "Video 1",
                        "is_useful": True,
                        "key_timestamp": [12.0],
                        "priority_score": 4,
                    }
                ],
            },
        ),
    ],
)
def test_parse_valid_calls(text: str, name: str, args: dict[str, Any]) -> None:
    parsed = P.parse_tool_call(text)
    assert (parsed.name, parsed.arguments) == (name, args)


def test_parse_notes() -> None:
    two = P.parse_tool_call(call("add_answer_node", parent_ids="root", answer="x") + call("add_search_node"))
    assert two.arguments["parent_ids"] == ["root"]
    assert any("2 tool calls" in n for n in two.notes) and any("read as" in n for n in two.notes)
    clamp = P.parse_tool_call(
        call(
            "summarize_and_memorize",
            summarize="s",
            memorize=[
                {"information_id": "Picture 1", "is_useful": False, "key_timestamp": [], "priority_score": 9}
            ],
        )
    )
    assert clamp.arguments["memorize"][0]["priority_score"] == 5 and "clamped" in clamp.notes[0]


@pytest.mark.parametrize(
    ("text", "kind", "needle"),
    [
        (
            '<tool_call>{"name": "add_search_node", "arguments": {"id": "A", </tool_call>',
            "invalid_json",
            "the tool call is not valid JSON",
        ),
        ("<tool_call>[1, 2]</tool_call>", "invalid_json", "must be a JSON object"),
        (
            call("search_web", query="q"),
            "unknown_tool",
            'unknown tool "search_web"; use one of add_search_node, summarize_and_memorize, add_answer_node',
        ),
        (
            call("add_search_node", id="A", parent_ids=["root"]),
            "missing_field",
            'add_search_node is missing "query" (required: id, parent_ids, query)',
        ),
        (
            call(
                "summarize_and_memorize",
                summarize="s",
                memorize=[{"information_id": "Picture 1", "priority_score": 3}],
            ),
            "missing_field",
            'summarize_and_memorize memorize[0] is missing "is_useful"',
        ),
        (
            call("summarize_and_memorize", summarize="", memorize=[]),
            "bad_field",
            '"summarize" must not be empty',
        ),
        (call("add_answer_node", parent_ids=["root"], answer=""), "bad_field", '"answer" must not be empty'),
        (
            call(
                "summarize_and_memorize",
                summarize="s",
                memorize=[
                    {
                        "information_id": "Video 1",
                        "is_useful": True,
                        "key_timestamp": ["soon"],
                        "priority_score": 3,
                    }
                ],
            ),
            "bad_field",
            "not a number of seconds",
        ),
        ('<tool_call>{"arguments": {}}</tool_call>', "missing_field", 'has no "name"'),
        ("I will answer now: Paris.", "no_call", "no tool call was found"),
    ],
)
def test_parse_errors_are_precise(text: str, kind: str, needle: str) -> None:
    with pytest.raises(P.ToolCallError) as err:
        P.parse_tool_call(text)
    assert err.value.kind == kind and needle in str(err.value)


def test_prompts_carry_the_schemas() -> None:
    for schema in P.TOOLS:
        assert json.dumps(schema, ensure_ascii=False) in P.SYSTEM_PROMPT
    assert "<tools>\n" in P.SYSTEM_PROMPT
    assert '"name": <function-name>, "arguments": <args-json-object>' in P.SYSTEM_PROMPT
    assert json.dumps(P.SUMMARIZE_AND_MEMORIZE_SCHEMA) in P.SUMMARY_PROMPT
    assert json.dumps(P.ADD_ANSWER_NODE_SCHEMA) in P.SUMMARY_PROMPT
    assert json.dumps(P.ADD_SEARCH_NODE_SCHEMA) not in P.SUMMARY_PROMPT
    assert P.SUMMARY_PROMPT.endswith("Now, generate your response in the correct MCP format below:")
    props = P.SUMMARIZE_AND_MEMORIZE_SCHEMA["function"]["parameters"]["properties"]["memorize"]["items"][
        "properties"
    ]
    assert set(props) == {"information_id", "is_useful", "key_timestamp", "priority_score"}


# ====================================================================== media helpers


def test_encode_capped_and_frame_helpers() -> None:
    import numpy as np

    noise = Image.fromarray(np.random.default_rng(1).integers(0, 255, (900, 1200, 3), dtype=np.uint8))
    data, (w, h) = encode_capped(noise, 1_003_520, 38_000)
    assert len(data) <= 38_000 and w * h < 1_003_520 and abs(w / h - 4 / 3) < 0.05
    small = Image.new("RGB", (200, 100), "white")
    data, size = encode_capped(small, 1_003_520, 38_000)
    assert size == (200, 100)  # never enlarged
    assert keyframe_times(0.0, 4.0, 4) == [0.0, 1.333, 2.667, 4.0] and keyframe_times(60.0, 90.0, 1) == [60.0]
    assert thin_indices(4, 2) == [0, 3] and thin_indices(4, 9) == [0, 1, 2, 3] and thin_indices(10, 1) == [0]


# ====================================================================== a real small index


@pytest.fixture(scope="module")
def searcher(tmp_path_factory: pytest.TempPathFactory, minilm) -> Iterator[EngineSearcher]:  # type: ignore[no-untyped-def]
    """A PDF (2 pages), a text note, a noisy photo (large JPEG: exercises the byte cap) and a 4 s
    video (one clip, 4 key frames). Built here rather than with the function-scoped ``make_pdf`` /
    ``library`` fixtures so the index is built once for the module (same code)."""
    import cv2
    import numpy as np
    import pymupdf

    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.search import SearchEngine

    root = tmp_path_factory.mktemp("vimrag")
    docs = root / "docs"
    docs.mkdir()
    pdf = pymupdf.open()
    for text in (
        "The harbor of Port Ellis has a red lighthouse built in 1874.",
        "Fishing boats unload cod at the north quay every morning.",
    ):
        page = pdf.new_page()
        page.insert_textbox(pymupdf.Rect(50, 50, 550, 800), text, fontsize=12)
    pdf.save(str(docs / "harbor.pdf"))
    pdf.close()
    (docs / "notes.txt").write_text(
        "Harbor notes: the lighthouse keeper is named Ada Brook.", encoding="utf-8"
    )
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (900, 1200, 3), dtype=np.uint8)).save(docs / "harbor_photo.png")
    writer = cv2.VideoWriter(str(docs / "harbor_tour.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), 10, (320, 240))
    for i in range(40):
        frame = np.zeros((240, 320, 3), np.uint8)
        frame[:] = (i * 6, 100, 200 - i * 4)
        cv2.putText(frame, str(i), (100, 120), 0, 2, (255, 255, 255), 3)
        writer.write(frame)
    writer.release()
    library = Library(root / "data")
    index_paths(library, "docs", sorted(docs.iterdir()), minilm, ocr=False)
    engine = SearchEngine(library, ["docs"], embedder=minilm)
    yield EngineSearcher(engine)
    engine.close()


class EmptySearcher:
    local_files = True

    def search(self, query: str, k: int) -> list[SearchHit]:
        return []

    def load_image(self, path: str) -> bytes:
        return Path(path).read_bytes()


Turn = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]


def drive(
    turns: list[Turn],
    searcher: Any,
    tmp_path: Path,
    question: str = "Who keeps the lighthouse?",
    **agent_kw: Any,
) -> tuple[list[AgentEvent], ScriptedOpenAI, VimRAGAgent]:
    """Run the agent through OpenAIChatModel against the scripted server; (events, server, agent)."""
    with ScriptedOpenAI(turns) as srv:

        async def go() -> tuple[list[AgentEvent], VimRAGAgent]:
            async with OpenAIChatModel(srv.base_url, "scripted-model", max_attempts=1) as model:
                agent = VimRAGAgent(model, searcher, image_dir=tmp_path / "images", **agent_kw)
                return [ev async for ev in agent.run(question)], agent

        events, agent = asyncio.run(asyncio.wait_for(go(), 60))
    return events, srv, agent


def kinds(events: list[AgentEvent]) -> list[str]:
    return [e.event for e in events if not isinstance(e, ThinkDelta | ContentDelta)]


def tool_response_items(body: dict[str, Any]) -> list[tuple[str, list[float]]]:
    """(label, frame times) of the items in the last tool response of a request, in order."""
    items: list[tuple[str, list[float]]] = []
    for msg in body["messages"]:
        content = msg["content"]
        if (
            msg["role"] == "user"
            and isinstance(content, list)
            and content[0]["text"].startswith("<tool_response>")
        ):
            items = []
            for part in content:
                if part["type"] != "text":
                    continue
                if m := re.match(r"\n(Text|Picture|Video) (\d+):", part["text"]):
                    items.append((f"{m.group(1)} {m.group(2)}", []))
                elif m := re.fullmatch(r"<([\d.]+) seconds>", part["text"]):
                    items[-1][1].append(float(m.group(1)))
    return items


def decoded(uri: str) -> bytes:
    assert uri.startswith("data:image/jpeg;base64,")
    return base64.b64decode(uri.split(",", 1)[1])


def memorize_first(body: dict[str, Any]) -> dict[str, Any]:
    """Keep Picture 1 (p5) and the video's second frame (p4), plus one timestamp off the grid."""
    mem = []
    for label, times in tool_response_items(body):
        if label.startswith("Video"):
            mem.append(
                {
                    "information_id": label,
                    "is_useful": True,
                    "key_timestamp": [times[1], 99.0],
                    "priority_score": 4,
                }
            )
        else:
            mem.append(
                {
                    "information_id": label,
                    "is_useful": label in ("Picture 1", "Text 1"),
                    "key_timestamp": [],
                    "priority_score": 5 if label == "Picture 1" else 1,
                }
            )
    return {
        "reasoning": "The note names the keeper; the page and the video show the lighthouse.",
        "content": call(
            "summarize_and_memorize",
            summarize="The keeper is Ada Brook; the lighthouse dates from 1874.",
            memorize=mem,
        ),
    }


def memorize_nothing(body: dict[str, Any]) -> dict[str, Any]:
    mem = [
        {"information_id": label, "is_useful": False, "key_timestamp": [], "priority_score": 1}
        for label, _ in tool_response_items(body)
    ]
    return {
        "content": call("summarize_and_memorize", summarize="no relevant information was found", memorize=mem)
    }


SEARCH_1 = {
    "reasoning": "I need to find who keeps the lighthouse.",
    "content": call(
        "add_search_node", id="Harbor sources", parent_ids=["root"], query="harbor lighthouse keeper"
    ),
}
SEARCH_2 = {
    "content": call(
        "add_search_node", id="Quay details", parent_ids=["Harbor sources"], query="north quay fishing boats"
    )
}
ANSWER = {
    "reasoning": "Memory is enough.",
    "content": call("add_answer_node", parent_ids=["Harbor sources"], answer="Ada Brook"),
}


def test_two_searches_memorize_and_answer(searcher: EngineSearcher, tmp_path: Path) -> None:
    events, srv, agent = drive(
        [SEARCH_1, memorize_first, SEARCH_2, memorize_nothing, ANSWER], searcher, tmp_path, search_top_k=10
    )
    assert kinds(events) == [
        "graph",
        "graph",
        "usage",
        "graph",
        "search",
        "search_results",
        "timing",  # early node while streaming
        "usage",
        "memorize",
        "error",
        "graph",
        "timing",  # the error reports the dropped timestamp
        "graph",
        "usage",
        "graph",
        "search",
        "search_results",
        "timing",
        "usage",
        "memorize",
        "graph",
        "timing",
        "usage",
        "graph",
        "timing",
        "answer",
    ]
    assert (
        "".join(e.content for e in events if isinstance(e, ThinkDelta) and e.step == 1)
        == SEARCH_1["reasoning"]
    )
    assert (
        "".join(e.content for e in events if isinstance(e, ContentDelta) and e.step == 1)
        == SEARCH_1["content"]
    )
    early = next(e for e in events if isinstance(e, GraphChanged) and e.step == 1)
    assert [n.id for n in early.nodes] == ["root", "Harbor sources"]
    started = [e for e in events if isinstance(e, SearchStarted)]
    assert [(e.content, e.node_id) for e in started] == [
        ("harbor lighthouse keeper", "Harbor sources"),
        ("north quay fishing boats", "Quay details"),
    ]

    # ---- results: every hit labelled per modality
    res = next(e for e in events if isinstance(e, SearchResults))
    assert res.node_id == "Harbor sources" and len(res.hits) == 5 and res.shown == (0, 1, 2, 3, 4)
    labels = {h.modality: [] for h in res.hits}
    for h in res.hits:
        labels[h.modality].append(h.label)
    assert labels["text"] == ["Text 1"] and labels["clip"] == ["Video 1"]
    assert sorted(labels["page"] + labels["image"]) == ["Picture 1", "Picture 2", "Picture 3"]

    # ---- request 1: rebuilt context, no memory yet; thinking-mode sampling
    b1, b2, b3, b4, b5 = srv.chat_bodies
    assert b1["messages"][0] == {"role": "system", "content": P.SYSTEM_PROMPT}
    assert b1["messages"][1]["content"] == [
        {
            "type": "text",
            "text": P.build_user_prompt(
                "Who keeps the lighthouse?",
                json.dumps(
                    [
                        {
                            "id": "root",
                            "name": "Initial Node",
                            "content": "Initial query from user: Who keeps the lighthouse?",
                        }
                    ]
                ),
            ),
        }
    ]
    assert (b1["temperature"], b1["top_p"], b1["max_tokens"], b1["stream"]) == (0.6, 0.95, 4096, True)
    assert b1["chat_template_kwargs"] == {"enable_thinking": True}

    # ---- request 2: the tool response (text, pictures, video) then the summary prompt
    msgs = b2["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "user"]
    assert msgs[2]["content"] == SEARCH_1["content"] and msgs[4]["content"] == P.SUMMARY_PROMPT
    parts = msgs[3]["content"]
    assert parts[0] == {"type": "text", "text": "<tool_response>\nHere are the retrieved information:"}
    assert parts[-1] == {"type": "text", "text": "\n</tool_response>"}
    items = tool_response_items(b2)
    assert [label for label, _ in items] == ["Text 1", "Picture 1", "Picture 2", "Picture 3", "Video 1"]
    assert items[-1][1] == [0.0, 1.3, 2.6, 3.9]  # 4 s × 1 fps: frames 0, 13, 26, 39 of the 10-fps clip
    assert "Ada Brook" in parts[1]["text"] and parts[1]["text"].startswith("\nText 1: Harbor notes")
    for i, part in enumerate(parts):
        if part["type"] == "image_url":
            assert set(part) == {"type", "image_url"} and set(part["image_url"]) == {
                "url"
            }  # no max_pixels key
            assert len(decoded(part["image_url"]["url"])) <= 38_000
            prev = parts[i - 1]["text"]
            assert re.fullmatch(r"<[\d.]+ seconds>", prev) or re.fullmatch(r"\nPicture \d:", prev)
    assert len(srv.chat_requests[1].image_urls()) == 3 + 4
    video_start = next(i for i, p in enumerate(parts) if p.get("text") == "\nVideo 1:")
    assert [p["type"] for p in parts[video_start + 1 : -1]] == ["text", "image_url"] * 4

    # ---- memorize: energies and budgets (T = 1, no children: E = p/5)
    mem = [e for e in events if isinstance(e, Memorize)]
    assert mem[0].node_id == "Harbor sources" and mem[0].content.startswith("The keeper is Ada Brook")
    by_id = {m.information_id: m for m in mem[0].items}
    assert set(by_id) == {"Text 1", "Picture 1", "Picture 2", "Picture 3", "Video 1"}
    assert (
        by_id["Text 1"].useful and by_id["Text 1"].energy == 0 and by_id["Text 1"].image is None
    )  # never kept
    assert (by_id["Picture 1"].energy, by_id["Picture 1"].pixel_budget) == (1.0, math.floor(S_TOTAL / 1.8))
    assert (by_id["Video 1"].energy, by_id["Video 1"].pixel_budget) == (0.8, math.floor(S_TOTAL * 0.8 / 1.8))
    assert by_id["Video 1"].timestamps == (1.3,) and by_id["Picture 2"].useful is False
    assert Path(str(by_id["Picture 1"].image)).is_file()
    dropped = next(e for e in events if isinstance(e, AgentError) and e.step == 2)
    assert dropped.kind == "tool" and dropped.recoverable
    assert "key_timestamp 99 s match no frame shown" in dropped.content
    assert mem[1].node_id == "Quay details" and mem[1].content == "no relevant information was found"
    assert all(not m.useful and m.energy == 0 for m in mem[1].items)

    # ---- request 3: context rebuilt from scratch with the graph and the memory
    msgs = b3["messages"]
    assert [m["role"] for m in msgs] == ["system", "user"] and msgs[0]["content"] == P.SYSTEM_PROMPT
    parts = msgs[1]["content"]
    head = parts[0]["text"]
    assert head.startswith("### Question\nWho keeps the lighthouse?\n\n### Agent Action Graph\n")
    graph_json, memory = head.split("\n\n### Agent Action Graph\n", 1)[1].split("\n\n", 1)
    assert json.loads(graph_json) == [
        {
            "id": "root",
            "name": "Initial Node",
            "content": "Initial query from user: Who keeps the lighthouse?",
        },
        {
            "id": "Harbor sources",
            "parent_ids": ["root"],
            "query": "harbor lighthouse keeper",
            "summary": "The keeper is Ada Brook; the lighthouse dates from 1874.",
        },
    ]
    assert memory == "### Multimodal Memory\nHistorical information for reference only.\n"
    assert [p.get("text") for p in parts[1:]] == ["Node: Harbor sources\n", None, "<1.3 seconds>", None]
    for uri in srv.chat_requests[2].image_urls():
        assert len(decoded(uri)) <= 38_000
    shown_picture = Image.open(io.BytesIO(decoded(parts[2]["image_url"]["url"])))
    assert shown_picture.width * shown_picture.height <= math.floor(S_TOTAL / 1.8)

    # ---- request 4: second search's tool response; request 5: rebuilt with both nodes
    assert b4["messages"][2]["content"] == SEARCH_2["content"]
    assert [
        n["id"]
        for n in json.loads(
            b5["messages"][1]["content"][0]["text"]
            .split("### Agent Action Graph\n", 1)[1]
            .split("\n\n", 1)[0]
        )
    ] == ["root", "Harbor sources", "Quay details"]
    assert "Node: Harbor sources\n" in [p.get("text") for p in b5["messages"][1]["content"]]

    # ---- the answer, its evidence and the final graph
    ans = events[-1]
    assert isinstance(ans, Answer) and ans.content == "Ada Brook" and not ans.forced
    picture, frame = ans.evidence  # Picture 1 and the one kept key frame
    assert Path(picture.source).suffix in (".pdf", ".png") and Path(str(picture.image)).is_file()
    assert Path(frame.source).name == "harbor_tour.mp4" and str(frame.image).endswith("-video1-f2-raw.jpg")
    with Image.open(str(frame.image)) as kept:  # the sampled frame itself, at full size
        assert kept.size == (320, 240)
    g = agent.last_graph
    assert g is not None and g.ids == ["root", "Harbor sources", "Quay details", "answer"]
    assert g.answer_path() == ["root", "Harbor sources", "answer"]
    energies = {s.entry.information_id: s.omega for s in g.energies()}
    assert energies == pytest.approx(
        {"Picture 1": 1.0 * 3 * math.exp(-0.2), "Video 1": 0.8 * 3 * math.exp(-0.2)}
    )
    final = [e for e in events if isinstance(e, GraphChanged)][-1]
    assert [(n.id, n.kind) for n in final.nodes][-1] == ("answer", "answer")


def test_invalid_json_gets_a_correction_and_no_step(searcher: EngineSearcher, tmp_path: Path) -> None:
    bad = {
        "content": '<tool_call>{"name": "add_search_node", "arguments": {"id": "A" "query": }}</tool_call>'
    }
    events, srv, _ = drive([bad, SEARCH_1, memorize_nothing, ANSWER], searcher, tmp_path, max_steps=2)
    err = next(e for e in events if isinstance(e, AgentError))
    assert err.kind == "parse" and err.recoverable and "not valid JSON" in err.content
    msgs = srv.chat_bodies[1]["messages"]
    assert msgs[2] == {"role": "assistant", "content": bad["content"]}
    assert msgs[3]["content"].startswith("<tool_response>\nError: the tool call is not valid JSON")
    assert "Call add_search_node to search, or add_answer_node to answer." in msgs[3]["content"]
    assert (
        isinstance(events[-1], Answer) and not events[-1].forced
    )  # 2 steps were enough: the bad call was free


def test_unknown_tool(searcher: EngineSearcher, tmp_path: Path) -> None:
    events, srv, _ = drive(
        [
            {"content": call("web_search", query="q")},
            ANSWER | {"content": call("add_answer_node", parent_ids=["root"], answer="unknown")},
        ],
        searcher,
        tmp_path,
    )
    err = next(e for e in events if isinstance(e, AgentError))
    assert err.kind == "parse" and 'unknown tool "web_search"' in err.content
    assert 'unknown tool "web_search"' in srv.chat_bodies[1]["messages"][3]["content"]
    assert isinstance(events[-1], Answer) and events[-1].evidence == ()


def test_unknown_parent_id_is_rejected_with_the_valid_ids(searcher: EngineSearcher, tmp_path: Path) -> None:
    bad = {"content": call("add_search_node", id="Keeper", parent_ids=["Harbor"], query="lighthouse keeper")}
    bad_answer = {"content": call("add_answer_node", parent_ids=["Keeper"], answer="?")}
    events, srv, agent = drive(
        [
            bad,
            bad_answer,
            ANSWER | {"content": call("add_answer_node", parent_ids=["root"], answer="unknown")},
        ],
        searcher,
        tmp_path,
    )
    errs = [e for e in events if isinstance(e, AgentError)]
    assert [e.kind for e in errs] == ["tool", "tool"]
    assert 'unknown parent id "Harbor": parent_ids must name existing nodes. Valid parent ids: "root"' in (
        errs[0].content
    )
    assert 'add_answer_node rejected: unknown parent id "Keeper"' in errs[1].content
    assert not any(isinstance(e, SearchStarted) for e in events)
    graphs = [e for e in events if isinstance(e, GraphChanged)]
    assert all(n.id != "Keeper" for g in graphs for n in g.nodes)  # no early node for an invalid edit either
    assert 'Valid parent ids: "root"' in srv.chat_bodies[1]["messages"][3]["content"]
    assert agent.last_graph is not None and agent.last_graph.ids == ["root", "answer"]


def test_search_before_memorize_is_refused(searcher: EngineSearcher, tmp_path: Path) -> None:
    events, srv, agent = drive([SEARCH_1, SEARCH_2, memorize_nothing, ANSWER], searcher, tmp_path)
    err = next(e for e in events if isinstance(e, AgentError))
    assert (
        err.kind == "tool"
        and 'before summarize_and_memorize for the search node "Harbor sources"' in err.content
    )
    assert len([e for e in events if isinstance(e, SearchStarted)]) == 1
    third = srv.chat_bodies[2]["messages"]
    assert [m["role"] for m in third] == ["system", "user", "assistant", "user", "user", "assistant", "user"]
    assert 'must be summarize_and_memorize for the search node "Harbor sources"' in third[-1]["content"]
    assert isinstance(events[-1], Answer) and agent.last_graph is not None
    assert agent.last_graph.ids == ["root", "Harbor sources", "answer"]


def test_memorize_without_search_is_refused(searcher: EngineSearcher, tmp_path: Path) -> None:
    stray = {"content": call("summarize_and_memorize", summarize="nothing yet", memorize=[])}
    events, _, _ = drive(
        [stray, ANSWER | {"content": call("add_answer_node", parent_ids=["root"], answer="x")}],
        searcher,
        tmp_path,
    )
    err = next(e for e in events if isinstance(e, AgentError))
    assert "without a pending search" in err.content and not any(isinstance(e, Memorize) for e in events)


def test_search_returning_nothing(tmp_path: Path) -> None:
    events, srv, agent = drive([SEARCH_1, memorize_nothing, ANSWER], EmptySearcher(), tmp_path)
    res = next(e for e in events if isinstance(e, SearchResults))
    assert res.hits == () and res.node_id == "Harbor sources"
    assert any(
        isinstance(e, AgentError) and e.kind == "search" and "returned nothing" in e.content for e in events
    )
    assert srv.chat_bodies[1]["messages"][3]["content"] == [
        {
            "type": "text",
            "text": "<tool_response>\nNo information was retrieved for this query.\n</tool_response>",
        }
    ]
    mem = next(e for e in events if isinstance(e, Memorize))
    assert mem.items == () and mem.content == "no relevant information was found"
    assert isinstance(events[-1], Answer) and events[-1].evidence == ()
    assert agent.last_graph is not None and agent.last_graph.answer_path() == [
        "root",
        "Harbor sources",
        "answer",
    ]


def test_step_limit_forces_an_answer(searcher: EngineSearcher, tmp_path: Path) -> None:
    bad = {"content": "I think I should search."}  # no tool call: free (within max_invalid)
    events, srv, _ = drive(
        [bad, SEARCH_1, memorize_first, SEARCH_2], searcher, tmp_path, max_steps=2, search_top_k=10
    )
    assert len(srv.chat_bodies) == 4
    last = srv.chat_bodies[3]["messages"]
    assert last[-1] == {"role": "user", "content": P.ANSWER_NOW_PROMPT} and last[1]["role"] == "user"
    assert [e.event for e in events[-4:]] == ["error", "max_steps", "timing", "answer"]
    assert "only add_answer_node is allowed" in events[-4]["content"] and not events[-4]["recoverable"]
    ans = events[-1]
    assert isinstance(ans, Answer) and ans.forced and ans.content == P.FALLBACK_ANSWER
    assert ans.evidence and all(e.image for e in ans.evidence)  # the memory gathered so far
    assert any(isinstance(e, MaxSteps) for e in events)


def test_answer_after_the_limit_is_not_forced(searcher: EngineSearcher, tmp_path: Path) -> None:
    answer = {"content": call("add_answer_node", parent_ids=["root"], answer="unknown")}
    events, srv, _ = drive([answer], searcher, tmp_path, max_steps=0, enable_thinking=False)
    body = srv.chat_bodies[0]
    assert body["messages"][-1]["content"] == P.ANSWER_NOW_PROMPT
    assert body["temperature"] == 0 and "top_p" not in body
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert (
        isinstance(events[-1], Answer)
        and not events[-1].forced
        and not any(isinstance(e, MaxSteps) for e in events)
    )


def test_endpoint_auth_error_ends_the_run(searcher: EngineSearcher, tmp_path: Path) -> None:
    events, _, _ = drive([{"status": 401}], searcher, tmp_path)
    assert isinstance(events[-1], AgentError) and events[-1].kind == "endpoint" and not events[-1].recoverable
    assert "auth" in events[-1].content


def test_cancel_mid_stream(searcher: EngineSearcher, tmp_path: Path) -> None:
    slow = {"reasoning": "thinking " * 200, "content": SEARCH_1["content"], "chunk": 4, "delay": 0.05}
    with ScriptedOpenAI([slow]) as srv:

        async def go() -> tuple[list[AgentEvent], float]:
            seen: list[AgentEvent] = []
            async with OpenAIChatModel(srv.base_url, "scripted-model", max_attempts=1) as model:
                stream = VimRAGAgent(model, searcher, image_dir=tmp_path / "images").run("Q?")
                async for ev in stream:
                    seen.append(ev)
                    if isinstance(ev, ThinkDelta) and len(seen) > 3:
                        break
                t = time.monotonic()
                await stream.aclose()
                return seen, time.monotonic() - t

        seen, took = asyncio.run(asyncio.wait_for(go(), 30))
        assert srv.wait_disconnect(5)  # the HTTP request itself was dropped
    assert took < 1 and isinstance(seen[-1], ThinkDelta)
    assert not any(isinstance(e, Usage | Answer) for e in seen)


def test_answer_right_after_a_search_cites_what_was_shown(searcher: EngineSearcher, tmp_path: Path) -> None:
    events, _, agent = drive([SEARCH_1, ANSWER], searcher, tmp_path, search_top_k=10)
    ans = events[-1]
    assert isinstance(ans, Answer) and ans.content == "Ada Brook"
    names = {Path(e.source).name for e in ans.evidence}
    assert names == {
        "notes.txt",
        "harbor.pdf",
        "harbor_photo.png",
        "harbor_tour.mp4",
    }  # nothing memorized yet
    assert sum(1 for e in ans.evidence if Path(e.source).suffix == ".mp4") == 4  # the 4 frames shown
    assert agent.last_graph is not None and agent.last_graph.node("Harbor sources").summary == ""


class RemoteLike:
    """Hits from the real engine, but files only through ``load_image`` and neither the clip's video
    nor its key frames reachable (as behind an HTTP search server that serves contact sheets only)."""

    local_files = False

    def __init__(self, inner: EngineSearcher) -> None:
        self.inner = inner
        self.loaded: list[str] = []

    def search(self, query: str, k: int) -> list[SearchHit]:
        return [h for h in self.inner.search(query, k) if h.modality in ("clip", "image")]

    def load_image(self, path: str) -> bytes:
        self.loaded.append(path)
        if re.search(r"(_f\d+\.jpg|\.mp4)$", path):
            raise OSError("404 not served")
        return Path(path).read_bytes()


def test_remote_clip_without_key_frames_shows_the_contact_sheet(
    searcher: EngineSearcher, tmp_path: Path
) -> None:
    remote = RemoteLike(searcher)

    def memorize(body: dict[str, Any]) -> dict[str, Any]:
        mem = [
            {
                "information_id": label,
                "is_useful": True,
                "key_timestamp": [2.0] if times else [],
                "priority_score": 4,
            }
            for label, times in tool_response_items(body)
        ]
        return {"content": call("summarize_and_memorize", summarize="A picture and a clip.", memorize=mem)}

    events, srv, _ = drive([SEARCH_1, memorize, ANSWER], remote, tmp_path, search_top_k=10)
    items = tool_response_items(srv.chat_bodies[1])
    assert items == [("Picture 1", []), ("Video 1", [0.0])]  # the sheet stands for the clip, at its start
    assert any(p.endswith("_f1.jpg") for p in remote.loaded)
    mem = next(e for e in events if isinstance(e, Memorize))
    video = next(m for m in mem.items if m.information_id == "Video 1")
    assert video.timestamps == (0.0,) and video.energy == 0.8  # 2.0 s matched nothing: all frames kept
    notes = [e.content for e in events if isinstance(e, AgentError)]
    assert any("no key_timestamp matched" in n for n in notes)
    assert any(
        n.startswith("Video 1: the clip's video cannot be read (the search server did not send")
        for n in notes
    )
    raw_copies = sorted(p.name for p in (tmp_path / "images").glob("*-raw.jpg"))
    assert len(raw_copies) == 2  # local copies of the remote picture and sheet


def test_memory_survives_its_source_file_vanishing(searcher: EngineSearcher, tmp_path: Path) -> None:
    """A kept file deleted before the context is rebuilt (corpus re-indexed mid-run): the JPEG first
    shown stands in for it, and the run goes on."""

    def memorize(body: dict[str, Any]) -> dict[str, Any]:
        for raw in (tmp_path / "images").glob("*-raw.jpg"):
            raw.unlink()
        mem = [
            {"information_id": label, "is_useful": True, "key_timestamp": times[:1], "priority_score": 3}
            for label, times in tool_response_items(body)
        ]
        return {"content": call("summarize_and_memorize", summarize="Kept both.", memorize=mem)}

    events, srv, _ = drive([SEARCH_1, memorize, ANSWER], RemoteLike(searcher), tmp_path, search_top_k=10)
    assert isinstance(events[-1], Answer) and not any(
        e.kind == "internal" for e in events if isinstance(e, AgentError)
    )
    assert not list((tmp_path / "images").glob("*-raw.jpg"))
    parts = srv.chat_bodies[2]["messages"][1]["content"]
    assert [p.get("text") for p in parts[1:]] == ["Node: Harbor sources\n", None, "<0.0 seconds>", None]
