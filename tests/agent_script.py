"""A scripted VRAG run and a scripted VimRAG run that record exactly what the model is sent.

Why: the agents' image work is optimised (parallel resizing, kept decodes and encodings), and the
model must receive the same bytes as before. Both runs use only the agents' public constructors, a
searcher and a model double, so ``bench/agent_overhead.py --tree`` can run them against an older
source tree too and compare the digests with this tree's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

#: (width, height) of the generated pages: a 200-dpi A4 render and a smaller scan, so decodes run at
#: half scale for some budgets and at full scale for others.
PAGE_SIZES = ((2000, 2800), (1240, 1754))


def make_page(path: Path, seed: int = 0, size: tuple[int, int] = PAGE_SIZES[0]) -> None:
    """A text-heavy page (realistic JPEG entropy, unlike a blank image)."""
    rng = np.random.default_rng(seed)
    w, h = size
    img = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(img)
    for y in range(h // 23, h - h // 28, 44):
        x = w // 16
        while x < w - w // 13:
            step = int(rng.integers(30, 160))
            d.rectangle([x, y, x + step, y + 22], fill=(20, 20, 20))
            x += step + int(rng.integers(12, 30))
    d.rectangle([w // 7, h // 3, w - w // 7, h // 2], outline=(0, 0, 200), width=6)
    img.save(path, quality=90)


def make_pages(folder: Path, n: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        p = folder / f"page_{i:02d}.jpg"
        if not p.exists():
            make_page(p, i, PAGE_SIZES[1 if i % 3 == 2 else 0])
        out.append(p)
    return out


class PageSearcher:
    """Three page hits per query, rotating through the pages."""

    local_files = True

    def __init__(self, pages: Sequence[Path]) -> None:
        self.pages = list(pages)
        self.calls = 0

    def search(self, query: str, k: int) -> list[Any]:
        from vrag_desktop.core.agents.searchers import SearchHit

        start, self.calls = self.calls * 3, self.calls + 1
        picked = [self.pages[(start + j) % len(self.pages)] for j in range(min(k, 3))]
        return [
            SearchHit(
                score=0.9 - 0.1 * j, name=f"{p.stem}_1", source=str(p), modality="page", image=str(p), page=1
            )
            for j, p in enumerate(picked)
        ]

    def load_image(self, path: str) -> bytes:
        return Path(path).read_bytes()


class RecordingModel:
    """Replies from a script, one per call, and the digest of every request's messages."""

    model_name = "scripted"

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies = list(replies)
        self.digests: list[str] = []

    async def chat(
        self, messages: Sequence[dict[str, Any]], *, stream: bool = True, on_delta: Any = None, **params: Any
    ) -> Any:
        from vrag_desktop.core.endpoints.base import ChatResult

        blob = json.dumps(list(messages), sort_keys=True, ensure_ascii=False).encode()
        self.digests.append(hashlib.sha256(blob).hexdigest())
        reply = self.replies[min(len(self.digests) - 1, len(self.replies) - 1)]
        if on_delta is not None:
            on_delta("content", reply)
        return ChatResult(content=reply)


def vrag_replies(searches: int = 4) -> list[str]:
    out = []
    for i in range(searches):
        out.append(f"<think>Look for part {i}.</think>\n<search>revenue part {i}</search>")
        out.append(
            f"<think>Zoom in.</think>\n<bbox>[{40 + 9 * i}, {120 + 7 * i}, {430 - 5 * i}, {350 + 3 * i}]</bbox>"
        )
        if i % 2:
            out.append("<think>Closer.</think>\n<bbox>[20, 30, 260, 200]</bbox>")
    out.append("<think>Done.</think>\n<answer>42</answer>")
    return out


def _call(name: str, arguments: dict[str, Any]) -> str:
    return f"<think>next</think>\n<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def vimrag_replies(searches: int = 8) -> list[str]:
    out = []
    for i in range(searches):
        parent = "root" if i == 0 else f"step {max(0, i - 1 - i % 3)}"
        out.append(
            _call(
                "add_search_node", {"id": f"step {i}", "parent_ids": [parent], "query": f"revenue part {i}"}
            )
        )
        memo = [
            {
                "information_id": f"Picture {j + 1}",
                "is_useful": j != 2,
                "priority_score": 1 + (i + 2 * j) % 5,
                "key_timestamp": [],
            }
            for j in range(3)
        ]
        out.append(_call("summarize_and_memorize", {"summarize": f"Part {i} found.", "memorize": memo}))
    out.append(_call("add_answer_node", {"parent_ids": [f"step {searches - 1}"], "answer": "42"}))
    return out


def _drain(stream: Any) -> list[str]:
    async def go() -> list[str]:
        return [type(ev).__name__ async for ev in stream]

    return asyncio.run(go())


def vrag_digests(pages: Sequence[Path], out: Path, searches: int = 4) -> list[str]:
    """Digests of every request of a scripted VRAG run (search, zoom, zoom again, …, answer)."""
    from vrag_desktop.core.agents.vrag import VRAGAgent

    model = RecordingModel(vrag_replies(searches))
    agent = VRAGAgent(model, PageSearcher(pages), image_dir=out, max_steps=40)
    kinds = _drain(agent.run("What was the revenue?"))
    assert kinds[-1] == "Answer", kinds
    return model.digests


def vimrag_digests(pages: Sequence[Path], out: Path, searches: int = 8) -> list[str]:
    """Digests of every request of a scripted VimRAG run (search and memorize ×n, answer): each
    request after a memorize is a rebuilt context with the energy-selected memory re-encoded."""
    from vrag_desktop.core.agents.vimrag import VimRAGAgent

    model = RecordingModel(vimrag_replies(searches))
    agent = VimRAGAgent(model, PageSearcher(pages), image_dir=out, max_steps=2 * searches + 2)
    kinds = _drain(agent.run("What was the revenue?"))
    assert kinds[-1] == "Answer", kinds
    return model.digests


__all__ = ["make_page", "make_pages", "vimrag_digests", "vrag_digests"]
