"""The VRAG agent: search pages, zoom into regions, answer — as a typed async event stream.

Protocol (reference §3, see :mod:`.vrag_protocol`): one user turn with the VRAG prompt and no system
prompt; each model reply is appended as an assistant message; each observation is a new user message
with one ``image_url`` part (the resized image as a JPEG data URI). The released VRAG model was
trained on exactly this, so the prompt bytes, tags, sizing and crop math are not ours to change.

What we do differently from the original demo (reference §9), on purpose:

- never raises into the caller: bad tags, bad boxes, failed searches and endpoint errors become
  :class:`AgentError` events plus a corrective user turn; a fatal endpoint error ends the run with
  ``AgentError(recoverable=False)``; the step limit ends with ``MaxSteps`` and a forced ``Answer``.
- one **new** image per search; when every hit was already shown the model is told so in words
  (the original re-sent the last path).
- nested zoom: a box refers to the last image shown (a crop after a crop); every ``Crop`` carries its
  region in the *page's* raw pixels so the UI can draw it on the page.
- invalid replies (no tag, bad box) do not consume steps, up to ``TurnPolicy.max_invalid`` per run (after
  that they do, so a model that never uses tags still ends); a search that fails does consume one.
- the served model name is the :class:`ChatModel`'s business, never hard-coded here.

Streaming choice: ``ContentDelta`` carries the model's raw text as it arrives, tags included
(concatenated per step it equals the assistant message); ``ThinkDelta`` carries the text inside
``<think>…</think>`` (tags stripped) and any ``reasoning_content``. So a UI shows either the raw
transcript or a thinking pane without re-parsing. Non-streaming models get the same events once the
reply is complete.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from vrag_desktop.core.agents import page_views, zoom
from vrag_desktop.core.agents import vrag_protocol as vp
from vrag_desktop.core.agents.events import (
    AgentError,
    AgentEvent,
    Answer,
    BBox,
    Crop,
    Evidence,
    GraphChanged,
    GraphNode,
    ImageShown,
    MaxSteps,
    SearchResults,
    SearchStarted,
)
from vrag_desktop.core.agents.model_turn import (
    FATAL_ENDPOINT_KINDS,
    BaseAgent,
    ModelTurns,
    TurnPolicy,
    guarded,
)
from vrag_desktop.core.agents.searchers import Searcher, SearchFailed, SearchHit
from vrag_desktop.core.endpoints.base import ChatModel

log = logging.getLogger(__name__)


@dataclass
class _Shown:
    """The last image in the model's context and what is behind it."""

    hit: SearchHit
    page_raw: str  # local path of the page's raw image (crops are cut from it)
    view: vp.View


class VRAGAgent(BaseAgent):
    """Answers a question by searching a corpus and zooming into page regions (VRAG protocol).

    ``image_dir`` receives every image shown to the model (resized JPEGs, exactly the bytes sent)
    and crops, named per run, so events and saved runs can reference them by path. Sampling
    parameters left as None are not sent (the original sent none)."""

    def __init__(
        self,
        model: ChatModel,
        searcher: Searcher,
        *,
        image_dir: Path,
        max_steps: int = 10,
        top_k: int = 3,
        min_pixels: int = vp.MIN_PIXELS,
        max_pixels: int = vp.MAX_PIXELS,
        crop_pad: int = vp.CROP_PAD,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        trailing_newline: bool = True,
        snap: int | None = None,
        jpeg_quality: int = 90,
        params: Mapping[str, Any] | None = None,
        turns: TurnPolicy | None = None,
    ) -> None:
        if max_steps < 0 or top_k < 1 or min_pixels < 1 or max_pixels < min_pixels or crop_pad < 0:
            raise ValueError("need max_steps >= 0, top_k >= 1, 1 <= min_pixels <= max_pixels, crop_pad >= 0")
        sampling = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}
        sent = {k: v for k, v in sampling.items() if v is not None}
        super().__init__(model, searcher, image_dir, sent, max_steps=max_steps, params=params, turns=turns)
        self.jpeg_quality = jpeg_quality
        self.top_k = top_k
        self.min_pixels = min_pixels
        self.max_pixels = max_pixels
        self.crop_pad = crop_pad
        self.trailing_newline = trailing_newline
        self.snap = snap

    @property
    def view_spec(self) -> page_views.ViewSpec:
        """What a shown page's view depends on (its key in the kept views)."""
        return page_views.ViewSpec(self.min_pixels, self.max_pixels, self.snap, self.jpeg_quality)

    def run(self, question: str) -> AsyncGenerator[AgentEvent, None]:
        """Events of one run (:func:`.model_turn.guarded`: they end with ``Answer`` or a fatal
        ``AgentError``, never raise, and closing the stream stops the model request at once)."""
        return guarded(lambda: _Run(self, question), log, "VRAG")


class _Run(ModelTurns):
    """State of one question: the conversation, what was shown, the graph, the clock."""

    a: VRAGAgent

    def __init__(self, agent: VRAGAgent, question: str) -> None:
        super().__init__(agent, question)
        self.shown_images: set[str] = set()  # image paths and content ids (a copy in another corpus)
        self.n_shown = 0
        self.current: _Shown | None = None
        self._page: zoom.PageImage | None = None  # the page image nested zooms cut again
        self.last_zoom: zoom.Zoomed | None = None  # how the last crop was made
        self.evidence: list[Evidence] = []
        self.nodes: list[GraphNode] = [GraphNode(id="root", kind="root", label=question, query=question)]
        self.observation: list[dict[str, Any]] = []

    # ------------------------------------------------------------ helpers
    def node(self, kind: str, label: str, **kw: Any) -> None:
        nid = f"s{self.step}-{kind}" if kind != "answer" else "answer"
        self.nodes.append(GraphNode(id=nid, kind=kind, parents=(self.nodes[-1].id,), label=label[:120], **kw))

    def graph(self) -> AgentEvent:
        return self.ev(GraphChanged, nodes=tuple(self.nodes))

    def say(self, text: str) -> None:
        self.observation.append({"type": "text", "text": text})

    def add_evidence(self, e: Evidence) -> None:
        if e not in self.evidence:
            self.evidence.append(e)

    # ------------------------------------------------------------ loop
    async def events(self) -> AsyncGenerator[AgentEvent, None]:
        a = self.a
        a.image_dir.mkdir(parents=True, exist_ok=True)
        prompt = vp.build_prompt(self.question, a.trailing_newline)
        first: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
        if a.max_steps == 0:
            first.append({"type": "text", "text": vp.ANSWER_NOW})
        self.messages.append({"role": "user", "content": first})
        yield self.graph()
        while True:
            final = self.next_step()
            async with aclosing(self.turn(list(self.messages))) as model_events:
                async for ev in model_events:
                    yield ev
            result = self.reply
            content = result.content or ""
            self.messages.append({"role": "assistant", "content": content})
            turn = vp.parse_turn(content)
            think = turn.think or (result.reasoning or "").strip() or None
            if think:
                self.node("think", think, summary=think)
            if turn.action == "answer":
                if turn.problems:
                    yield self.ev(
                        AgentError, kind="parse", content="; ".join(turn.problems), recoverable=True
                    )
                self.node("answer", turn.argument, summary=turn.argument)
                yield self.graph()
                yield self.timing()
                yield self.ev(Answer, content=turn.argument, evidence=tuple(self.evidence))
                return
            if final:
                yield self.ev(MaxSteps, content=f"Reached maximum steps ({a.max_steps}) without an answer")
                self.node("answer", vp.FALLBACK_ANSWER, summary="forced")
                yield self.graph()
                yield self.timing()
                yield self.ev(Answer, content=vp.FALLBACK_ANSWER, evidence=tuple(self.evidence), forced=True)
                return
            self.observation = []
            valid = True
            if turn.action is None:
                valid = False
                problem = "; ".join(turn.problems)
                yield self.ev(AgentError, kind="parse", content=problem, recoverable=True)
                self.say(vp.invalid_action_message(problem))
            else:
                if turn.problems:  # carried out, but the model should hear about it
                    yield self.ev(
                        AgentError, kind="parse", content="; ".join(turn.problems), recoverable=True
                    )
                t = time.monotonic()
                tool = self.search(turn.argument) if turn.action == "search" else self.crop(turn.argument)
                async with aclosing(tool) as tool_events:
                    async for ev in tool_events:
                        if turn.action == "bbox" and isinstance(ev, AgentError):
                            valid = False
                        yield ev
                self.tool_seconds += time.monotonic() - t
                if turn.problems and valid:
                    self.say("Note: " + "; ".join(turn.problems) + ".")
            self.spend_step(valid)
            if self.steps_left <= 0:
                self.say(vp.ANSWER_NOW)
            self.messages.append({"role": "user", "content": self.observation})
            yield self.graph()
            yield self.timing()

    # ------------------------------------------------------------ tools
    async def search(self, query: str) -> AsyncGenerator[AgentEvent, None]:
        self.node("search", query, query=query)
        yield self.ev(SearchStarted, content=query)
        try:
            hits = await asyncio.to_thread(self.a.searcher.search, query, self.a.top_k)
        except Exception as exc:  # SearchFailed or anything else from a searcher we do not own
            msg = str(exc) if isinstance(exc, SearchFailed) else f"search failed: {exc}"
            yield self.ev(SearchResults, content=query)
            yield self.ev(AgentError, kind="search", content=msg, recoverable=True)
            self.say(
                f"The search failed ({msg}). You can search again, crop the last image with <bbox>, "
                "or answer inside <answer> and </answer>."
            )
            return
        if not hits:
            yield self.ev(SearchResults, content=query)
            yield self.ev(
                AgentError,
                kind="search",
                content=f"the search for '{query}' returned nothing",
                recoverable=True,
            )
            self.say(
                "The search returned no results. Try a different query, or answer inside <answer> and </answer>."
            )
            return
        shown_idx: int | None = None
        shown: tuple[Path, str] | None = None
        problems: list[str] = []
        for i, hit in enumerate(hits):
            if not hit.image or {hit.image, hit.content_id} & self.shown_images:
                continue
            try:
                shown = await asyncio.to_thread(self.show_page, hit)
            except Exception as exc:  # an unreadable image: try the next hit
                problems.append(f"cannot open the image of '{hit.name}': {exc}")
                continue
            shown_idx = i
            break
        refs = tuple(
            h.labelled(f"Image {self.n_shown + 1}" if i == shown_idx else "") for i, h in enumerate(hits)
        )
        yield self.ev(
            SearchResults, content=query, hits=refs, shown=() if shown_idx is None else (shown_idx,)
        )
        for p in problems:
            yield self.ev(AgentError, kind="search", content=p, recoverable=True)
        if shown_idx is None:
            if problems:
                reason = "the images of the results could not be opened"
            elif any(h.image for h in hits):
                reason = "all results of this search have already been shown to you"
            else:
                reason = "the results of this search have no image to show"
            self.say(
                f"No new image: {reason}. Try a different query, crop the last image with <bbox>, "
                "or answer inside <answer> and </answer>."
            )
            return
        assert shown is not None
        shown_path, uri = shown
        hit = hits[shown_idx]
        assert self.current is not None
        self.n_shown += 1
        self.shown_images.add(str(hit.image))
        if hit.content_id:  # the same page from another corpus's copy is not new either
            self.shown_images.add(hit.content_id)
        self.add_evidence(Evidence(source=hit.source, image=self.current.page_raw, page=hit.page))
        w, h = self.current.view.shown_size
        yield self.ev(
            ImageShown,
            image=str(shown_path),
            raw=self.current.page_raw,
            width=w,
            height=h,
            source=hit.source,
            page=hit.page,
        )
        self.observation.insert(0, {"type": "image_url", "image_url": {"url": uri}})

    def show_page(self, hit: SearchHit) -> tuple[Path, str]:
        """(Worker thread.) Load a hit's raw image, write the resized copy, make it current."""
        assert hit.image
        # A local page is opened by path (its kept decode is found by the file's stat, no digest of
        # its bytes); one from a search server is fetched.
        local = getattr(self.a.searcher, "local_files", True) and Path(hit.image).is_file()
        raw_path = hit.image
        if local:  # kept on disk after its first show (page_views): no decode at all
            shown = page_views.view(raw_path, self.a.view_spec)
        else:  # fetched from a search server: keep a local copy to crop and to draw crops on
            data = self.a.searcher.load_image(hit.image)
            shown = page_views.make(data, self.a.view_spec)
            local_copy = self.out_path("raw", Path(raw_path).suffix or ".img")
            local_copy.write_bytes(data)
            raw_path = str(local_copy)
        path = self.out_path("page")
        path.write_bytes(shown.jpeg)
        uri = vp.data_uri(shown.jpeg)
        self.current = _Shown(hit, raw_path, vp.View(shown.shown_size, shown.raw_size))
        zoom.prepare_soon(hit, raw_path)  # while the model reads the page
        return path, uri

    def write_jpeg(self, img: Image.Image, what: str) -> tuple[Path, str]:
        jpeg = vp.jpeg_bytes(img, self.a.jpeg_quality)
        path = self.out_path(what)
        path.write_bytes(jpeg)
        return path, vp.data_uri(jpeg)

    async def crop(self, text: str) -> AsyncGenerator[AgentEvent, None]:
        cur = self.current
        if cur is None:
            yield self.ev(
                AgentError, kind="bbox", content="bbox before any image was shown", recoverable=True
            )
            self.say(
                vp.invalid_action_message(
                    "There is no image to crop yet: search first with <search> query </search>"
                )
            )
            return
        w, h = cur.view.shown_size
        try:
            box = vp.parse_bbox(text, (w, h))
        except vp.BBoxError as exc:
            yield self.ev(AgentError, kind="bbox", content=str(exc), recoverable=True)
            self.say(
                vp.invalid_action_message(
                    f"{str(exc)[:1].upper()}{str(exc)[1:]}. The coordinates are absolute "
                    f"pixels of the last image you were shown ({w}x{h})"
                )
            )
            return
        self.node("crop", text, query=text)
        yield self.ev(BBox, content=text, box=box)
        pad = await asyncio.to_thread(self.pad, cur)
        region, view = cur.view.zoom(box, pad, self.a.min_pixels, self.a.max_pixels, snap=self.a.snap)
        try:
            path, uri = await asyncio.to_thread(self.cut, cur.page_raw, region, view.shown_size)
        except Exception as exc:
            yield self.ev(AgentError, kind="bbox", content=f"cannot crop the image: {exc}", recoverable=True)
            self.say(f"The crop failed ({exc}). Search again or answer inside <answer> and </answer>.")
            return
        self.current = _Shown(cur.hit, cur.page_raw, view)
        zoomed = self.last_zoom
        assert zoomed is not None
        self.add_evidence(
            Evidence(source=cur.hit.source, image=cur.page_raw, page=cur.hit.page, region=region)
        )
        yield self.ev(
            Crop,
            region=region,
            raw=cur.page_raw,
            image=str(path),
            width=view.shown_size[0],
            height=view.shown_size[1],
            source=cur.hit.source,
            page=cur.hit.page,
            zoomed_from=zoomed.origin,
            note=zoomed.note,
        )
        self.observation.insert(0, {"type": "image_url", "image_url": {"url": uri}})

    def page(self, page_raw: str) -> zoom.PageImage:
        """The page image behind the current view (kept for the run: nested zooms cut it again)."""
        page = self._page
        if page is None or page.path != page_raw:
            page = self._page = zoom.PageImage(page_raw)
        return page

    def pad(self, cur: _Shown) -> int:
        """(Worker thread.) The crop padding in page-image pixels: the original's 56 pixels of *its*
        raw image (a 200-dpi page, the original file), which our page image may be smaller than."""
        scale = zoom.raw_scale(cur.hit, self.page(cur.page_raw))
        return max(0, round(self.a.crop_pad * scale))

    def cut(self, page_raw: str, region: vp.Region, size: tuple[int, int]) -> tuple[Path, str]:
        """(Worker thread.) The page region at the model's size, made from the source of the current
        hit (see :mod:`.zoom`: re-rendered PDF, original image or video frame; the page image when
        the source is gone or changed). How it was made is left in ``last_zoom``."""
        page = self.page(page_raw)
        cur = self.current
        hit = cur.hit if cur is not None and cur.page_raw == page_raw else None
        if hit is None:
            hit = SearchHit(score=0.0, name="", source=page_raw, modality="page image")
        zoomed = self.last_zoom = zoom.zoom(hit, page, region, size)
        return self.write_jpeg(zoomed.image, "crop")


__all__ = ["FATAL_ENDPOINT_KINDS", "VRAGAgent"]
