"""The reasoning graph model: which node each event belongs to, and a layout that never moves a node.

Event sequences are built in the order the agents emit them (see ``vrag.py`` / ``vimrag.py``): VRAG
draws a step's nodes only when the step ends, after its search results and crops; VimRAG names the
node of every search and memory event, draws a search node early while the reply streams, and drops
a node whose search failed. ``vrag_run`` / ``vimrag_run`` are reused by the Qt tests.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from vrag_desktop.core.agents.events import (
    AgentError,
    AgentEvent,
    Answer,
    BBox,
    ContentDelta,
    Crop,
    Evidence,
    GraphChanged,
    GraphNode,
    HitRef,
    ImageShown,
    MaxSteps,
    Memorize,
    MemoryItem,
    SearchResults,
    SearchStarted,
    ThinkDelta,
    Timing,
)
from vrag_desktop.core.run.reasoning_graph import GraphDelta, Layout, ReasoningGraph
from vrag_desktop.core.run.store import RunStore

# ====================================================================== event sequences


def hits_for(query: str, n: int = 3, seed: int = 0) -> tuple[HitRef, ...]:
    rng = random.Random(f"{query}/{seed}")
    scores = sorted((round(rng.uniform(0.2, 0.9), 6) for _ in range(n)), reverse=True)
    return tuple(
        HitRef(
            score=s,
            name=f"report.pdf p.{i + 2}",
            source=f"/docs/report-{i}.pdf",
            modality="image",
            image=f"/pages/report-{i}-{i + 2}.png",
            page=i + 2,
            label=f"Picture {i + 1}",
        )
        for i, s in enumerate(scores)
    )


def vrag_run(
    question: str = "Why is edelweiss woolly?",
    actions: Sequence[tuple[str, str]] | None = None,
    t0: float = 0.0,
) -> list[AgentEvent]:
    """A VRAG run as the agent emits it; ``actions``: (think, "search:q" | "bbox:[..]" | "answer:a")."""
    actions = actions or [
        ("I need the alpine guide.", "search:edelweiss white woolly hairs"),
        ("The first paragraph mentions the hairs.", "bbox:[20, 30, 400, 160]"),
        ("Closer.", "bbox:[40, 60, 300, 200]"),
        ("It protects against cold and UV.", "answer:cold, wind and UV light"),
    ]
    nodes = [GraphNode(id="root", kind="root", label=question, query=question)]
    events: list[AgentEvent] = [GraphChanged(step=0, time=t0, nodes=tuple(nodes))]
    evidence: list[Evidence] = []
    region = (0, 0, 1200, 1600)
    for step, (think, action) in enumerate(actions, start=1):
        t = t0 + step * 1.5
        events += [
            ThinkDelta(step=step, time=t, content=think[: len(think) // 2]),
            ThinkDelta(step=step, time=t, content=think[len(think) // 2 :]),
            ContentDelta(step=step, time=t, content=f"<think>{think}</think>"),
        ]
        nodes.append(
            GraphNode(id=f"s{step}-think", kind="think", parents=(nodes[-1].id,), label=think, summary=think)
        )
        kind, _, arg = action.partition(":")
        if kind == "answer":
            nodes.append(
                GraphNode(id="answer", kind="answer", parents=(nodes[-1].id,), label=arg, summary=arg)
            )
            events += [
                GraphChanged(step=step, time=t + 1, nodes=tuple(nodes)),
                Timing(step=step, time=t + 1, model_seconds=1.0),
                Answer(step=step, time=t + 1, content=arg, evidence=tuple(evidence)),
            ]
            return events
        if kind == "search":
            nodes.append(
                GraphNode(id=f"s{step}-search", kind="search", parents=(nodes[-1].id,), label=arg, query=arg)
            )
            hits = hits_for(arg)
            hits = (HitRef(**{**hits[0].__dict__, "label": "Image 1"}), *hits[1:])
            evidence.append(Evidence(source=hits[0].source, image=hits[0].image, page=hits[0].page))
            events += [
                SearchStarted(step=step, time=t, content=arg),
                SearchResults(step=step, time=t + 0.2, content=arg, hits=hits, shown=(0,)),
                ImageShown(
                    step=step,
                    time=t + 0.3,
                    image=f"/run/img/{step:02d}-page.jpg",
                    raw=str(hits[0].image),
                    width=812,
                    height=1092,
                    source=hits[0].source,
                    page=hits[0].page,
                ),
            ]
        elif kind == "bbox":
            nodes.append(
                GraphNode(id=f"s{step}-crop", kind="crop", parents=(nodes[-1].id,), label=arg, query=arg)
            )
            x1, y1, x2, y2 = region
            region = (x1 + 40, y1 + 50, x1 + (x2 - x1) // 2 + 40, y1 + (y2 - y1) // 2 + 50)
            box = tuple(float(v) for v in arg.strip("[]").split(","))
            evidence.append(
                Evidence(source="/docs/report-0.pdf", image="/pages/report-0-2.png", page=2, region=region)
            )
            events += [
                BBox(step=step, time=t, content=arg, box=box),  # type: ignore[arg-type]
                Crop(
                    step=step,
                    time=t + 0.1,
                    region=region,
                    raw="/pages/report-0-2.png",
                    image=f"/run/img/{step:02d}-crop.jpg",
                    width=640,
                    height=480,
                    source="/docs/report-0.pdf",
                    page=2,
                ),
            ]
        else:  # an unparsable reply: an error, and only the thought is drawn
            events.append(AgentError(step=step, time=t, kind="parse", content=arg))
        events += [
            GraphChanged(step=step, time=t + 1, nodes=tuple(nodes)),
            Timing(step=step, time=t + 1, model_seconds=1.0),
        ]
    return events


def vimrag_run(
    n_search: int = 24,
    seed: int = 7,
    question: str = "Who keeps the lighthouse?",
    answer: bool = True,
    failed: Sequence[int] = (),
) -> list[AgentEvent]:
    """A VimRAG run: ``n_search`` search nodes on a random DAG (1–2 parents each), every search
    memorized in the next turn, a failed search (index in ``failed``) dropped from the graph."""
    rng = random.Random(seed)
    g: list[GraphNode] = [GraphNode(id="root", kind="root", label=question, query=question)]
    events: list[AgentEvent] = [GraphChanged(step=0, nodes=tuple(g))]
    step = 0
    for i in range(n_search):
        step += 1
        t = step * 0.8
        nid = f"{rng.choice(['keeper', 'harbor', 'records', 'tower', 'ledger'])} {i}"
        pool = [n.id for n in g]
        parents = tuple(dict.fromkeys(rng.sample(pool[-6:], k=min(len(pool[-6:]), rng.choice([1, 1, 2])))))
        query = f"{nid} lighthouse keeper name {i}"
        node = GraphNode(id=nid, kind="search", parents=parents, label=nid, query=query)
        events += [
            ThinkDelta(step=step, time=t, content=f"Look for {nid}."),
            GraphChanged(step=step, time=t, nodes=(*g, node)),  # drawn early while streaming
            GraphChanged(step=step, time=t + 0.1, nodes=(*g, node)),
            SearchStarted(step=step, time=t + 0.1, content=query, node_id=nid),
        ]
        if i in failed:
            events += [
                SearchResults(step=step, time=t + 0.2, content=query, node_id=nid),
                AgentError(step=step, time=t + 0.2, kind="search", content="index unavailable"),
                GraphChanged(step=step, time=t + 0.3, nodes=tuple(g)),
                Timing(step=step, time=t + 0.3),
            ]
            continue
        g.append(node)
        events += [
            SearchResults(
                step=step,
                time=t + 0.2,
                content=query,
                hits=hits_for(query, 4, i),
                shown=(0, 1, 2, 3),
                node_id=nid,
            ),
            Timing(step=step, time=t + 0.3),
        ]
        step += 1
        summary = f"Page {i + 2} names a keeper of the {nid.split()[0]}."
        items = tuple(
            MemoryItem(
                information_id=f"Picture {k + 1}",
                useful=k < 2,
                priority=5 - k,
                energy=round(0.4 / (k + 1), 6),
                pixel_budget=200_704 // (k + 1) if k < 2 else 0,
                image=f"/run/img/{i:02d}-{k}.jpg",
            )
            for k in range(3)
        )
        g[-1] = GraphNode(id=nid, kind="search", parents=parents, label=nid, query=query, summary=summary)
        events += [
            Memorize(step=step, time=step * 0.8, content=summary, node_id=nid, items=items),
            GraphChanged(step=step, time=step * 0.8, nodes=tuple(g)),
            Timing(step=step, time=step * 0.8),
        ]
    if answer:
        step += 1
        a = GraphNode(
            id="answer", kind="answer", parents=(g[-1].id,), label="Abbie Burgess", summary="Abbie Burgess"
        )
        g.append(a)
        events += [
            GraphChanged(step=step, time=step * 0.8, nodes=tuple(g)),
            Timing(step=step, time=step * 0.8),
            Answer(
                step=step,
                time=step * 0.8,
                content="Abbie Burgess",
                evidence=(Evidence(source="/docs/report-0.pdf", image="/run/img/00-0.jpg", page=2),),
            ),
        ]
    return events


def positions(g: ReasoningGraph) -> dict[str, tuple[float, float]]:
    return {n.id: (n.x, n.y) for n in g.nodes()}


def assert_no_overlap(g: ReasoningGraph) -> None:
    lay = g.layout
    rects = sorted(g.rect(n) for n in g.ids())
    for i, (x, y, w, h) in enumerate(rects):
        for x2, y2, w2, h2 in rects[i + 1 :]:
            if x2 >= x + w:
                break  # sorted by left edge: nothing further right can overlap
            overlap = x2 < x + w and x < x2 + w2 and y2 < y + h and y < y2 + h2
            assert not overlap, ((x, y), (x2, y2))
    assert w == lay.node_width and h == lay.node_height


def assert_routes_clear(g: ReasoningGraph) -> None:
    """Every long edge runs down a channel that no node rectangle touches."""
    rects = [g.rect(n) for n in g.ids()]
    for e in g.edges():
        route = g.route(e)
        span = g.node(e[1]).layer - g.node(e[0]).layer
        assert bool(route) == (span > 1), e
        if not route:
            continue
        (x1, y1), (x2, y2) = route
        assert x1 == x2 and y1 < y2
        assert g.node(e[0]).y < y1 < y2 < g.node(e[1]).y
        for x, y, w, h in rects:
            assert not (x < x1 < x + w and y < y2 and y1 < y + h), (e, (x, y))


# ====================================================================== VRAG chains


def test_vrag_run_is_a_think_search_crop_answer_chain() -> None:
    events = vrag_run()
    g = ReasoningGraph.from_events(events)
    assert [n.kind for n in g.nodes()] == [
        "root",
        "think",
        "search",
        "think",
        "crop",
        "think",
        "crop",
        "think",
        "answer",
    ]
    ids = g.ids()
    assert g.edges() == list(itertools.pairwise(ids))
    assert [n.layer for n in g.nodes()] == list(range(9))
    assert {n.x for n in g.nodes()} == {0.0}  # a chain is a straight column
    ys = [n.y for n in g.nodes()]
    assert ys == sorted(ys) and ys[1] - ys[0] == g.layout.layer_pitch

    search = g.node("s1-search")
    results = next(e for e in events if isinstance(e, SearchResults))
    assert search.hits == results.hits and search.shown == (0,) and search.searched
    assert [round(h.score, 3) for h in search.hits] == sorted(
        (round(h.score, 3) for h in results.hits), reverse=True
    )
    assert [i.image for i in search.images] == ["/run/img/01-page.jpg"]
    assert search.query == "edelweiss white woolly hairs" and search.badge == "3 hits"
    assert search.thinking == "I need the alpine guide."
    assert g.node("s1-think").text == "I need the alpine guide."

    crops = [e for e in events if isinstance(e, Crop)]
    assert g.node("s2-crop").crops == [crops[0]] and g.node("s3-crop").crops == [crops[1]]
    assert [b.content for b in g.node("s2-crop").boxes] == ["[20, 30, 400, 160]"]
    x1, y1, x2, y2 = crops[1].region
    assert g.node("s3-crop").text == f"[{x1}, {y1}, {x2}, {y2}] · p.2"
    assert g.node("s3-crop").badge == f"{x2 - x1}×{y2 - y1} px"
    assert g.node("s3-crop").tag == "step 3"

    ans = g.node("answer")
    final = events[-1]
    assert isinstance(final, Answer)
    assert ans.answer == "cold, wind and UV light" and ans.evidence == final.evidence and not ans.forced
    assert ans.text == "cold, wind and UV light" and ans.badge == "3 evidence" and ans.step == 4
    assert g.node("root").text == "Why is edelweiss woolly?" and g.node("root").caption == "Question"
    assert g.newest() == "answer"


def test_vrag_results_wait_for_the_node_drawn_at_the_end_of_the_step() -> None:
    """VRAG's search results arrive before the step's graph: the delta of the graph event carries them."""
    events = vrag_run()
    g = ReasoningGraph()
    deltas = {}
    for ev in events:
        d = g.apply(ev)
        if isinstance(ev, SearchResults):
            assert not d and "s1-search" not in g  # nothing to draw yet
        if isinstance(ev, GraphChanged):
            deltas[ev.step] = d
    assert deltas[1].added == ("s1-think", "s1-search")
    assert deltas[1].added_edges == (("root", "s1-think"), ("s1-think", "s1-search"))
    assert len(g.node("s1-search").hits) == 3  # attached when the node appeared
    assert deltas[4].added == ("s4-think", "answer")


def test_vrag_errors_and_forced_answer() -> None:
    events = vrag_run(
        actions=[
            ("Hmm.", "junk:no tag found"),
            ("Search.", "search:keeper"),
            ("More.", "answer:I cannot find it"),
        ]
    )
    g = ReasoningGraph.from_events(events)
    assert g.node("s1-think").errors == ["parse: no tag found"]  # the step's last node
    assert g.node("s1-think").badge == "error"
    assert not g.node("s2-search").errors

    # a VRAG forced answer still comes with its answer node
    forced = [*vrag_run(actions=[("a", "search:x")])]
    nodes = next(e for e in reversed(forced) if isinstance(e, GraphChanged)).nodes
    ans = GraphNode(id="answer", kind="answer", parents=(nodes[-1].id,), label="fallback", summary="forced")
    forced += [
        MaxSteps(step=2),
        GraphChanged(step=2, nodes=(*nodes, ans)),
        Answer(step=2, content="fallback", forced=True),
    ]
    g = ReasoningGraph.from_events(forced)
    assert g.node("answer").forced and g.node("answer").badge == "forced" and not g.node("answer").synthetic


# ====================================================================== VimRAG graphs


def test_vimrag_hits_and_memory_attach_to_their_nodes() -> None:
    events = vimrag_run(n_search=6, seed=3)
    g = ReasoningGraph.from_events(events)
    assert len(g) == 8 and g.node("answer").answer == "Abbie Burgess"
    for r in (e for e in events if isinstance(e, SearchResults)):
        assert r.node_id is not None
        assert g.node(r.node_id).hits == r.hits
    for m in (e for e in events if isinstance(e, Memorize)):
        assert m.node_id is not None
        node = g.node(m.node_id)
        assert node.memory == m.items and node.summary == m.content
        assert [(i.priority, i.energy, i.pixel_budget) for i in node.memory] == [
            (i.priority, i.energy, i.pixel_budget) for i in m.items
        ]
        assert node.badge == "4 hits · 2/3 useful"
        assert node.tag == m.node_id and node.text == node.query  # VimRAG nodes are named by the model
    for n in g.nodes():
        assert n.layer == (0 if n.kind == "root" else 1 + max(g.node(p).layer for p in n.parents))


def test_vimrag_early_node_is_not_added_twice() -> None:
    events = vimrag_run(n_search=1)
    (search,) = {e.node_id for e in events if isinstance(e, SearchStarted)}
    g = ReasoningGraph()
    added = [d.added for d in map(g.apply, events) if d.added]
    assert added == [("root",), (search,), ("answer",)] and len(g) == 3
    assert g.node(search).time == 0.8  # appeared with the early snapshot, while the reply streamed


def test_memorize_changes_the_drawn_badge_and_summary() -> None:
    events = vimrag_run(n_search=1)
    g = ReasoningGraph()
    for ev in events:
        d = g.apply(ev)
        if isinstance(ev, Memorize):
            assert d.changed == (ev.node_id,) and d.details == (ev.node_id,)
        if isinstance(ev, ThinkDelta) and ev.step == 1:
            assert not d  # the node of this step is not drawn yet
    again = g.apply(next(e for e in reversed(events) if isinstance(e, GraphChanged)))
    assert not again  # the same snapshot twice changes nothing


def test_failed_search_node_is_removed_and_its_slot_freed() -> None:
    events = vimrag_run(n_search=4, seed=1, failed=(2,))
    g = ReasoningGraph()
    removed: list[GraphDelta] = []
    for ev in events:
        d = g.apply(ev)
        if d.removed:
            removed.append(d)
    assert len(removed) == 1
    (gone,) = removed[0].removed
    assert removed[0].removed_edges and all(gone in e for e in removed[0].removed_edges)
    info = g.node(gone)
    assert info.removed and gone not in g and gone not in {c for e in g.edges() for c in e}
    assert info.errors == ["search: index unavailable"] and info.searched and not info.hits
    assert [n.id for n in g.removed()] == [gone]
    # the same id may come back (the model retries): a new node, placed again
    back = GraphNode(id=gone, kind="search", parents=("root",), label=gone, query="retry")
    nodes = (*next(e for e in reversed(events) if isinstance(e, GraphChanged)).nodes, back)
    d = g.apply(GraphChanged(step=99, nodes=nodes))
    assert d.added == (gone,) and d.added_edges == (("root", gone),)
    assert not g.node(gone).removed and g.node(gone).query == "retry" and g.node(gone).layer == 1
    assert_no_overlap(g)


def test_removing_a_parent_keeps_the_child_in_place() -> None:
    root = GraphNode(id="root", kind="root")
    a = GraphNode(id="a", kind="search", parents=("root",))
    b = GraphNode(id="b", kind="search", parents=("a",))
    g = ReasoningGraph.from_events([GraphChanged(nodes=(root, a, b))])
    pos = positions(g)
    d = g.apply(GraphChanged(nodes=(root, b)))
    assert d.removed == ("a",) and set(d.removed_edges) == {("root", "a"), ("a", "b")}
    assert positions(g) == {k: v for k, v in pos.items() if k != "a"}
    d = g.apply(GraphChanged(nodes=(root, a, b)))  # a returns: the edge to b is drawn again
    assert d.added == ("a",) and set(d.added_edges) == {("root", "a"), ("a", "b")}


def test_forced_vimrag_answer_gets_a_drawn_answer_node() -> None:
    events = vimrag_run(n_search=5, seed=2, answer=False)
    events += [MaxSteps(step=30), Answer(step=30, time=40.0, content="Not found.", forced=True)]
    g = ReasoningGraph()
    for ev in events:
        d = g.apply(ev)
    assert d.added == ("answer",)
    ans = g.node("answer")
    assert ans.synthetic and ans.forced and ans.answer == "Not found." and ans.badge == "forced"
    children = {p for p, c in g.edges() if c != "answer"}
    leaves = {n.id for n in g.nodes() if n.id not in children and n.id != "answer"}
    assert set(ans.parents) == leaves and {p for p, c in g.edges() if c == "answer"} == leaves
    assert ans.layer == 1 + max(g.node(p).layer for p in ans.parents)


def test_events_for_nodes_not_yet_drawn_are_kept() -> None:
    g = ReasoningGraph()
    g.apply(GraphChanged(nodes=(GraphNode(id="root", kind="root"),)))
    hits = hits_for("q")
    assert not g.apply(SearchResults(step=1, content="q", hits=hits, node_id="later"))
    g.apply(
        GraphChanged(
            step=2,
            nodes=(
                GraphNode(id="root", kind="root"),
                GraphNode(id="later", kind="search", parents=("root",)),
            ),
        )
    )
    assert g.node("later").hits == hits and g.node("later").query == "q"


# ====================================================================== layout


def test_layout_geometry_by_hand() -> None:
    lay = Layout(node_width=100, node_height=40, sibling_gap=20, layer_gap=30)
    n = [GraphNode(id="root", kind="root")]
    g = ReasoningGraph(lay)

    def add(nid: str, *parents: str) -> None:
        n.append(GraphNode(id=nid, kind="search", parents=parents))
        g.apply(GraphChanged(nodes=tuple(n)))

    g.apply(GraphChanged(nodes=tuple(n)))
    add("A", "root")
    add("B", "root")
    add("C", "A", "B")
    add("D", "A")
    add("E", "root")
    pitch, lp = 120.0, 70.0
    assert positions(g) == {
        "root": (0, 0),
        "A": (0, lp),  # right under its parent
        "B": (pitch, lp),  # the nearest free slot (right first on a tie)
        "C": (pitch / 2, 2 * lp),  # between its two parents
        "D": (-pitch / 2, 2 * lp),  # nearest to A's x without overlapping C
        "E": (-pitch, lp),
    }
    assert g.rect("C") == (10, 120, 100, 40)
    assert g.bounds() == (-170, -20, 170, 160)
    assert g.route(("A", "C")) == [] and g.edges()[:2] == [("root", "A"), ("root", "B")]

    # an edge over two layers takes the nearest half-slot free in both (-3: -1 holds D, -2 holds E)
    add("F", "C", "root")
    assert positions(g)["F"] == (0, 3 * lp)
    assert g.route(("root", "F")) == [(-3 * pitch / 2, 20 + 15), (-3 * pitch / 2, 3 * lp - 20 - 15)]
    assert g.route(("C", "F")) == []


def test_left_to_right_direction() -> None:
    lay = Layout(node_width=100, node_height=40, sibling_gap=20, layer_gap=30, direction="LR")
    g = ReasoningGraph.from_events(vimrag_run(n_search=8), layout=lay)
    for n in g.nodes():
        assert n.x == n.layer * 130.0 and (n.y / 30.0).is_integer()
    assert_no_overlap(g)
    long = [e for e in g.edges() if g.route(e)]
    assert long
    for e in long:  # channels run along the layers' axis: horizontally
        (x1, y1), (x2, y2) = g.route(e)
        assert y1 == y2 and g.node(e[0]).x < x1 < x2 < g.node(e[1]).x
    with pytest.raises(ValueError):
        Layout(direction="BT")


def test_layout_is_stable_while_events_stream() -> None:
    """A placed node never moves; no two overlap; layers follow parents — after every event."""
    events = vimrag_run(n_search=60, seed=11, failed=(5, 17, 40))
    g = ReasoningGraph()
    seen: dict[str, tuple[float, float]] = {}
    routes: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for ev in events:
        d = g.apply(ev)
        now = positions(g)
        for nid, p in now.items():
            if nid not in d.added:
                assert seen[nid] == p, nid
        seen.update(now)
        for e in g.edges():  # edges keep their route too
            assert routes.setdefault(e, g.route(e)) == g.route(e)
        if d.added:
            assert_no_overlap(g)
            assert_routes_clear(g)
    assert sum(1 for e in g.edges() if g.route(e)) >= 10  # the test graph has long edges to route
    for n in g.nodes():
        parents = [g.node(p) for p in n.parents if p in g]
        assert n.layer == (1 + max(p.layer for p in parents) if parents else 0)
        assert n.y == n.layer * g.layout.layer_pitch
    # wider than a chain, and roughly centred under the root
    xs = [n.x for n in g.nodes()]
    assert max(xs) > 0 > min(xs)


def test_hundreds_of_nodes_from_full_snapshots_are_cheap() -> None:
    """500 nodes, each added by a full snapshot (so ~125k node records to diff) plus results."""
    rng = random.Random(5)
    nodes = [GraphNode(id="root", kind="root", label="q")]
    events: list[AgentEvent] = [GraphChanged(nodes=tuple(nodes))]
    for i in range(1, 500):
        parents = tuple({nodes[rng.randrange(max(0, i - 30), i)].id for _ in range(rng.choice([1, 2]))})
        nodes.append(GraphNode(id=f"n{i}", kind="search", parents=parents, label=f"n{i}", query=f"query {i}"))
        events += [
            GraphChanged(step=i, nodes=tuple(nodes)),
            SearchResults(step=i, content=f"query {i}", hits=hits_for(str(i)), node_id=f"n{i}"),
        ]
    t = time.perf_counter()
    g = ReasoningGraph.from_events(events)
    took = time.perf_counter() - t
    assert len(g) == 500 and len(g.edges()) == sum(len(n.parents) for n in nodes)
    assert took < 5.0, took  # typically ~0.1 s
    assert_no_overlap(g)
    assert_routes_clear(g)


# ====================================================================== saved runs


def replay(events: Sequence[AgentEvent], root: Path) -> Iterator[AgentEvent]:
    store = RunStore(root)
    with store.recorder("vimrag", "Who keeps the lighthouse?") as rec:
        for ev in events:
            rec.record(ev)
    return store.events(rec.id)


def test_a_saved_run_rebuilds_the_same_graph(tmp_path: Path) -> None:
    events = vimrag_run(n_search=10, failed=(3,))
    live = ReasoningGraph.from_events(events)
    saved = ReasoningGraph.from_events(replay(events, tmp_path / "runs"))
    assert positions(saved) == positions(live) and saved.edges() == live.edges()
    assert [n.__dict__ for n in saved.nodes()] == [n.__dict__ for n in live.nodes()]
    dicts = ReasoningGraph.from_events(e.to_dict() for e in events)  # the JSON form is accepted too
    assert positions(dicts) == positions(live)
    assert not dicts.apply({"event": "from_a_future_version", "step": 1})


def test_reset_forgets_the_run() -> None:
    g = ReasoningGraph.from_events(vrag_run())
    g.reset()
    assert len(g) == 0 and g.edges() == [] and g.newest() is None and g.bounds() == (0, 0, 0, 0)
    g2 = ReasoningGraph.from_events(vrag_run())
    for ev in vrag_run():
        g.apply(ev)
    assert positions(g) == positions(g2)
    with pytest.raises(KeyError):
        g.node("nope")
