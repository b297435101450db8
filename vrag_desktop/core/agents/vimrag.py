"""The VimRAG agent: a search DAG with graph-weighted visual memory, as a typed async event stream.

Control loop (reference §4.4): the context is rebuilt from scratch whenever the graph changes —
``[system, user(question + action graph + energy-selected memory)]`` — so the graph plus memory is
the agent's whole state. The model acts through three tools (:mod:`.vimrag_prompts`): after
``add_search_node`` the results go in one ``<tool_response>`` user message (Text n / Picture n /
Video n, videos as key frames each preceded by ``<t seconds>``) followed by the SUMMARY_PROMPT; the
next call must be ``summarize_and_memorize``, which attaches a summary and the kept pictures / key
frames to the node and triggers the rebuild; ``add_answer_node`` ends the run.

What we do differently from the original demo (reference §9), on purpose:

- parent ids, node ids and the search → memorize alternation are validated
  (:class:`~.memory_graph.MemoryGraph`); a bad call becomes an ``AgentError`` plus a corrective
  ``<tool_response>`` naming what to fix, and does not consume a step, up to ``TurnPolicy.max_invalid`` per run
  (after that they do, so a model that never gets the format right still ends).
- image parts are plain OpenAI ``image_url`` parts (no non-standard ``max_pixels`` key): sizing is
  done here — pictures fitted to ``max_pixels_image``, video frames to ``max_pixels_video``, memory
  items to their energy budget — then JPEG q75, shrunk until ≤ ``max_image_bytes``.
- a key timestamp that matches no shown frame (tolerance 0.5 s) is reported in an ``AgentError``
  (kind ``tool``, recoverable) next to the ``Memorize`` event, not dropped silently.
- closing the stream or cancelling the consumer stops the model request at once.
- the step limit gives the model one last turn asking for ``add_answer_node``; if it still does not
  answer: ``MaxSteps`` and a forced ``Answer`` (the original ended without any answer). The forced
  fallback adds no answer node, so :meth:`MemoryGraph.answer_path` stays empty for GGPO.

Video clips (reference §4.4 step 3): ``n = min(max(1, ⌊duration·fps_video⌋), max_frames_video)``
frames at ``linspace(0, total − 1, n)`` of the clip's video (its own file, or the source video cut to
``t_start..t_end``), each preceded by ``<t seconds>`` with ``t`` from the clip's start, to 0.1 s — the
numbers ``key_timestamp`` values are matched against. The frames share ``max_pixels_video``. A clip
whose video cannot be read (deleted, or only on a search server's machine) is shown as the key
frames the corpus wrote next to its contact sheet (``{name}_f{n}.jpg``, evenly spaced over the clip),
with a recoverable ``AgentError`` saying so; without those, as its contact sheet, at 0.0 s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

from vrag_desktop.core.agents import vimrag_prompts as P
from vrag_desktop.core.agents.events import (
    AgentError,
    AgentEvent,
    Answer,
    Evidence,
    GraphChanged,
    GraphNode,
    MaxSteps,
    Memorize,
    MemoryItem,
    SearchResults,
    SearchStarted,
)
from vrag_desktop.core.agents.memory_graph import GraphEditError, MemoryGraph
from vrag_desktop.core.agents.model_turn import BaseAgent, TurnPolicy, guarded
from vrag_desktop.core.agents.searchers import Searcher, SearchFailed
from vrag_desktop.core.agents.vimrag_media import (
    Media,
    _Pending,
    encode_capped,
    keyframe_times,
    thin_indices,
)
from vrag_desktop.core.endpoints.base import ChatModel

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- run state


class VimRAGAgent(BaseAgent):
    """Answers a question by building a search graph with visual memory (VimRAG protocol).

    ``image_dir`` receives every image put in a tool response (the exact JPEG bytes sent), named per
    run, so events and saved runs reference them by path. ``params`` override the sampling
    parameters (thinking on: temperature 0.6, top_p 0.95; off: temperature 0; max_tokens 4096, and
    ``chat_template_kwargs.enable_thinking`` as the original sent it). ``encode_ahead``: while the
    model writes its judgement of a search's items, encode the pictures the next context will likely
    need (one background thread, ~17 encodings of a top-3 page search); off, the rebuild makes them
    between the two model calls."""

    def __init__(
        self,
        model: ChatModel,
        searcher: Searcher,
        *,
        image_dir: Path,
        max_steps: int = 20,
        search_top_k: int = 3,
        max_pixels_image: int = P.MAX_PIXELS_IMAGE,
        max_pixels_video: int = P.MAX_PIXELS_VIDEO,
        memory_buffer_pixels: int = P.MEMORY_BUFFER_PIXELS,
        memory_top_k: int = 5,
        fps_video: float = 1.0,
        max_frames_video: int = 32,
        enable_thinking: bool = True,
        max_image_bytes: int = 38_000,
        jpeg_quality: int = 75,
        max_tokens: int | None = 4096,
        max_text_chars: int = 4000,
        timestamp_tolerance: float = 0.5,
        lambda_decay: float = 0.1,
        gamma_gain: float = 0.3,
        encode_ahead: bool = True,
        params: Mapping[str, Any] | None = None,
        turns: TurnPolicy | None = None,
    ) -> None:
        if max_steps < 0 or search_top_k < 1 or memory_top_k < 0 or max_frames_video < 1 or fps_video <= 0:
            raise ValueError(
                "need max_steps >= 0, search_top_k >= 1, memory_top_k >= 0, max_frames_video >= 1, "
                "fps_video > 0"
            )
        if min(max_pixels_image, max_pixels_video, memory_buffer_pixels, max_image_bytes) < 1:
            raise ValueError("pixel and byte limits must be positive")
        sampling: dict[str, Any] = (
            {"temperature": 0.6, "top_p": 0.95} if enable_thinking else {"temperature": 0}
        )
        if max_tokens is not None:
            sampling["max_tokens"] = max_tokens
        sampling["extra_body"] = {"chat_template_kwargs": {"enable_thinking": enable_thinking}}
        super().__init__(
            model, searcher, image_dir, sampling, max_steps=max_steps, params=params, turns=turns
        )
        self.jpeg_quality = jpeg_quality
        self.search_top_k = search_top_k
        self.max_pixels_image = max_pixels_image
        self.max_pixels_video = max_pixels_video
        self.memory_buffer_pixels = memory_buffer_pixels
        self.memory_top_k = memory_top_k
        self.fps_video = fps_video
        self.max_frames_video = max_frames_video
        self.enable_thinking = enable_thinking
        self.max_image_bytes = max_image_bytes
        self.max_text_chars = max_text_chars
        self.timestamp_tolerance = timestamp_tolerance
        self.lambda_decay = lambda_decay
        self.gamma_gain = gamma_gain
        self.encode_ahead = encode_ahead
        self.last_graph: MemoryGraph | None = None

    def run(self, query: str) -> AsyncGenerator[AgentEvent, None]:
        """Events of one run (:func:`.model_turn.guarded`: they end with ``Answer`` or a fatal
        ``AgentError``; closing the stream stops the model request). The finished graph is on
        :attr:`last_graph` (for saving runs and GGPO's answer path)."""
        return guarded(lambda: self._start(query), log, "VimRAG")

    def _start(self, query: str) -> _Run:
        run = _Run(self, query)
        self.last_graph = run.graph
        return run


class _Run(Media):
    """State of one question: graph, current messages, the pending search, the clock."""

    a: VimRAGAgent

    def __init__(self, agent: VimRAGAgent, question: str) -> None:
        super().__init__(agent, question)
        self.graph = MemoryGraph(question, lambda_decay=agent.lambda_decay, gamma_gain=agent.gamma_gain)
        self.rebuild = True
        self.pending: _Pending | None = None
        self.valid = False  # set by each tool: did the call do what it asked?
        self.done = False
        self.init_media()

    # ------------------------------------------------------------ helpers
    def graph_event(self, extra: Sequence[GraphNode] = ()) -> AgentEvent:
        return self.ev(GraphChanged, nodes=self.graph.snapshot(extra))

    def expected(self) -> str:
        """What the model may do next, for corrective messages."""
        if self.pending is not None:
            return (
                f'Your next call must be summarize_and_memorize for the search node "{self.pending.node_id}" '
                "(or add_answer_node if you can answer)."
            )
        return "Call add_search_node to search, or add_answer_node to answer."

    def correct(self, content: str, problem: str) -> None:
        """Tell the model its call was rejected, in the tool-response convention."""
        self.messages.append({"role": "assistant", "content": content})
        self.messages.append(
            {
                "role": "user",
                "content": (
                    f"<tool_response>\nError: {problem}\n</tool_response>\n"
                    f"Nothing was changed. {self.expected()} Call exactly one tool in the format "
                    '<tool_call>{"name": ..., "arguments": {...}}</tool_call>.'
                ),
            }
        )

    # ------------------------------------------------------------ loop
    async def events(self) -> AsyncGenerator[AgentEvent, None]:
        a = self.a
        a.image_dir.mkdir(parents=True, exist_ok=True)
        yield self.graph_event()
        while True:
            final = self.next_step()
            if self.rebuild:
                t = time.monotonic()
                self.messages = await asyncio.to_thread(self.build_context)
                self.tool_seconds += time.monotonic() - t
                self.rebuild = False
            request = list(self.messages)
            if final:
                request.append({"role": "user", "content": P.ANSWER_NOW_PROMPT})
            self._early_done = False
            async with aclosing(self.turn(request)) as model_events:
                async for ev in model_events:
                    yield ev
            content = self.reply.content or ""
            try:
                call: P.ToolCall | None = P.parse_tool_call(content)
                problem = ""
            except P.ToolCallError as exc:
                call, problem = None, str(exc)
            if final:
                async for ev in self.final_turn(content, call, problem):
                    yield ev
                return
            self.valid = False
            if call is None:
                yield self.ev(AgentError, kind="parse", content=problem, recoverable=True)
                self.correct(content, problem)
            else:
                for note in call.notes:
                    yield self.ev(AgentError, kind="parse", content=note, recoverable=True)
                tool = {
                    P.ADD_SEARCH_NODE: self.search,
                    P.SUMMARIZE_AND_MEMORIZE: self.memorize,
                    P.ADD_ANSWER_NODE: self.answer,
                }[call.name]
                t = time.monotonic()
                async with aclosing(tool(content, call)) as tool_events:
                    async for ev in tool_events:
                        yield ev
                self.tool_seconds += time.monotonic() - t
                if self.done:
                    return
            self.spend_step(self.valid)
            yield self.timing()

    async def final_turn(
        self, content: str, call: P.ToolCall | None, problem: str
    ) -> AsyncGenerator[AgentEvent, None]:
        """The turn after the step budget: only add_answer_node counts; else MaxSteps + fallback."""
        if call is not None and call.name == P.ADD_ANSWER_NODE:
            async with aclosing(self.answer(content, call)) as tool_events:
                async for ev in tool_events:
                    yield ev
            if self.done:
                return
        elif call is None:
            yield self.ev(AgentError, kind="parse", content=problem, recoverable=False)
        else:
            yield self.ev(
                AgentError,
                kind="tool",
                recoverable=False,
                content=f"{call.name} was called after the step limit; only add_answer_node is allowed",
            )
        yield self.ev(MaxSteps, content=f"Reached maximum steps ({self.a.max_steps}) without an answer")
        yield self.timing()
        yield self.ev(Answer, content=P.FALLBACK_ANSWER, evidence=self.evidence(all_nodes=True), forced=True)

    # ------------------------------------------------------------ model
    def on_content(self, text_so_far: str, chunk: str) -> list[AgentEvent]:
        """Draw a new search node as soon as its complete add_search_node call has streamed in."""
        if self._early_done or "</tool_call>" not in text_so_far[-(len(chunk) + 12) :]:
            return []
        self._early_done = True  # one try per reply: the first call is the one that counts
        early = self.early_node(text_so_far)
        return [] if early is None else [self.graph_event((early,))]

    def early_node(self, text: str) -> GraphNode | None:
        """The node of a complete, valid add_search_node already in the stream (drawn before the
        reply ends, as the original UI did); None otherwise. The graph itself is not changed."""
        try:
            call = P.parse_tool_call(text)
        except P.ToolCallError:
            return None
        if call.name != P.ADD_SEARCH_NODE or self.pending is not None:
            return None
        args = call.arguments
        if self.graph.check_search(args["id"], args["parent_ids"], args["query"]):
            return None
        return GraphNode(
            id=args["id"],
            kind="search",
            parents=tuple(dict.fromkeys(args["parent_ids"])),
            label=args["id"],
            query=args["query"],
        )

    # ------------------------------------------------------------ tools
    def reject(self, content: str, problem: str, kind: str = "tool") -> AgentEvent:
        self.correct(content, problem)
        return self.ev(AgentError, kind=kind, content=problem, recoverable=True)

    async def search(self, content: str, call: P.ToolCall) -> AsyncGenerator[AgentEvent, None]:
        args = call.arguments
        if self.pending is not None:
            yield self.reject(
                content,
                f"add_search_node was called before summarize_and_memorize for the search "
                f'node "{self.pending.node_id}": every search must be summarized first',
            )
            return
        try:
            node = self.graph.add_search(args["id"], args["parent_ids"], args["query"], created_at=self.now())
        except GraphEditError as exc:
            yield self.reject(content, f"add_search_node rejected: {exc}")
            return
        self.valid = True  # a search consumes a step even when it fails
        yield self.graph_event()
        yield self.ev(SearchStarted, content=node.query, node_id=node.id)
        try:
            hits = await asyncio.to_thread(self.a.searcher.search, node.query, self.a.search_top_k)
        except Exception as exc:  # SearchFailed or anything else from a searcher we do not own
            msg = str(exc) if isinstance(exc, SearchFailed) else f"search failed: {exc}"
            self.graph.remove(node.id)
            yield self.ev(SearchResults, content=node.query, node_id=node.id)
            yield self.ev(AgentError, kind="search", content=msg, recoverable=True)
            yield self.graph_event()
            self.messages.append({"role": "assistant", "content": content})
            self.messages.append(
                {
                    "role": "user",
                    "content": (
                        f'<tool_response>\nThe search failed ({msg}); the node "{node.id}" was not added.\n'
                        "</tool_response>\nYou may call add_search_node again, or add_answer_node."
                    ),
                }
            )
            return
        prepared = await asyncio.to_thread(self.prepare, hits, call.notes)
        yield self.ev(
            SearchResults, content=node.query, hits=prepared.refs, shown=prepared.shown, node_id=node.id
        )
        for p in prepared.problems:
            yield self.ev(AgentError, kind="search", content=p, recoverable=True)
        if not hits:
            yield self.ev(
                AgentError,
                kind="search",
                content=f"the search for '{node.query}' returned nothing",
                recoverable=True,
            )
        self.pending = _Pending(node.id, prepared.items)
        if self.a.encode_ahead:
            self.speculate_pending(self.pending)
        self.messages += [
            {"role": "assistant", "content": content},
            {"role": "user", "content": prepared.parts},
            {"role": "user", "content": P.SUMMARY_PROMPT},
        ]

    async def memorize(self, content: str, call: P.ToolCall) -> AsyncGenerator[AgentEvent, None]:
        pending = self.pending
        if pending is None:
            yield self.reject(
                content,
                "summarize_and_memorize was called without a pending search: call "
                "add_search_node first (or add_answer_node to answer)",
            )
            return
        args = call.arguments
        entries, judged, problems = self.judge(pending, args["memorize"])
        self.graph.memorize(pending.node_id, args["summarize"], entries)
        self.pending = None
        self.rebuild = True
        self.valid = True
        scored = self.graph.scored_with_budgets(self.a.memory_top_k, self.a.memory_buffer_pixels)
        items = []
        kept = {e.information_id: k for k, e in enumerate(entries)}
        for label, useful, priority in judged:
            shown = pending.items[label]
            s = scored.get((pending.node_id, kept[label])) if label in kept else None
            frames = entries[kept[label]].frames if label in kept else shown.frames
            items.append(
                MemoryItem(
                    information_id=label,
                    useful=useful,
                    priority=priority,
                    energy=round(s.omega, 6) if s else 0.0,
                    pixel_budget=s.budget if s else 0,
                    image=frames[0].shown if frames else None,
                    timestamps=tuple(f.timestamp for f in frames if f.timestamp is not None)
                    if label in kept
                    else (),
                )
            )
        yield self.ev(
            Memorize,
            content=self.graph.node(pending.node_id).summary,
            node_id=pending.node_id,
            items=tuple(items),
        )
        for p in problems:
            yield self.ev(AgentError, kind="tool", content=p, recoverable=True)
        yield self.graph_event()

    async def answer(self, content: str, call: P.ToolCall) -> AsyncGenerator[AgentEvent, None]:
        args = call.arguments
        try:
            self.graph.add_answer(args["parent_ids"], args["answer"], created_at=self.now())
        except GraphEditError as exc:
            yield self.reject(content, f"add_answer_node rejected: {exc}")
            return
        self.valid = self.done = True
        yield self.graph_event()
        yield self.timing()
        yield self.ev(Answer, content=args["answer"], evidence=self.evidence())

    def evidence(self, all_nodes: bool = False) -> tuple[Evidence, ...]:
        """Memory items of the nodes on the answer path (of every node for a forced answer), plus the
        items of a still-pending search on that path (the model answered right after seeing them)."""
        on_path = set(self.graph.ids if all_nodes else self.graph.answer_path())
        out: list[Evidence] = []

        def add(e: Evidence) -> None:
            if e not in out:
                out.append(e)

        for node in self.graph.nodes:
            if node.id not in on_path:
                continue
            for entry in node.items:
                for f in entry.frames:
                    add(Evidence(source=entry.source, image=f.path, page=entry.page))
            if self.pending is not None and self.pending.node_id == node.id:
                for shown in self.pending.items.values():
                    if not shown.frames:
                        add(Evidence(source=shown.hit.source, page=shown.hit.page))
                    for f in shown.frames:
                        add(Evidence(source=shown.hit.source, image=f.path, page=shown.hit.page))
        return tuple(out)


__all__ = ["VimRAGAgent", "encode_capped", "keyframe_times", "thin_indices"]
