"""The transcript drawn as rich text: the view of :class:`~vrag_desktop.core.run.transcript.Transcript`.

Why its own class: ``setHtml`` parses and lays out the whole document again, about 25 ms for a
twelve-step run on a quiet core and twice that when indexing takes the other core, ten times a
second while a reply streams. Most renders only add text to the block being streamed, so the view
keeps the HTML it last drew, block by block, and when nothing but that block's visible text grew it
appends the new text to the end of the document (about 1 ms). Anything else (a new block, a fold, a
theme) draws the whole document again, as before.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QTextBrowser, QWidget

from vrag_desktop.core.run.transcript import (
    ANSWER,
    CROP,
    ERROR,
    IMAGE,
    MEMORY,
    OUTPUT,
    REGION,
    RESULTS,
    SEARCH,
    STEP,
    THINK,
    Block,
    Transcript,
    evidence_label,
    hit_where,
)
from vrag_desktop.qt.infra.theme import colors as theme_colors
from vrag_desktop.qt.infra.theme import theme_notifier

PREVIEW_CHARS = 160


@dataclass(frozen=True)
class _Colors:
    muted: str
    accent: str
    ok: str
    warn: str
    err: str
    card: str

    @classmethod
    def of_theme(cls) -> _Colors:
        """The theme's named colours (the transcript is HTML: it names them when it is drawn)."""
        c = {k: v.name() for k, v in theme_colors().items()}
        return cls(c["muted"], c["accent"], c["ok"], c["warn"], c["error"], c["card"])


def shown_text(text: str) -> str:
    """What Qt's HTML reader keeps of a ``pre`` / ``pre-wrap`` paragraph's text: it drops one leading
    and one trailing line break."""
    text = text.removeprefix("\n")
    return text.removesuffix("\n")


class TranscriptView(QTextBrowser):
    """Draws a transcript; ``running`` keeps the streamed block open and the view at the bottom.

    Blocks fold: finished thinking shows a one-line preview and raw model output a one-line summary;
    the person opens or closes any of them (:meth:`toggle`)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setPlaceholderText("")
        self.document().setUndoRedoEnabled(False)  # appends would otherwise pile up undo steps
        self.transcript = Transcript()
        self.question = ""
        self.running = False
        self.expanded: set[int] = set()  # blocks the person opened
        self.collapsed: set[int] = set()  # ... or closed (the live one starts open)
        self._drawn: list[str] | None = None  # the HTML drawn: the head, then one piece per block
        self._live: tuple[int, str] | None = None  # (block id, its text when drawn) of an open text block
        self.appends = 0  # renders that only appended text (for tests and benchmarks)
        theme_notifier().changed.connect(self._on_theme)

    def _on_theme(self, _theme: str) -> None:
        """Draw again in the new theme's colours (the HTML names them)."""
        if self._drawn is not None:
            self.draw()

    def reset(self, question: str = "") -> None:
        """An empty transcript for ``question``; every fold forgotten."""
        self.transcript = Transcript()
        self.question = question
        self.expanded.clear()
        self.collapsed.clear()

    # ---- folding
    def is_open(self, b: Block) -> bool:
        if b.id in self.expanded:
            return True
        if b.id in self.collapsed:
            return False
        return self._is_live(b)  # the block being streamed right now stays open; finished ones fold

    def _is_live(self, b: Block) -> bool:
        return self.running and bool(self.transcript.blocks) and self.transcript.blocks[-1].id == b.id

    def toggle(self, block_id: int) -> None:
        block = self.transcript.blocks[block_id]
        if self._text_shown(block):  # what the person sees decides (live raw output is drawn folded)
            self.expanded.discard(block_id)
            self.collapsed.add(block_id)
        else:
            self.collapsed.discard(block_id)
            self.expanded.add(block_id)
        self.draw()

    # ---- drawing
    def draw(self) -> None:
        """Draw the transcript: append the streamed text when that is all that changed, else the
        whole document (keeping the scroll position, or the bottom while running)."""
        colors, pieces = self._pieces()
        if pieces == self._drawn:
            return
        bar = self.verticalScrollBar()
        at_bottom = bar.value() >= bar.maximum() - 4
        scroll = bar.value()
        if not self._append(pieces, colors):
            self.setHtml(_document(pieces))
        self._drawn = pieces
        self._live = self._live_text()
        bar.setValue(bar.maximum() if (at_bottom and self.running) else scroll)

    def _live_text(self) -> tuple[int, str] | None:
        """The last block, when it is a text block drawn open (its text ends the document)."""
        blocks = self.transcript.blocks
        if not blocks or blocks[-1].kind not in (THINK, OUTPUT) or not self._text_shown(blocks[-1]):
            return None
        return blocks[-1].id, blocks[-1].text

    def _text_shown(self, b: Block) -> bool:
        return self.is_open(b) and (b.kind == THINK or b.id in self.expanded)

    def _append(self, pieces: list[str], colors: _Colors) -> bool:
        """Append the streamed block's new text if nothing else changed; False: draw it all."""
        drawn, live = self._drawn, self._live
        if drawn is None or live is None or len(pieces) != len(drawn) or pieces[:-1] != drawn[:-1]:
            return False
        b = self.transcript.blocks[-1]
        if b.id != live[0] or not b.text.startswith(live[1]) or not self._text_shown(b):
            return False
        if self._block_html(b, colors, text=live[1]) != drawn[-1]:  # more than the text changed
            return False
        old, new = shown_text(live[1]), shown_text(b.text)
        if not old or not new.startswith(old):  # nothing drawn to append to
            return False
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        first, *lines = new[len(old) :].split("\n")
        cursor.insertText(first)
        for line in lines:  # a new paragraph per line, spaced as the HTML reader spaces them
            fmt = cursor.blockFormat()
            bottom = fmt.bottomMargin()
            fmt.setBottomMargin(0)
            cursor.setBlockFormat(fmt)
            fmt.setTopMargin(0)
            fmt.setBottomMargin(bottom)
            cursor.insertBlock(fmt)
            cursor.insertText(line)
        self.appends += 1
        return True

    def to_html(self) -> str:
        """The whole transcript as HTML (what a full render draws)."""
        return _document(self._pieces()[1])

    def _pieces(self) -> tuple[_Colors, list[str]]:
        """The theme's colours, and the HTML of the head then of each block."""
        colors = _Colors.of_theme()
        return colors, [self._head(colors)] + [self._block_html(b, colors) for b in self.transcript.blocks]

    def _head(self, c: _Colors) -> str:
        if self.question:
            return f"<p style='font-size:12pt'><b>{_esc(self.question)}</b></p>"
        if self.transcript.blocks:
            return ""
        return (
            f"<p style='color:{c.muted}'>Ask a question about your corpora. The agent's reasoning appears "
            "here as it happens: its thinking, each search with the items it found and their scores, "
            "the regions it zooms into, what it memorizes, and the answer with the pages it rests on."
            "</p>"
            f"<p style='color:{c.muted}'>To see one before any model is set up: "
            "<a href='example:vrag'>open a recorded example run</a> (VRAG: search, crop, answer) or "
            "<a href='example:vimrag'>the VimRAG example</a> (a memory graph), recorded on the sample "
            "corpus.</p>"
        )

    def _block_html(self, b: Block, c: _Colors, text: str | None = None) -> str:
        """One block's HTML; ``text`` stands in for the block's text (to compare with what was drawn).
        A block still streaming shows no character count: it would change with every piece (raw
        output streams folded next to the thinking being appended)."""
        text = b.text if text is None else text
        count = "" if self.running and self.transcript.streaming(b.id) else f" ({len(text)} chars)"
        if b.kind == STEP:
            secs = f" · {b.seconds:.1f} s" if b.seconds else ""
            return f"<p style='color:{c.muted}; margin-top:10px'>── {_esc(text)}{secs} ──</p>"
        if b.kind == OUTPUT:  # the raw text with its tags: the actions are drawn below, so one quiet line
            link = f"<a href='toggle:{b.id}' style='color:{c.muted}'>"
            if self._text_shown(b):
                return (
                    f"<p style='color:{c.muted}; font-size:9pt'>{link}▾ raw model output</a></p>"
                    f"<pre style='color:{c.muted}; margin-left:14px'>{_esc(text)}</pre>"
                )
            return f"<p style='color:{c.muted}; font-size:9pt'>{link}▸ raw model output</a>{count}</p>"
        if b.kind == THINK:
            link = f"<a href='toggle:{b.id}' style='color:{c.muted}'>"
            if self.is_open(b):
                return (
                    f"<p style='color:{c.muted}'>{link}▾ Thinking</a>{count}</p>"
                    f"<p style='color:{c.muted}; white-space:pre-wrap; margin-left:14px'>{_esc(text)}</p>"
                )
            flat = " ".join(text.split())
            preview = _esc(flat[:PREVIEW_CHARS]) + ("…" if len(flat) > PREVIEW_CHARS else "")
            return f"<p style='color:{c.muted}'>{link}▸ Thinking</a> <i>{preview}</i></p>"
        return _action_html(b, text, c)


def _action_html(b: Block, text: str, c: _Colors) -> str:
    """The HTML of a block that is not streamed text: a search, its results, an image, a region, a
    crop, a memory, an error, the answer."""
    if b.kind == SEARCH:
        node = f" <span style='color:{c.muted}'>(node {_esc(b.data)})</span>" if b.data else ""
        return f"<p style='color:{c.accent}'><b>Search</b> · {_esc(text)}{node}</p>"
    if b.kind == RESULTS:
        hits, shown = b.data
        if not hits:
            return f"<p style='color:{c.warn}; margin-left:14px'>no results</p>"
        # One line a hit, its mark and score in a monospace column: a table would double the
        # document's layout time, and every render lays the whole document out.
        rows = []
        for i, h in enumerate(hits):
            mark = "→" if i in shown else "&nbsp;"
            note = " · ".join(x for x in (h.label, h.also_in_text(paths=False)) if x)
            label = f" <span style='color:{c.muted}'>{_esc(note)}</span>" if note else ""
            rows.append(
                f"<p style='margin:0 0 0 14px'><span style='font-family:monospace'>{mark} {h.score_text}</span>"
                f"&nbsp; {_esc(hit_where(h))}{label}</p>"
            )
        return "".join(rows)
    if b.kind == IMAGE:
        return f"<p style='margin-left:14px; color:{c.muted}'>shown to the model: {_esc(text)}</p>"
    if b.kind == REGION:
        return f"<p><b>Zoom into</b> <span style='font-family:monospace'>{_esc(text)}</span></p>"
    if b.kind == CROP:
        return f"<p style='margin-left:14px'>✂ crop {_esc(text)}</p>"
    if b.kind == MEMORY:
        items = getattr(b.data, "items", ())
        lines = "".join(
            f"<li>{_esc(it.information_id)} · priority {it.priority}"
            + (f" · energy {it.energy:.2f}" if it.energy else "")
            + ("" if it.useful else " · <i>not useful</i>")
            + "</li>"
            for it in items
        )
        return f"<p style='color:{c.warn}'><b>Memorized</b> · {_esc(text)}</p>" + (
            f"<ul style='margin-top:0'>{lines}</ul>" if lines else ""
        )
    if b.kind == ERROR:
        return f"<p style='color:{c.err}'>⚠ {_esc(text)}</p>"
    if b.kind == ANSWER:
        ans = b.data
        ev_links = "".join(
            f"<li><a href='evidence:{i}' style='color:{c.accent}'>{_breakable(evidence_label(e))}</a></li>"
            for i, e in enumerate(ans.evidence)
        )
        head = "Answer (forced at the step limit)" if ans.forced else "Answer"
        body = (
            f"<table width='100%' cellpadding='8' style='background:{c.card}; margin-top:8px'><tr><td>"
            f"<p style='color:{c.ok}'><b>✓ {head}</b></p><p style='font-size:12pt'>{_esc(text)}</p>"
        )
        if ev_links:
            body += f"<p style='color:{c.muted}'>Evidence (click to open):</p><ul>{ev_links}</ul>"
        return body + "</td></tr></table>"
    return ""


def _document(pieces: list[str]) -> str:
    return "<html><body style='font-size:10.5pt'>" + "".join(pieces) + "</body></html>"


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _breakable(text: str) -> str:
    """``text`` escaped, with a zero-width break after each underscore: a file name such as
    ``northwind_annual_report_2024.pdf`` has no other place to wrap, and in a narrow column (the Ask
    panel at 1280×800) Qt then cut it mid-word ("…2024.pd" / "f p. 2")."""
    return _esc(text).replace("_", "_\u200b")


__all__ = ["PREVIEW_CHARS", "TranscriptView", "shown_text"]
