"""VimRAG's memory items, their energy, and their pictures as the rebuilt context shows them.

Split from :mod:`.memory_graph` (the graph's edits, validation and saving) because the energy is a
pure function of the nodes in creation order — their parents and their items' priorities — and is
needed without a graph too: while the model writes its ``summarize_and_memorize`` reply, a run
scores the graph as it would be after each plausible reply (:func:`outcomes`) and encodes the
pictures those contexts need in the background (:class:`MemoryPictures`), so the rebuild between
two model calls finds them done. Reference §4.5:

- intrinsic ``E = p̂·(1 + outdeg)·exp(−λ(T − i))`` with ``T = len(graph) − 1`` and ``i`` the node's
  creation index; back-propagated ``Ω = E + γ·Σ_children mean Ω(child items)`` (a child without
  items adds 0), children visited before parents (edges always point to newer nodes);
- :func:`select` keeps the top-k items by Ω and gives each ``⌊S_total·Ω/ΣΩ_selected⌋`` pixels (a
  video's frames share one budget), grouped by node in graph order;
- each selected picture is fitted to its budget (on a ~19 % grid), JPEG q75, shrunk until ≤ 38,000
  bytes (§4.4 step 3), from a decode kept per file; the bytes are those the plain rebuild makes.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from PIL import Image

from vrag_desktop.core.agents import imaging
from vrag_desktop.core.agents import vrag_protocol as vp
from vrag_desktop.core.agents.imaging import LRU, encode_capped
from vrag_desktop.core.agents.vimrag_prompts import MEMORY_BUFFER_PIXELS

log = logging.getLogger(__name__)

LAMBDA_DECAY = 0.1
GAMMA_GAIN = 0.3


@dataclass
class Frame:
    """One stored picture of a memory item: ``path`` is the full-resolution file it is re-encoded
    from at the item's pixel budget; ``shown`` the JPEG the model was first shown; ``timestamp`` the
    second in the video (None for images)."""

    path: str
    shown: str | None = None
    timestamp: float | None = None


@dataclass
class MemoryEntry:
    """A multimodal memory item: an image (one frame) or a video (its kept key frames)."""

    information_id: str  # how the model saw it: "Picture 2", "Video 1"
    modality: str  # image | video
    priority: int  # 1..5, the model's priority_score
    frames: list[Frame] = field(default_factory=list)
    source: str = ""
    name: str = ""
    page: int | None = None
    clip: int | None = None

    @property
    def norm_priority(self) -> float:
        """p̂ = priority/5 with the score clamped to 1..5."""
        return max(1, min(5, int(self.priority))) / 5.0


@dataclass
class MemoryNode:
    id: str
    kind: str  # root | search | answer
    index: int  # creation order: the time index i of the energy formula
    parents: tuple[str, ...] = ()
    query: str = ""
    summary: str = ""
    answer: str = ""
    items: list[MemoryEntry] = field(default_factory=list)
    created_at: float = 0.0  # seconds since the run started
    memorized: bool = False  # summarize_and_memorize has been applied (search nodes)


@dataclass(frozen=True)
class ScoredItem:
    """A memory item with its energies; ``budget`` is its pixel budget once selected (else 0)."""

    node_id: str
    position: int  # index in the node's items
    entry: MemoryEntry
    energy: float  # intrinsic E
    omega: float  # E plus back-propagated feedback
    budget: int = 0


@dataclass(frozen=True)
class MemoryGroup:
    """The selected items of one node, in the order they are put in the prompt."""

    node_id: str
    items: tuple[ScoredItem, ...]


def energies(
    nodes: Sequence[MemoryNode], lambda_decay: float = LAMBDA_DECAY, gamma_gain: float = GAMMA_GAIN
) -> list[ScoredItem]:
    """Every memory item of ``nodes`` (creation order) with its E and Ω, in graph order. A node's
    children are the later nodes naming it as a parent, in creation order (so the sums add up in
    the same order on every call)."""
    children: dict[str, list[str]] = {n.id: [] for n in nodes}
    for n in nodes:
        for p in dict.fromkeys(n.parents):
            children[p].append(n.id)
    T = len(nodes) - 1
    intrinsic: dict[str, list[float]] = {}
    for n in nodes:
        phi = 1 + len(children[n.id])
        decay = math.exp(-lambda_decay * (T - n.index))
        intrinsic[n.id] = [e.norm_priority * phi * decay for e in n.items]
    omega: dict[str, list[float]] = {}
    for n in reversed(nodes):
        feedback = sum(sum(omega[c]) / len(omega[c]) for c in children[n.id] if omega.get(c))
        omega[n.id] = [e + gamma_gain * feedback for e in intrinsic[n.id]]
    return [
        ScoredItem(n.id, k, entry, intrinsic[n.id][k], omega[n.id][k])
        for n in nodes
        for k, entry in enumerate(n.items)
    ]


def select(
    nodes: Sequence[MemoryNode],
    top_k: int = 5,
    total_pixels: int = MEMORY_BUFFER_PIXELS,
    lambda_decay: float = LAMBDA_DECAY,
    gamma_gain: float = GAMMA_GAIN,
) -> list[MemoryGroup]:
    """The top-``top_k`` items by Ω with budgets ``⌊S_total·Ω/ΣΩ_selected⌋`` (so the budgets sum
    to at most ``total_pixels``), grouped by node in graph order. Ties keep the older item."""
    scored = energies(nodes, lambda_decay, gamma_gain)
    if top_k <= 0 or not scored:
        return []
    rank = {id(s): r for r, s in enumerate(scored)}
    chosen = sorted(scored, key=lambda s: (-s.omega, rank[id(s)]))[:top_k]
    total = sum(s.omega for s in chosen)
    with_budget = {
        (s.node_id, s.position): ScoredItem(
            s.node_id,
            s.position,
            s.entry,
            s.energy,
            s.omega,
            math.floor(total_pixels * s.omega / total) if total > 0 else total_pixels // len(chosen),
        )
        for s in chosen
    }
    groups: list[MemoryGroup] = []
    for n in nodes:
        items = tuple(with_budget[(n.id, k)] for k in range(len(n.items)) if (n.id, k) in with_budget)
        if items:
            groups.append(MemoryGroup(n.id, items))
    return groups


def outcomes(
    nodes: Sequence[MemoryNode],
    node_id: str,
    candidates: Sequence[MemoryEntry],
    top_k: int = 5,
    total_pixels: int = MEMORY_BUFFER_PIXELS,
    lambda_decay: float = LAMBDA_DECAY,
    gamma_gain: float = GAMMA_GAIN,
    *,
    enumerate_up_to: int = 3,
) -> list[list[MemoryGroup]]:
    """The memory selections the next context may hold, one per plausible judgement of the search
    node ``node_id``'s ``candidates`` (its pictures and videos, in the order shown): each kept with a
    priority 1..5 or not kept. Up to ``enumerate_up_to`` candidates every combination is listed
    (6³ = 216 for a top-3 search); beyond, the judgements that give all of them one priority. Why:
    the budgets of every item, older ones included, depend on these priorities, so the pictures the
    next context needs can be encoded while the model is still writing its judgement."""
    import itertools

    choices: list[int | None] = [None, 1, 2, 3, 4, 5]
    if len(candidates) <= enumerate_up_to:
        judgements: list[tuple[int | None, ...]] = list(itertools.product(choices, repeat=len(candidates)))
    else:
        judgements = [(p,) * len(candidates) for p in choices]
    out = []
    for judged in judgements:
        items = [
            MemoryEntry(c.information_id, c.modality, p, c.frames, c.source, c.name, c.page, c.clip)
            for c, p in zip(candidates, judged, strict=True)
            if p is not None
        ]
        trial = [
            MemoryNode(n.id, n.kind, n.index, n.parents, items=items) if n.id == node_id else n for n in nodes
        ]
        out.append(select(trial, top_k, total_pixels, lambda_decay, gamma_gain))
    return out


# ---------------------------------------------------------------- the selected items' pictures


def quantize_pixels(pixels: int, steps_per_octave: int = 4) -> int:
    """``pixels`` rounded down to a geometric grid (4 steps per doubling, ~19 % apart)."""
    if pixels <= 1:
        return max(1, pixels)
    return max(1, int(2 ** (math.floor(math.log2(pixels) * steps_per_octave) / steps_per_octave)))


_Job = tuple[str, int, int]  # (file, pixels, pixels of the decode it is made from)


@dataclass(frozen=True)
class _Decode:
    """A memory file's decode, made for ``q`` pixels: its size, the file's full size, the pixels
    (None while only planned)."""

    q: int
    size: tuple[int, int]
    full: tuple[int, int]
    image: Image.Image | None = field(default=None, compare=False)

    @property
    def area(self) -> int:
        return self.size[0] * self.size[1]


@dataclass(frozen=True)
class _Encoded:
    data: bytes
    decode: _Decode


_speculator_pool: ThreadPoolExecutor | None = None
_speculator_lock = threading.Lock()


def _speculator() -> ThreadPoolExecutor:
    """One thread for every run's speculation: at most one core of background encoding."""
    global _speculator_pool
    with _speculator_lock:
        if _speculator_pool is None:
            _speculator_pool = ThreadPoolExecutor(1, thread_name_prefix="vimrag-speculate")
        return _speculator_pool


_encoder_pool: ThreadPoolExecutor | None = None


def _encoders() -> ThreadPoolExecutor:
    """Threads a rebuild's missing encodings are made on (Pillow releases the GIL meanwhile)."""
    global _encoder_pool
    with _speculator_lock:
        if _encoder_pool is None:
            _encoder_pool = ThreadPoolExecutor(imaging.workers(), thread_name_prefix="vimrag-encode")
        return _encoder_pool


class MemoryPictures:
    """The pictures of a run's memory at their budgets, for the context rebuilt at every step. Needs
    ``self.a`` (the agent: limits and energy parameters) and ``self.graph``."""

    a: Any
    graph: Any

    def init_memory_pictures(self) -> None:
        self._memory_cache: dict[tuple[str, int], str] = {}
        # What each memory file was last encoded from (the decode and the budget it was made for): a
        # budget the kept decode covers reuses it, as the context's bytes have always been made.
        self._decodes = LRU(8)
        self._jobs: dict[_Job, Future[_Encoded]] = {}  # encodings made or being made, by job
        self._jobs_lock = threading.Lock()
        self._sizes: dict[tuple[str, int], tuple[tuple[int, int], tuple[int, int]]] = {}
        self._speculation: Future[None] | None = None
        self._speculating = 0  # the search whose outcomes are being encoded; 0: none
        self._rebuilds = 0  # rebuilds finished: a prefetch queued for an earlier one is void

    def forget_spare_encodings(self) -> None:
        """After a rebuild: drop the speculative encodings it did not take (they hold decodes)."""
        with self._jobs_lock:
            self._jobs = {j: f for j, f in self._jobs.items() if not f.done()}
            self._rebuilds += 1

    def memory_uri(self, frame: Frame, pixels: int) -> str | None:
        """Data URI of a kept frame at ``pixels``, from its full-size file, or from the JPEG first
        shown when that file has gone (a corpus re-indexed mid-run); None when neither opens."""
        # Budgets shift a little with every new node; on a ~19 % geometric grid (rounded down, so never
        # over budget) most items reuse their encoding from the previous step.
        pixels = quantize_pixels(pixels)
        key = (frame.path, pixels)
        if key not in self._memory_cache:
            for path in (frame.path, frame.shown):
                if not path:
                    continue
                try:
                    data = self._encode(path, pixels)
                except OSError:
                    log.warning("memory image %s cannot be opened", path)
                    continue
                self._memory_cache[key] = vp.data_uri(data)
                break
            else:
                return None
        return self._memory_cache[key]

    def _encode(self, path: str, pixels: int) -> bytes:
        """The JPEG of ``path`` at ``pixels``: from the kept decode when it is big enough, else from
        a new decode at the scale ``pixels`` needs (then kept) — taken from the speculation when it
        made that very encoding, waited for when it is making it."""
        kept: _Decode | None = self._decodes.get(path)
        fresh = kept is None or (kept.area < pixels and kept.size != kept.full)
        job = (path, pixels, pixels if fresh or kept is None else kept.q)
        with self._jobs_lock:
            made = self._jobs.get(job)
            if made is None:
                made = self._jobs[job] = Future()
                mine = True
            else:
                mine = False
        if mine:
            try:
                made.set_result(self._run_job(job, None if fresh else kept))
            except BaseException as exc:
                with self._jobs_lock:
                    del self._jobs[job]
                made.set_exception(exc)
                raise
        done = made.result()
        if fresh:
            self._decodes[path] = done.decode
        return done.data

    def _run_job(self, job: _Job, kept: _Decode | None) -> _Encoded:
        path, pixels, decode_pixels = job
        if kept is not None and kept.image is not None:
            decode = kept
        else:
            im, full = vp.open_for_pixels(path, decode_pixels)
            decode = _Decode(decode_pixels, im.size, full, im)
        assert decode.image is not None
        data, _ = encode_capped(decode.image, pixels, self.a.max_image_bytes, self.a.jpeg_quality)
        return _Encoded(data, decode)

    # ------------------------------------------------------------ speculation
    def speculate(self, node_id: str, candidates: list[MemoryEntry]) -> None:
        """Encode, in the background, what the next context will likely need once the model has
        judged the pictures and videos (``candidates``, priorities ignored) of search ``node_id``:
        while it writes its summarize_and_memorize reply (seconds), the rebuild that follows (tens
        of ms of resizing) is done ahead. They are the encodings the rebuild would make, so the
        bytes do not change; the rebuild takes those that are done, waits for one in progress, and
        makes any other itself."""
        if not candidates or self.a.memory_top_k <= 0:
            return
        nodes = [replace(n, items=list(n.items)) for n in self.graph.nodes]
        decodes: list[tuple[str, _Decode]] = list(self._decodes.items())
        cached = set(self._memory_cache)
        self._speculating += 1
        ticket = self._speculating
        self._speculation = _speculator().submit(
            self._speculate, ticket, nodes, node_id, candidates, decodes, cached
        )

    def stop_speculating(self) -> None:
        """The judgement is in: start no further speculative encoding (the one running finishes)."""
        self._speculating += 1

    def finish(self) -> None:
        """The run is over: no further encoding ahead."""
        self.stop_speculating()

    def settle(self, timeout: float | None = None) -> None:
        """Wait until the speculation has finished (tests, benchmarks)."""
        if self._speculation is not None:
            self._speculation.result(timeout)

    def _speculate(
        self,
        ticket: int,
        nodes: list[MemoryNode],
        node_id: str,
        candidates: list[MemoryEntry],
        decodes: list[tuple[str, _Decode]],
        cached: set[tuple[str, int]],
    ) -> None:
        """(Speculation thread.) The rebuild of every plausible outcome, replayed on copies of the
        run's state to learn which encodings it needs; those needed by most outcomes first."""
        selections = outcomes(
            nodes, node_id, candidates, self.a.memory_top_k, self.a.memory_buffer_pixels,
            self.a.lambda_decay, self.a.gamma_gain,
        )  # fmt: skip
        votes: dict[_Job, int] = {}
        kept_by_job: dict[_Job, _Decode | None] = {}
        for groups in selections:
            for job, kept in self._plan(groups, decodes, cached):
                votes[job] = votes.get(job, 0) + 1
                kept_by_job.setdefault(job, kept)
            if self._speculating != ticket:
                return
        for job in sorted(votes, key=lambda j: -votes[j]):
            if self._speculating != ticket:
                return
            self._make(job, kept_by_job[job])

    def prefetch(self, groups: Sequence[MemoryGroup]) -> None:
        """Start every encoding the context of ``groups`` lacks, spread over the cores; the
        rebuild, walking the items in order, then collects them (a cold rebuild of five items
        runs on every core)."""
        plan = self._plan(groups, list(self._decodes.items()), set(self._memory_cache))
        with self._jobs_lock:
            plan = [(job, kept) for job, kept in plan if job not in self._jobs]  # made ahead
            rebuild = self._rebuilds
        if len(plan) > 1:
            for job, kept in plan:
                _encoders().submit(self._make, job, kept, rebuild)

    def _make(self, job: _Job, kept: _Decode | None, rebuild: int | None = None) -> None:
        """Make ``job``'s encoding unless it is made or being made, or it was prefetched for
        ``rebuild`` and that rebuild has finished — it made the encoding itself, and forgot it as
        spare (the rebuild meets any error again and reports it)."""
        with self._jobs_lock:
            if job in self._jobs or (rebuild is not None and rebuild != self._rebuilds):
                return
            made = self._jobs[job] = Future()
        try:
            made.set_result(self._run_job(job, kept))
        except Exception as exc:
            with self._jobs_lock:
                del self._jobs[job]
            made.set_exception(exc)

    def _plan(
        self, groups: Sequence[MemoryGroup], decodes: list[tuple[str, _Decode]], cached: set[tuple[str, int]]
    ) -> list[tuple[_Job, _Decode | None]]:
        """The encodings a rebuild showing ``groups`` makes, in order, replayed on copies of the
        kept decodes and of the encodings made."""
        state = LRU(8)
        for path, d in decodes:
            state[path] = d
        seen = set(cached)
        plan: list[tuple[_Job, _Decode | None]] = []
        for scored in (s for g in groups for s in g.items):
            per_frame = max(1, scored.budget // max(1, len(scored.entry.frames)))
            for f in scored.entry.frames:
                plan += self._replay(f, quantize_pixels(per_frame), state, seen)
        return plan

    def _replay(
        self, frame: Frame, pixels: int, state: LRU, seen: set[tuple[str, int]]
    ) -> list[tuple[_Job, _Decode | None]]:
        """What :meth:`memory_uri` would encode for ``frame`` at ``pixels``, applied to copies of
        the kept decodes (``state``) and of the encodings made (``seen``)."""
        key = (frame.path, pixels)
        if key in seen:
            return []
        for path in (frame.path, frame.shown):
            if not path:
                continue
            kept: _Decode | None = state.get(path)
            if kept is None or (kept.area < pixels and kept.size != kept.full):
                try:
                    if (path, pixels) not in self._sizes:
                        self._sizes[(path, pixels)] = vp.decoded_size(path, pixels)
                except OSError:
                    continue
                size, full = self._sizes[(path, pixels)]
                state[path] = _Decode(pixels, size, full, None)
                seen.add(key)
                return [((path, pixels, pixels), None)]
            seen.add(key)
            return [((path, pixels, kept.q), kept)]
        return []


__all__ = [
    "GAMMA_GAIN",
    "LAMBDA_DECAY",
    "Frame",
    "MemoryEntry",
    "MemoryGroup",
    "MemoryNode",
    "MemoryPictures",
    "ScoredItem",
    "encode_capped",
    "energies",
    "outcomes",
    "quantize_pixels",
    "select",
]
