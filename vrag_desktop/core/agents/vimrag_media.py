"""What VimRAG shows the model and keeps: tool responses, the model's memory judgements, the context.

Split from :mod:`.vimrag` (the run's control flow): this is the run's content. Every retrieved
picture or key frame is fitted to its pixel limit and capped in bytes for the tool response, the
model's summarize_and_memorize judgements decide which of them become memory, and every step's
context re-encodes the energy-selected memory at its budget. The exact
bytes matter (the model was trained on this sizing), and so does the time (the rebuild runs between
two model calls): encodings are kept per run by (file, budget on a ~19 % geometric grid), decodes
per run and, across runs, by :mod:`.imaging`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrag_desktop.core.agents import imaging
from vrag_desktop.core.agents import vimrag_prompts as P
from vrag_desktop.core.agents import vrag_protocol as vp
from vrag_desktop.core.agents.events import HitRef
from vrag_desktop.core.agents.imaging import encode_capped
from vrag_desktop.core.agents.memory_energy import MemoryPictures, quantize_pixels
from vrag_desktop.core.agents.memory_graph import Frame, MemoryEntry, MemoryGraph, ScoredItem, normalize_label
from vrag_desktop.core.agents.model_turn import ModelTurns
from vrag_desktop.core.agents.searchers import SearchFailed, SearchHit

log = logging.getLogger(__name__)

_MODALITY = {"text": "text", "page": "image", "image": "image", "clip": "video"}
_LABEL = {"text": "Text", "image": "Picture", "video": "Video"}
_ORDER = ("text", "image", "video")
#: Most key frames looked up per clip (the corpus writes 4).
_MAX_KEYFRAME_FILES = 64


# ---------------------------------------------------------------- pure helpers


def keyframe_times(t_start: float, t_end: float, n: int) -> list[float]:
    """Times of ``n`` key frames spread evenly over ``[t_start, t_end]`` (see the module docstring)."""
    if n <= 0:
        return []
    if n == 1 or t_end <= t_start:
        return [round(t_start, 3)] * n
    return [round(t_start + j * (t_end - t_start) / (n - 1), 3) for j in range(n)]


def thin_indices(n: int, keep: int) -> list[int]:
    """``keep`` indices of ``range(n)`` evenly spread, first and last included (``linspace``)."""
    if keep >= n:
        return list(range(n))
    if keep <= 1:
        return [0]
    return sorted({round(j * (n - 1) / (keep - 1)) for j in range(keep)})


def image_part(uri: str) -> dict[str, Any]:
    """A standard OpenAI image part: the URL only, no non-standard ``max_pixels`` key (§9)."""
    return {"type": "image_url", "image_url": {"url": uri}}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


# ---------------------------------------------------------------- what a search showed


@dataclass
class _Shown:
    """One retrieved item as the model saw it in the pending search's tool response."""

    label: str
    hit: SearchHit
    modality: str  # text | image | video
    frames: list[Frame] = field(default_factory=list)  # path = local full-size file, shown = JPEG sent


@dataclass
class _Prepared:
    parts: list[dict[str, Any]]
    items: dict[str, _Shown]
    refs: tuple[HitRef, ...]
    shown: tuple[int, ...]
    problems: list[str]


@dataclass
class _Pending:
    """The search waiting for its summarize_and_memorize."""

    node_id: str
    items: dict[str, _Shown]  # by label


class Media(MemoryPictures, ModelTurns):
    """The pixel side of a VimRAG run's state. Needs ``self.graph`` and the two
    per-run caches set by :meth:`init_media`."""

    graph: MemoryGraph

    def init_media(self) -> None:
        self.init_memory_pictures()

    # ------------------------------------------------------------ context
    def build_context(self) -> list[dict[str, Any]]:
        """(Worker thread.) ``[system, user]`` from the graph and the energy-selected memory."""
        text = P.build_user_prompt(self.question, self.graph.action_graph_json())
        groups = self.graph.select_memory(self.a.memory_top_k, self.a.memory_buffer_pixels)
        self.prefetch(groups)
        parts: list[dict[str, Any]] = [text_part(text + ("\n\n" + P.MEMORY_HEADER if groups else ""))]
        for group in groups:
            parts.append(text_part(f"Node: {group.node_id}\n"))
            for scored in group.items:
                parts += self.memory_parts(scored)
        self.forget_spare_encodings()
        return [{"role": "system", "content": P.SYSTEM_PROMPT}, {"role": "user", "content": parts}]

    def memory_parts(self, scored: ScoredItem) -> list[dict[str, Any]]:
        """An item re-encoded at its budget; a video's frames share it, each after ``<t seconds>``."""
        frames = scored.entry.frames
        per_frame = max(1, scored.budget // max(1, len(frames)))
        parts: list[dict[str, Any]] = []
        for f in frames:
            if scored.entry.modality == "video" and f.timestamp is not None:
                parts.append(text_part(f"<{f.timestamp:.1f} seconds>"))
            uri = self.memory_uri(f, per_frame)
            if uri is None:
                if parts and parts[-1]["type"] == "text":
                    parts.pop()  # no timestamp label without its frame
                continue
            parts.append(image_part(uri))
        return parts

    # ------------------------------------------------------------ tool responses
    def prepare(self, hits: list[SearchHit], notes: Sequence[str] = ()) -> _Prepared:
        """(Worker thread.) The tool response: items ordered text, image, video, labelled per modality;
        images written to ``image_dir`` exactly as sent. Unreadable items are skipped and reported."""
        if not hits:
            parts = [
                text_part("<tool_response>\nNo information was retrieved for this query.\n</tool_response>")
            ]
            return _Prepared(parts, {}, (), (), [])
        parts = [text_part("<tool_response>\nHere are the retrieved information:")]
        items: dict[str, _Shown] = {}
        labels: dict[int, str] = {}
        problems: list[str] = []
        counters = dict.fromkeys(_ORDER, 0)
        order = sorted(range(len(hits)), key=lambda i: _ORDER.index(_MODALITY.get(hits[i].modality, "text")))
        for i in order:
            hit = hits[i]
            modality = _MODALITY.get(hit.modality, "text")
            label = f"{_LABEL[modality]} {counters[modality] + 1}"
            try:
                item_parts, frames = self.render(hit, modality, label, problems)
            except Exception as exc:  # an unreadable image or file: the others still go to the model
                problems.append(f"cannot show '{hit.name}' to the model: {exc}")
                continue
            counters[modality] += 1
            labels[i] = label
            items[label] = _Shown(label, hit, modality, frames)
            parts += item_parts
        for note in notes:
            parts.append(text_part(f"\nNote: {note}."))
        parts.append(text_part("\n</tool_response>"))
        refs = tuple(h.labelled(labels.get(i, "")) for i, h in enumerate(hits))
        return _Prepared(parts, items, refs, tuple(sorted(labels)), problems)

    def render(
        self, hit: SearchHit, modality: str, label: str, problems: list[str]
    ) -> tuple[list[dict[str, Any]], list[Frame]]:
        """Parts for one item and the frames behind them (``problems`` gets what went wrong but
        did not stop the item from being shown)."""
        slug = label.lower().replace(" ", "")
        if modality == "text":
            data = self.a.searcher.load_image(hit.source)
            text = data.decode("utf-8", errors="replace").strip()
            if len(text) > self.a.max_text_chars:
                text = text[: self.a.max_text_chars] + " […]"
            return [text_part(f"\n{label}: {text}")], []
        if modality == "image":
            if not hit.image:
                raise SearchFailed("the hit has no image")
            frame, uri = self.show(hit.image, self.a.max_pixels_image, slug)
            return [text_part(f"\n{label}:"), image_part(uri)], [frame]
        parts = [text_part(f"\n{label}:")]
        frames: list[Frame] = []
        shots = self.clip_frames(hit, slug, label, problems)
        pixels = max(1, self.a.max_pixels_video // len(shots))  # the frames share the video's budget
        for k, (t, path) in enumerate(shots):
            frame, uri = self.show(path, pixels, f"{slug}-f{k + 1}", timestamp=t)
            frames.append(frame)
            parts += [text_part(f"<{t:.1f} seconds>"), image_part(uri)]
        return parts, frames

    def local_file(self, path: str, what: str) -> str:
        """A local path for a hit's file: as is when the searcher's files are local, else a copy."""
        if getattr(self.a.searcher, "local_files", True) and Path(path).is_file():
            return path
        data = self.a.searcher.load_image(path)
        local = self.out_path(f"{what}-raw", Path(path).suffix or ".img")
        local.write_bytes(data)
        return str(local)

    def show(
        self, path: str, max_pixels: int, what: str, timestamp: float | None = None
    ) -> tuple[Frame, str]:
        """Fit an image to ``max_pixels``, cap its bytes, write the JPEG sent; (frame, data URI)."""
        raw = self.local_file(path, what)
        im, _ = vp.open_for_pixels(raw, max_pixels)
        data, _ = encode_capped(im, max_pixels, self.a.max_image_bytes, self.a.jpeg_quality)
        out = self.out_path(what)
        out.write_bytes(data)
        return Frame(path=raw, shown=str(out), timestamp=timestamp), vp.data_uri(data)

    def clip_frames(
        self, hit: SearchHit, slug: str, label: str, problems: list[str]
    ) -> list[tuple[float, str]]:
        """(seconds from the clip's start, local picture) of the frames to show for a clip: sampled
        from its video as the original does; when the video cannot be read, the key frames the
        corpus wrote (with a note in ``problems``), or else its contact sheet."""
        try:
            return self.sampled_frames(hit, slug)
        except OSError as exc:
            problems.append(
                f"{label}: the clip's video cannot be read ({exc}); its pre-extracted key frames are shown instead"
            )
        if not hit.image:
            raise SearchFailed("the clip has no video and no image")
        t0 = float(hit.t_start or 0.0)
        t1 = float(hit.t_end if hit.t_end is not None else t0)
        stem = hit.image.rsplit(".", 1)[0]
        local = getattr(self.a.searcher, "local_files", True) and Path(hit.image).is_file()
        paths: list[str] = []
        for n in range(1, _MAX_KEYFRAME_FILES + 1):
            p = f"{stem}_f{n}.jpg"
            if local:
                if not Path(p).is_file():
                    break
                paths.append(p)
            else:
                try:
                    paths.append(self.local_file(p, f"{slug}-k{n}"))
                except Exception:
                    break
        if not paths:  # no key frames reachable: the contact sheet stands for the clip
            return [(0.0, hit.image)]
        times = keyframe_times(0.0, t1 - t0, len(paths))
        keep = min(len(paths), self.a.max_frames_video, max(1, math.floor((t1 - t0) * self.a.fps_video)))
        return [(times[i], paths[i]) for i in thin_indices(len(paths), keep)]

    def sampled_frames(self, hit: SearchHit, slug: str) -> list[tuple[float, str]]:
        """The clip's frames sampled from its video (:func:`.imaging.sample_video`), each written
        at full size as the file memory re-encodes it from; times to 0.1 s, as the model reads them
        and as its key_timestamp values are matched. Raises OSError when the video is unreadable."""
        video, span = self.clip_video(hit, slug)
        shots = imaging.sample_video(video, self.a.fps_video, self.a.max_frames_video, span)
        out = []
        for k, (t, im) in enumerate(shots):
            raw = self.out_path(f"{slug}-f{k + 1}-raw")
            im.save(raw, format="JPEG", quality=95)
            out.append((round(t, 1), str(raw)))
        return out

    def clip_video(self, hit: SearchHit, slug: str) -> tuple[str, tuple[float, float] | None]:
        """(local video file, span in seconds or None for the whole file). A clip's own file
        (``media`` other than the source) is the clip; the source video is cut to the clip's
        span. A search server's clip file is fetched; a whole source video is not."""
        clip_file = bool(hit.media) and hit.media != hit.source
        video = hit.media or hit.source
        span = None if clip_file or hit.t_end is None else (float(hit.t_start or 0.0), float(hit.t_end))
        if not video:
            raise OSError("the hit names no video file")
        if getattr(self.a.searcher, "local_files", True):
            return video, span
        if not clip_file:
            raise OSError("the source video is on the search server's machine, which sends clips only")
        try:
            data = self.a.searcher.load_image(video)
        except Exception as exc:
            raise OSError(f"the search server did not send the clip ({exc})") from exc
        local = self.out_path(f"{slug}-video", Path(video).suffix or ".mp4")
        local.write_bytes(data)
        return str(local), span

    # ------------------------------------------------------------ memorize
    def speculate_pending(self, pending: _Pending) -> None:
        """Start encoding what the context after ``pending``'s judgement will likely show."""
        self.speculate(
            pending.node_id,
            [
                MemoryEntry(label, shown.modality, 3, list(shown.frames))
                for label, shown in pending.items.items()
                if shown.modality != "text" and shown.frames
            ],
        )

    def judge(
        self, pending: _Pending, memorize: list[dict[str, Any]]
    ) -> tuple[list[MemoryEntry], list[tuple[str, bool, int]], list[str]]:
        """The model's judgements applied: (memory entries kept, (label, useful, priority) per judged
        item, problems to report). Kept: useful pictures, and useful videos' frames whose time matches
        a key_timestamp; texts never (their content lives on in the summary)."""
        self.stop_speculating()
        entries: list[MemoryEntry] = []
        judged: list[tuple[str, bool, int]] = []
        problems: list[str] = []
        for m in memorize:
            label = normalize_label(m["information_id"])
            if label is None or label not in pending.items:
                have = ", ".join(pending.items) or "none"
                problems.append(
                    f'"{m["information_id"]}" is not an item of this search (items: {have}); ignored'
                )
                continue
            if any(j[0] == label for j in judged):
                problems.append(f"{label} was judged twice; the first judgement is used")
                continue
            useful, priority = bool(m["is_useful"]), int(m["priority_score"])
            judged.append((label, useful, priority))
            shown = pending.items[label]
            if not useful or shown.modality == "text" or not shown.frames:
                continue
            frames = shown.frames
            if shown.modality == "video":
                frames, note = self.key_frames(label, shown.frames, m["key_timestamp"])
                if note:
                    problems.append(note)
            hit = shown.hit
            entries.append(
                MemoryEntry(
                    information_id=label,
                    modality=shown.modality,
                    priority=priority,
                    frames=list(frames),
                    source=hit.source,
                    name=hit.name,
                    page=hit.page,
                    clip=hit.clip,
                )
            )
        missing = [label for label in pending.items if all(j[0] != label for j in judged)]
        if missing:
            problems.append(
                f"not judged: {', '.join(missing)} (every returned item must be listed in memorize); "
                "treated as not useful"
            )
        return entries, judged, problems

    def key_frames(self, label: str, frames: list[Frame], stamps: list[float]) -> tuple[list[Frame], str]:
        """Frames matching the key timestamps (nearest shown frame within the tolerance), and a note
        naming the timestamps that matched none. No match at all keeps every frame: the model called
        the video useful, and an empty memory would lose it."""
        times = [f.timestamp if f.timestamp is not None else 0.0 for f in frames]
        keep: set[int] = set()
        dropped: list[float] = []
        for ts in stamps:
            best = min(range(len(times)), key=lambda i: abs(times[i] - ts))
            if abs(times[best] - ts) <= self.a.timestamp_tolerance:
                keep.add(best)
            else:
                dropped.append(ts)
        shown = ", ".join(f"{t:.1f}" for t in times)
        notes = []
        if dropped:
            notes.append(
                f"{label}: key_timestamp {', '.join(f'{t:g}' for t in dropped)} s match no frame shown "
                f"(frames at {shown} s, tolerance {self.a.timestamp_tolerance:g} s); dropped"
            )
        if not keep:
            notes.append(f"{label}: no key_timestamp matched a shown frame; all {len(frames)} frames kept")
            return list(frames), "; ".join(notes)
        return [frames[i] for i in sorted(keep)], "; ".join(notes)


__all__ = [
    "Media",
    "encode_capped",
    "image_part",
    "keyframe_times",
    "quantize_pixels",
    "text_part",
    "thin_indices",
]
