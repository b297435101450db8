"""VimRAG's memory graph: the DAG of search steps plus the visual memory kept at each step.

Why a class of its own: the graph is the agent's *whole* state between turns (the context is rebuilt
from it each time, reference §4.4), the thing the UI draws, and — via :meth:`MemoryGraph.answer_path`
— what GGPO training masks by (§6.7). So it must be exact and self-checking:

- every edit the model asks for is validated first and a rejected edit leaves the graph untouched;
  the error messages say what to do (the valid parent ids, that an id is taken, …) because they are
  sent back to the model. The original accepted unknown parent ids silently (§9).
- energy and pixel budgets follow §4.5 (:mod:`.memory_energy`, where the items and the energy
  formulas live): ``select_memory`` keeps the top-k items by Ω and gives each its share of the
  memory's pixels.

Nodes live in a ``networkx.DiGraph`` (edges parent → child) and, in creation order, in a list: the
order is the time index ``i`` of the energy formula and the order of :meth:`action_graph`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import networkx as nx

from vrag_desktop.core.agents import memory_energy
from vrag_desktop.core.agents.events import GraphNode
from vrag_desktop.core.agents.memory_energy import (
    GAMMA_GAIN,
    LAMBDA_DECAY,
    Frame,
    MemoryEntry,
    MemoryGroup,
    MemoryNode,
    ScoredItem,
)
from vrag_desktop.core.agents.vimrag_prompts import MEMORY_BUFFER_PIXELS

ROOT_ID = "root"
ANSWER_ID = "answer"
#: A search node's id is "a unique short descriptive title" (reference §4.2).
MAX_ID_CHARS = 60
MAX_ID_WORDS = 10
KINDS = ("root", "search", "answer")
_FORMAT_VERSION = 1


class GraphEditError(ValueError):
    """The model asked for an edit that would break the graph; the message is meant for the model."""


def _norm_text(s: str) -> str:
    return " ".join(s.split()).casefold()


def _quoted(ids: Iterable[str]) -> str:
    return ", ".join(f'"{i}"' for i in ids)


class MemoryGraph:
    """Root / search / answer nodes with their summaries and memory; see the module docstring."""

    def __init__(
        self, question: str, *, lambda_decay: float = LAMBDA_DECAY, gamma_gain: float = GAMMA_GAIN
    ) -> None:
        self.question = question
        self.lambda_decay = lambda_decay
        self.gamma_gain = gamma_gain
        self.g: nx.DiGraph = nx.DiGraph()
        self._order: list[MemoryNode] = []
        self._put(MemoryNode(id=ROOT_ID, kind="root", index=0, query=question))

    # ------------------------------------------------------------ reading
    @property
    def nodes(self) -> list[MemoryNode]:
        """All nodes in creation order."""
        return list(self._order)

    @property
    def ids(self) -> list[str]:
        return [n.id for n in self._order]

    def node(self, node_id: str) -> MemoryNode:
        return self.g.nodes[node_id]["node"]  # type: ignore[no-any-return]

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.g

    def __len__(self) -> int:
        return len(self._order)

    @property
    def answer(self) -> MemoryNode | None:
        return self.node(ANSWER_ID) if ANSWER_ID in self.g else None

    def parent_candidates(self) -> list[str]:
        """Ids a new node may name as parents (every node but the answer)."""
        return [n.id for n in self._order if n.kind != "answer"]

    # ------------------------------------------------------------ validation
    def check_search(self, node_id: Any, parent_ids: Any, query: Any) -> list[str]:
        """Problems with an ``add_search_node`` call, in words for the model ([] = fine)."""
        problems: list[str] = []
        if self.answer is not None:
            return ["the graph already has an answer node; no more nodes can be added"]
        problems += self._check_id(node_id)
        problems += self._check_parents(parent_ids, node_id if isinstance(node_id, str) else None)
        if not isinstance(query, str) or not query.strip():
            problems.append('"query" must be a non-empty search query')
        else:
            for n in self._order:
                if n.kind == "search" and _norm_text(n.query) == _norm_text(query):
                    problems.append(
                        f'the query "{query.strip()}" was already searched at node "{n.id}"; a new query must '
                        "differ substantially from previous ones (or answer with add_answer_node)"
                    )
                    break
        return problems

    def check_answer(self, parent_ids: Any, answer: Any) -> list[str]:
        """Problems with an ``add_answer_node`` call ([] = fine)."""
        if self.answer is not None:
            return ["the graph already has an answer node"]
        problems = self._check_parents(parent_ids, ANSWER_ID)
        if not isinstance(answer, str) or not answer.strip():
            problems.append('"answer" must be a non-empty answer to the question')
        return problems

    def _check_id(self, node_id: Any) -> list[str]:
        example = 'e.g. "Edelweiss leaf hairs"'
        if not isinstance(node_id, str) or not node_id.strip():
            return [f'the search node "id" must be a short descriptive title ({example})']
        nid = node_id.strip()
        if nid != node_id:
            return [f'the id "{node_id}" has leading or trailing spaces; write it as "{nid}"']
        if nid.casefold() in (ROOT_ID, ANSWER_ID):
            return [f'"{nid}" is reserved; give the search node a descriptive title ({example})']
        if "\n" in nid or len(nid) > MAX_ID_CHARS or len(nid.split()) > MAX_ID_WORDS:
            return [
                f'the id "{nid[:80]}{"…" if len(nid) > 80 else ""}" is not a short title ({len(nid)} characters, '
                f"{len(nid.split())} words): use at most {MAX_ID_CHARS} characters and {MAX_ID_WORDS} words "
                "on one line; put the details in the query"
            ]
        for n in self._order:
            if _norm_text(n.id) == _norm_text(nid):
                return [
                    f'a node with id "{n.id}" already exists; every search node needs a new unique title. '
                    f"Existing ids: {_quoted(self.ids)}"
                ]
        return []

    def _check_parents(self, parent_ids: Any, child: str | None) -> list[str]:
        valid = self.parent_candidates()
        listing = f"Valid parent ids: {_quoted(valid)}"
        if isinstance(parent_ids, str) or not isinstance(parent_ids, Sequence) or not parent_ids:
            return [f'"parent_ids" must be a non-empty list of existing node ids, e.g. ["root"]. {listing}']
        bad = [p for p in parent_ids if not isinstance(p, str)]
        if bad:
            return [f'"parent_ids" must hold strings (node ids), not {json.dumps(bad[0])}. {listing}']
        if child is not None and child in parent_ids:
            return [
                f'"{child}" lists itself in parent_ids: a node cannot be its own parent (that would make a '
                f"cycle). {listing}"
            ]
        if ANSWER_ID in parent_ids and self.answer is not None:
            return [f"the answer node cannot be a parent. {listing}"]
        unknown = [p for p in parent_ids if p not in self.g]
        if unknown:
            word = "id" if len(unknown) == 1 else "ids"
            return [
                f"unknown parent {word} {_quoted(unknown)}: parent_ids must name existing nodes. {listing}"
            ]
        return []

    # ------------------------------------------------------------ edits
    def add_search(
        self, node_id: str, parent_ids: Sequence[str], query: str, *, created_at: float = 0.0
    ) -> MemoryNode:
        """Add a search node (summary and memory come later, with :meth:`memorize`).
        Raises :class:`GraphEditError` (graph unchanged) when the edit is invalid."""
        return self._add(
            self.check_search(node_id, parent_ids, query),
            node_id,
            "search",
            parent_ids,
            created_at,
            query=query.strip(),
        )

    def add_answer(self, parent_ids: Sequence[str], answer: str, *, created_at: float = 0.0) -> MemoryNode:
        return self._add(
            self.check_answer(parent_ids, answer),
            ANSWER_ID,
            "answer",
            parent_ids,
            created_at,
            answer=answer.strip(),
        )

    def _add(
        self,
        problems: list[str],
        node_id: str,
        kind: str,
        parent_ids: Sequence[str],
        created_at: float,
        *,
        query: str = "",
        answer: str = "",
    ) -> MemoryNode:
        """The checked edit: refused whole with the problems, or the node appended."""
        if problems:
            raise GraphEditError("; ".join(problems))
        node = MemoryNode(
            id=node_id,
            kind=kind,
            index=len(self._order),
            parents=tuple(dict.fromkeys(parent_ids)),
            query=query,
            answer=answer,
            created_at=created_at,
        )
        self._put(node)
        return node

    def memorize(self, node_id: str, summary: str, items: Sequence[MemoryEntry]) -> MemoryNode:
        """Attach the summary and kept memory items to a search node (once)."""
        if node_id not in self.g:
            raise GraphEditError(f'no node "{node_id}" to memorize into. Existing ids: {_quoted(self.ids)}')
        node = self.node(node_id)
        if node.kind != "search":
            raise GraphEditError(f'"{node_id}" is a {node.kind} node; only search nodes hold memory')
        if node.memorized:
            raise GraphEditError(f'node "{node_id}" has already been summarized')
        node.summary = summary.strip()
        node.items = list(items)
        node.memorized = True
        return node

    def remove(self, node_id: str) -> None:
        """Take back the newest node when it has no children and no memory (a search that failed)."""
        node = self.node(node_id)
        if node.kind == "root" or self.g.out_degree(node_id) or node.items or self._order[-1] is not node:
            raise GraphEditError(f'node "{node_id}" cannot be removed')
        self.g.remove_node(node_id)
        self._order.pop()

    def _put(self, node: MemoryNode) -> None:
        self.g.add_node(node.id, node=node)
        for p in node.parents:
            self.g.add_edge(p, node.id)
        self._order.append(node)

    # ------------------------------------------------------------ views
    def action_graph(self) -> list[dict[str, Any]]:
        """The original's ordered node list, the graph as the model reads it (§4.3)."""
        out: list[dict[str, Any]] = []
        for n in self._order:
            if n.kind == "root":
                out.append(
                    {"id": ROOT_ID, "name": "Initial Node", "content": f"Initial query from user: {n.query}"}
                )
            elif n.kind == "search":
                out.append(
                    {"id": n.id, "parent_ids": list(n.parents), "query": n.query, "summary": n.summary}
                )
            else:
                out.append({"id": ANSWER_ID, "parent_ids": list(n.parents)})
        return out

    def action_graph_json(self) -> str:
        return json.dumps(self.action_graph(), ensure_ascii=False)

    def snapshot(self, extra: Iterable[GraphNode] = ()) -> tuple[GraphNode, ...]:
        """The graph as :class:`GraphNode` tuples for ``GraphChanged`` (plus ``extra`` tentative nodes)."""
        out = []
        for n in self._order:
            label = {"root": n.query, "search": n.id, "answer": n.answer}[n.kind][:120]
            out.append(
                GraphNode(
                    id=n.id,
                    kind=n.kind,
                    parents=n.parents,
                    label=label,
                    query=n.query,
                    summary=n.summary if n.kind != "answer" else n.answer,
                )
            )
        return (*out, *extra)

    def answer_path(self) -> list[str]:
        """Ids of the nodes on root→answer paths, answer included, in creation order ([] without an
        answer). GGPO's ``P_ans``: positive rollouts get no gradient on the other (dead-end) nodes."""
        if ANSWER_ID not in self.g:
            return []
        keep = nx.ancestors(self.g, ANSWER_ID) | {ANSWER_ID}
        return [n.id for n in self._order if n.id in keep]

    # ------------------------------------------------------------ energy (:mod:`.memory_energy`)
    def energies(self) -> list[ScoredItem]:
        """Every memory item with its intrinsic energy E and final energy Ω, in graph order."""
        return memory_energy.energies(self._order, self.lambda_decay, self.gamma_gain)

    def select_memory(self, top_k: int = 5, total_pixels: int = MEMORY_BUFFER_PIXELS) -> list[MemoryGroup]:
        """The top-``top_k`` items by Ω with their pixel budgets, grouped by node in graph order."""
        return memory_energy.select(self._order, top_k, total_pixels, self.lambda_decay, self.gamma_gain)

    def scored_with_budgets(
        self, top_k: int = 5, total_pixels: int = MEMORY_BUFFER_PIXELS
    ) -> dict[tuple[str, int], ScoredItem]:
        """Every item keyed by (node id, position): Ω for all, the budget for the selected ones."""
        out = {(s.node_id, s.position): s for s in self.energies()}
        for group in self.select_memory(top_k, total_pixels):
            for s in group.items:
                out[(s.node_id, s.position)] = s
        return out

    # ------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        return {
            "version": _FORMAT_VERSION,
            "question": self.question,
            "lambda_decay": self.lambda_decay,
            "gamma_gain": self.gamma_gain,
            "nodes": [_node_dict(n) for n in self._order],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryGraph:
        """Rebuild a graph saved by :meth:`to_dict`; raises ValueError on an inconsistent graph
        (missing root, duplicate ids, unknown parents, cycles, parents after children)."""
        nodes = [_node_from(d) for d in data.get("nodes") or []]
        if not nodes or nodes[0].kind != "root" or nodes[0].id != ROOT_ID:
            raise ValueError('a saved graph must start with the "root" node')
        g: nx.DiGraph = nx.DiGraph()
        for n in nodes:
            if n.id in g:
                raise ValueError(f'duplicate node id "{n.id}"')
            g.add_node(n.id)
        for n in nodes:
            unknown = [p for p in n.parents if p not in g]
            if unknown:
                raise ValueError(f'node "{n.id}" has unknown parent ids {_quoted(unknown)}')
            g.add_edges_from((p, n.id) for p in n.parents)
        try:
            cycle = nx.find_cycle(g)
        except nx.NetworkXNoCycle:
            cycle = None
        if cycle:
            raise ValueError(
                "the graph has a cycle: " + " → ".join([str(e[0]) for e in cycle] + [str(cycle[0][0])])
            )
        position = {n.id: i for i, n in enumerate(nodes)}
        for n in nodes:
            late = [p for p in n.parents if position[p] > position[n.id]]
            if late:
                raise ValueError(f'node "{n.id}" comes before its parent(s) {_quoted(late)}')
        graph = cls(
            str(data.get("question") or nodes[0].query),
            lambda_decay=float(data.get("lambda_decay", LAMBDA_DECAY)),
            gamma_gain=float(data.get("gamma_gain", GAMMA_GAIN)),
        )
        graph.g = nx.DiGraph()
        graph._order = []
        for i, n in enumerate(nodes):
            n.index = i
            graph._put(n)
        return graph

    @classmethod
    def from_json(cls, text: str) -> MemoryGraph:
        return cls.from_dict(json.loads(text))


def _node_dict(n: MemoryNode) -> dict[str, Any]:
    return {
        "id": n.id,
        "kind": n.kind,
        "parent_ids": list(n.parents),
        "query": n.query,
        "summary": n.summary,
        "answer": n.answer,
        "created_at": n.created_at,
        "memorized": n.memorized,
        "items": [
            {
                "information_id": e.information_id,
                "modality": e.modality,
                "priority": e.priority,
                "source": e.source,
                "name": e.name,
                "page": e.page,
                "clip": e.clip,
                "frames": [{"path": f.path, "shown": f.shown, "timestamp": f.timestamp} for f in e.frames],
            }
            for e in n.items
        ],
    }


def _node_from(d: Mapping[str, Any]) -> MemoryNode:
    kind = str(d.get("kind", ""))
    if kind not in KINDS:
        raise ValueError(f"unknown node kind {kind!r} (expected one of {', '.join(KINDS)})")
    items = [
        MemoryEntry(
            information_id=str(e.get("information_id", "")),
            modality=str(e.get("modality", "image")),
            priority=int(e.get("priority", 1)),
            frames=[Frame(str(f["path"]), f.get("shown"), f.get("timestamp")) for f in e.get("frames") or []],
            source=str(e.get("source", "")),
            name=str(e.get("name", "")),
            page=e.get("page"),
            clip=e.get("clip"),
        )
        for e in d.get("items") or []
    ]
    return MemoryNode(
        id=str(d["id"]),
        kind=kind,
        index=0,
        parents=tuple(str(p) for p in d.get("parent_ids") or ()),
        query=str(d.get("query", "")),
        summary=str(d.get("summary", "")),
        answer=str(d.get("answer", "")),
        items=items,
        created_at=float(d.get("created_at", 0.0)),
        memorized=bool(d.get("memorized", False)),
    )


_LABEL = re.compile(r"^\s*(text|picture|image|video|clip|page)\s*#?\s*(\d+)\s*$", re.I)
_LABEL_KIND = {
    "text": "Text",
    "picture": "Picture",
    "image": "Picture",
    "page": "Picture",
    "video": "Video",
    "clip": "Video",
}


def normalize_label(information_id: str) -> str | None:
    """Canonical form of an information id ("picture1", "Image 1" → "Picture 1"); None if it is none."""
    m = _LABEL.match(str(information_id))
    if not m:
        return None
    return f"{_LABEL_KIND[m.group(1).lower()]} {int(m.group(2))}"


__all__ = [
    "ANSWER_ID",
    "GAMMA_GAIN",
    "LAMBDA_DECAY",
    "ROOT_ID",
    "Frame",
    "GraphEditError",
    "MemoryEntry",
    "MemoryGraph",
    "MemoryGroup",
    "MemoryNode",
    "ScoredItem",
    "normalize_label",
]
