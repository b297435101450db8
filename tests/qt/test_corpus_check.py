"""Check… and Repair in the Corpora panel (issue 27): the app's ``corpus check [--repair]``.

Real corpora indexed with the offline MiniLM, real damage (a truncated ``base-*.faiss``, a truncated
manifest, a manifest of a newer schema), the real check on the worker pool and the real repair job
through the panel's indexer; the person's side is the row menu, the banner and its buttons.
"""

from __future__ import annotations

import html
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import index_paths

from qt.test_corpora_panel import chip, make_panel, settle
from vrag_desktop.core.corpus.watch import Place
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.corpora.corpora_panel import CorporaPanel
from vrag_desktop.qt.corpora.corpora_rows import SUB_ROLE, SUB_TONE_ROLE, TONE_ROLE
from vrag_desktop.qt.corpora.corpora_toolbar import row_menu

PAGES = [
    "Apple orchards bloom in spring; pickers arrive in September.",
    "Submarines dive deep under the polar ice with sonar.",
    "Volcanic eruptions spread ash and lava across the island.",
    "Camel caravans cross the Sahara desert at night.",
    "Penguins huddle together through the Antarctic winter.",
    "Glaciers carve fjords into the granite over millennia.",
]


@pytest.fixture
def panel(qtbot: Any, ctx: AppContext, minilm: Any) -> Any:
    ctx.embedder = lambda: minilm
    made: list[CorporaPanel] = []

    def make() -> CorporaPanel:
        p = make_panel(qtbot, ctx)
        made.append(p)
        return p

    yield make
    for p in made:
        p.shutdown(10)


def build(ctx: AppContext, minilm: Any, make_pdf: Any, tmp_path: Path, name: str) -> Path:
    """Corpus ``name``: two PDFs whose vectors sit in a compacted ``base-*.faiss``; its index folder."""
    folder = tmp_path / f"docs-{name}"
    make_pdf("first.pdf", PAGES[:3], folder=folder)
    make_pdf("second.pdf", PAGES[3:], folder=folder)
    corpus, _, _ = index_paths(ctx.library, name, [folder], minilm)
    corpus.store().compact()
    corpus.close()
    return ctx.library.corpus_dir(name) / "index"


def menu_action(panel: CorporaPanel, name: str, text: str) -> Any:
    menu = row_menu(panel, panel.corpus_item(name))
    return next(a for a in menu.actions() if a.text() == text), menu


def banner_text(panel: CorporaPanel) -> str:
    """The banner as a person reads it: one line per line, no markup."""
    text = panel.check_banner.label.text().replace("<br>", "\n")
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def search_all(ctx: AppContext, minilm: Any, name: str) -> list[tuple[str, str]]:
    """(query, best hit) for every page's own text, and every item a search can reach."""
    from vrag_desktop.core.search import SearchEngine

    engine = SearchEngine(ctx.library, [name], minilm, hybrid=False)
    try:
        assert engine.problems == []
        reached = {h.name for h in engine.search("anything at all", len(PAGES) + 4)}
        assert reached == {f"first_{i}" for i in (1, 2, 3)} | {f"second_{i}" for i in (1, 2, 3)}
        return [(q, engine.search(q, 1)[0].name) for q in PAGES]
    finally:
        engine.close()


def test_check_on_a_healthy_corpus_says_so(qtbot: Any, panel: Any, indexed: AppContext) -> None:
    p = panel()
    check, menu = menu_action(p, "robots", "Check…")
    assert menu.defaultAction() is None  # a healthy corpus: Check… is an ordinary entry
    check.trigger()
    qtbot.waitUntil(lambda: "no damage found" in banner_text(p), timeout=10000)
    assert p.check_banner.isVisible() and p.check_banner.property("role") == "banner-info"
    assert banner_text(p).startswith("Corpus 'robots': 2 items, 2 vectors — no damage found.")
    assert not p.check_banner.repair_button.isVisible()
    assert not p.is_busy()  # a check is a reader: no job, nothing written
    p.check_banner.close_button.click()
    assert not p.check_banner.isVisible()

    p.tree.setCurrentItem(p.corpus_item("robots"))  # the tool bar's Check acts on the selected corpus
    assert p.toolbar.check_button.isEnabled()
    p.toolbar.check_button.click()
    qtbot.waitUntil(lambda: "no damage found" in banner_text(p), timeout=10000)


def test_truncated_base_is_shown_damaged_and_repair_brings_every_item_back(
    qtbot: Any, panel: Any, ctx: AppContext, minilm: Any, make_pdf: Any, tmp_path: Path, reports: list[Any]
) -> None:
    index_dir = build(ctx, minilm, make_pdf, tmp_path, "c")
    clean = search_all(ctx, minilm, "c")
    base = next(f for f in index_dir.iterdir() if f.name.startswith("base-"))
    raw = base.read_bytes()
    base.write_bytes(raw[: len(raw) // 2])

    p = panel()
    ctx._cache["embedder"] = (ctx.settings.embedder, minilm)
    item = p.corpus_item("c")
    assert chip(item) == "damaged" and item.data(0, TONE_ROLE) == "error"
    assert item.data(0, SUB_TONE_ROLE) == "error" and "damaged index: " in item.data(0, SUB_ROLE)
    assert f"{base.name}: truncated" in item.data(0, SUB_ROLE)
    assert "Check…" in item.toolTip(0)
    check, menu = menu_action(p, "c", "Check…")
    assert menu.defaultAction() is check and menu.actions()[0] is check  # first, in bold
    qtbot.wait(1000)  # events processed meanwhile
    assert not p.is_busy()  # nothing starts by itself on a damaged corpus

    check.trigger()
    qtbot.waitUntil(lambda: "damaged." in banner_text(p), timeout=10000)
    text = banner_text(p)
    assert text.startswith("Corpus 'c': 6 items, 6 vectors — damaged.")
    assert f"• damaged index file {base.name}: truncated" in text and "Repair re-embeds" in text
    assert p.selected_corpus() == "c"  # the report's corpus, selected and in view
    assert p.check_banner.property("role") == "banner-error"
    assert p.check_banner.repair_button.isVisible() and p.check_banner.repair_button.isEnabled()

    with qtbot.waitSignal(p.indexer.jobEnded, timeout=60000) as ended:
        p.check_banner.repair_button.click()
    assert ended.args == ["c", "done"]
    qtbot.waitUntil(lambda: "nothing is left damaged" in banner_text(p), timeout=10000)
    text = banner_text(p)
    assert text.startswith("Repaired 'c': nothing is left damaged.")
    assert f"• mended {base.name}: truncated" in text and "its items are embedded again" in text
    assert not p.check_banner.repair_button.isVisible()
    [(level, _title, message)] = [r for r in reports if r[1] == "Corpus repaired"]
    assert level == "info" and message.startswith(f"'c': {base.name}: truncated")
    settle(qtbot, p)
    assert chip(p.corpus_item("c")) == "indexed"
    assert search_all(ctx, minilm, "c") == clean
    assert any(f.name.endswith(base.name) for f in (index_dir / "damaged").iterdir())  # kept to look at


def test_unreadable_manifest_leaves_the_other_corpora_alone_and_is_rebuilt(
    qtbot: Any, panel: Any, ctx: AppContext, minilm: Any, make_pdf: Any, tmp_path: Path, reports: list[Any]
) -> None:
    build(ctx, minilm, make_pdf, tmp_path, "good")
    build(ctx, minilm, make_pdf, tmp_path, "bad")
    manifest = ctx.library.corpus_dir("bad") / "manifest.sqlite"
    raw = manifest.read_bytes()
    manifest.write_bytes(raw[: len(raw) // 2])

    p = panel()
    ctx._cache["embedder"] = (ctx.settings.embedder, minilm)
    assert p.corpus_names() == ["bad", "good"]
    assert chip(p.corpus_item("good")) == "indexed" and p.summary("good").items == 6
    bad = p.corpus_item("bad")
    assert chip(bad) == "unreadable" and bad.data(0, TONE_ROLE) == "error"
    assert "Check…" in bad.toolTip(0)
    watch, _ = menu_action(p, "bad", "Watch folders for changes")
    assert not watch.isEnabled()  # nothing to write it to
    qtbot.waitUntil(lambda: p.watch.places() == {Place(str(tmp_path / "docs-good"), True)}, timeout=5000)

    p.check("bad")
    qtbot.waitUntil(lambda: "manifest cannot be read" in banner_text(p), timeout=10000)
    assert "Repair rebuilds it" in banner_text(p) and p.check_banner.repair_button.isVisible()
    with qtbot.waitSignal(p.indexer.jobEnded, timeout=60000) as ended:
        p.check_banner.repair_button.click()
    assert ended.args == ["bad", "done"]
    qtbot.waitUntil(lambda: "nothing is left damaged" in banner_text(p), timeout=10000)
    assert "started afresh with its 1 folder(s)" in banner_text(p)
    settle(qtbot, p)
    assert chip(p.corpus_item("bad")) == "indexed" and p.summary("bad").items == 6
    assert any(r[1] == "Corpus repaired" for r in reports)
    assert search_all(ctx, minilm, "bad") == search_all(ctx, minilm, "good")


def test_a_corpus_of_a_newer_app_is_not_offered_a_repair(
    qtbot: Any, panel: Any, ctx: AppContext, minilm: Any, make_pdf: Any, tmp_path: Path
) -> None:
    build(ctx, minilm, make_pdf, tmp_path, "new")
    manifest = ctx.library.corpus_dir("new") / "manifest.sqlite"
    db = sqlite3.connect(manifest)
    db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    before = manifest.read_bytes()
    p = panel()
    assert chip(p.corpus_item("new")) == "unreadable"
    p.check("new")
    qtbot.waitUntil(lambda: "newer VRAG Desktop" in banner_text(p), timeout=10000)
    assert banner_text(p).startswith("Corpus 'new' was made by a newer VRAG Desktop; it is not damaged.")
    assert p.check_banner.property("role") == "banner-warn"
    assert not p.check_banner.repair_button.isVisible()  # a rebuild would set the newer corpus aside
    assert manifest.read_bytes() == before
