"""The recorded example runs: shipped portable (no path of the machine that made them), opened in
one click from the empty Ask panel into the transcript, graph and evidence views, labelled as an
example, and never listed or exported as the person's own run."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from PySide6.QtCore import QUrl

from vrag_desktop.core.agents.events import Answer, Crop, ImageShown, Memorize
from vrag_desktop.core.example_runs import LABEL, PATH_KEYS, example_events, examples_dir, list_examples
from vrag_desktop.core.paths import sample_corpus_dir
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.main_window import MainWindow

SHIPPED = ROOT / "resources" / "example_runs"


def _paths(data: Any) -> list[str]:
    if isinstance(data, dict):
        return [v for k, v in data.items() if k in PATH_KEYS and isinstance(v, str) and v] + [
            p for v in data.values() for p in _paths(v)
        ]
    return [p for v in data for p in _paths(v)] if isinstance(data, list) else []


@pytest.mark.parametrize("key", ["vrag", "vimrag"])
def test_the_shipped_examples_hold_no_path_of_the_machine_that_made_them(key: str) -> None:
    folder = SHIPPED / key
    text = (folder / "events.jsonl").read_text(encoding="utf-8") + (folder / "run.json").read_text(
        encoding="utf-8"
    )
    assert not re.search(r"/(?:tmp|root|home|Users|work)/", text)
    events = (folder / "events.jsonl").read_text(encoding="utf-8").splitlines()
    paths = [p for line in events for p in _paths(json.loads(line))]
    assert paths and all(not Path(p).is_absolute() for p in paths)
    for p in paths:  # each is the example's own image or a file of the sample corpus next to it
        resolved = (folder / p).resolve()
        assert resolved.is_file(), p
        assert resolved.is_relative_to(folder.resolve()) or resolved.is_relative_to(
            (SHIPPED.parent / "sample_corpus").resolve()
        )
    meta = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    assert meta["status"] == "answered" and "scripted" in meta["example"]["note"]
    assert "base_url" not in meta["settings"]
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    assert size < 1_000_000  # they ship in the wheel and the frozen app
    assert all(f.suffix == ".jpg" for f in (folder / "images").iterdir())


def test_the_examples_resolve_where_the_app_is_installed() -> None:
    assert examples_dir() == SHIPPED and sample_corpus_dir() == SHIPPED.parent / "sample_corpus"
    vrag, vimrag = list_examples()
    assert (vrag.key, vimrag.key) == ("vrag", "vimrag") and (vrag.summary.agent, vimrag.summary.agent) == (
        "vrag",
        "vimrag",
    )
    events = example_events(vrag)
    shown = [e for e in events if isinstance(e, ImageShown)]
    crops = [e for e in events if isinstance(e, Crop)]
    assert shown and len(crops) == 2
    report = SHIPPED.parent / "sample_corpus" / "pdf" / "northwind_annual_report_2024.pdf"
    assert Path(shown[0].source) == report.resolve() and Path(shown[0].raw).is_file()
    assert all(Path(c.raw) == Path(shown[0].raw) and Path(c.image).is_file() for c in crops)
    answer = next(e for e in events if isinstance(e, Answer))
    assert "168.4" in answer.content and not answer.forced
    memorized = [e for e in example_events(vimrag) if isinstance(e, Memorize)]
    assert len(memorized) == 2 and all(Path(i.image).is_file() for m in memorized for i in m.items if i.image)


def test_the_script_makes_a_saved_run_portable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/make_example_runs.py's rewriting: the run's images and the data directory's page
    renders are copied as JPEGs into images/, corpus files become relative, derived clips are left out."""
    from PIL import Image

    sys.path.insert(0, str(ROOT / "scripts"))
    import make_example_runs as mk

    sample = tmp_path / "resources" / "sample_corpus"
    (sample / "pdf").mkdir(parents=True)
    (sample / "pdf" / "report.pdf").write_bytes(b"%PDF-1.4")
    monkeypatch.setattr(mk, "SAMPLE", sample)
    run = tmp_path / "data" / "runs" / "20260101-000000-abcdef"
    (run / "images").mkdir(parents=True)
    derived = tmp_path / "data" / "corpora" / "sample" / "derived" / "9"
    derived.mkdir(parents=True)
    Image.new("RGB", (120, 160), "white").save(run / "images" / "x-01-page.jpg")
    Image.new("RGB", (600, 800), "white").save(derived / "report_2.jpg")
    (derived / "clip_1.mp4").write_bytes(b"\0" * 10)
    source = str(sample / "pdf" / "report.pdf")
    hits = [
        {"source": source, "image": str(derived / "report_2.jpg"), "media": None},
        {"source": source, "image": str(derived / "report_2.jpg"), "media": str(derived / "clip_1.mp4")},
    ]
    events = [
        {"event": "search_results", "step": 1, "hits": hits},
        {
            "event": "search_image",
            "step": 1,
            "image": str(run / "images" / "x-01-page.jpg"),
            "raw": hits[0]["image"],
        },
    ]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (run / "run.json").write_text(
        json.dumps({"id": run.name, "model": "m", "settings": {"base_url": "http://x"}})
    )
    out = tmp_path / "resources" / "example_runs" / "vrag"  # next to the sample corpus, as shipped
    mk.make_portable("vrag", run, out, [str(tmp_path / "data")])
    lines = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert lines[0]["hits"][0] == {
        "source": "../../sample_corpus/pdf/report.pdf",
        "image": "images/corpus-9-report_2.jpg",
        "media": None,
    }
    assert lines[0]["hits"][1]["media"] is None  # the derived clip is not shipped
    assert lines[1]["image"] == "images/x-01-page.jpg" and lines[1]["raw"] == "images/corpus-9-report_2.jpg"
    with Image.open(out / "images" / "corpus-9-report_2.jpg") as im:
        assert im.size == (600, 800) and im.format == "JPEG"  # regions are in these pixels
    meta = json.loads((out / "run.json").read_text())
    assert meta["id"] == "example-vrag" and "base_url" not in meta["settings"]
    assert meta["example"]["title"] and "scripted" in meta["example"]["note"]
    gone = tmp_path / "data" / "runs" / "20260101-000000-abcdef" / "images" / "x-01-page.jpg"
    gone.unlink()
    with pytest.raises(SystemExit, match="not there"):  # a run naming a file that is gone is refused
        mk.make_portable("vrag", run, out, [str(tmp_path / "data")])


def test_one_click_opens_both_examples_in_the_graph_and_evidence_views(qtbot: Any, ctx: AppContext) -> None:
    w = MainWindow(ctx, first_run=False)
    qtbot.addWidget(w)
    w.resize(1600, 1000)
    w.show()
    assert "open a recorded example run" in w.ask.view.toPlainText()  # the empty Ask panel offers it
    w.ask.view.anchorClicked.emit(QUrl("example:vrag"))  # the click on that link
    qtbot.waitUntil(
        lambda: w.guide.example_bar.isVisible() and bool(w.graph_scene.node_items()), timeout=5000
    )
    bar = w.guide.example_bar
    assert (
        LABEL in bar.text() and "Scripted model replies" in bar.text() and "VRAG on the sample" in bar.text()
    )
    assert "not one of your runs" in bar.text()
    kinds = sorted(n.info.kind for n in w.graph_scene.node_items())
    assert "search" in kinds and kinds.count("crop") == 2 and "answer" in kinds
    assert "168.4" in w.ask.view.toPlainText()
    assert w.ask.status_label.text().startswith("Example (recorded)")
    qtbot.waitUntil(
        lambda: w.evidence.current_page() is not None and w.evidence.loaded is not None, timeout=10_000
    )
    page = w.evidence.current_page()
    assert page is not None and len(page.regions) == 2 and page.page == 2
    assert w.evidence.page_view.pixmap_item is not None  # the page is drawn
    qtbot.waitUntil(
        lambda: all(c.image.pixmap is not None for c in w.evidence.cards.values()), timeout=10_000
    )
    assert len(w.evidence.cards) == 2  # both crops, cut from the page
    assert w.graph_dock.isVisible() and w.evidence_dock.isVisible()

    bar.buttons["vimrag"].click()  # the other example, from the bar
    qtbot.waitUntil(lambda: bar.key == "vimrag", timeout=5000)
    qtbot.waitUntil(lambda: len(w.graph_scene.node_items()) >= 4, timeout=5000)
    nodes = {n.node_id: n.info.kind for n in w.graph_scene.node_items()}
    assert nodes["root"] == "root" and nodes["answer"] == "answer"
    assert [k for k in nodes.values()].count("search") == 2
    qtbot.waitUntil(
        lambda: w.evidence.current_page() is not None and w.evidence.loaded is not None, timeout=10_000
    )
    assert w.evidence.board.pages and w.evidence.page_view.pixmap_item is not None
    assert "450 kg" in w.ask.view.toPlainText() and w.ask.agent_combo.currentData() == "vimrag"

    # never one of the person's runs: not in History, nothing under the data directory
    w.history.refresh()
    qtbot.wait(200)
    assert ctx.runs.list() == [] and w.history.selected_run_ids() in (None, [])
    assert not (ctx.layout.runs.exists() and any(ctx.layout.runs.iterdir()))

    bar.close_button.click()
    assert not bar.isVisible() and not w.graph_scene.node_items() and w.evidence.current_page() is None


def test_the_chooser_and_the_help_menu_open_the_examples(
    qtbot: Any, ctx: AppContext, monkeypatch: Any
) -> None:
    monkeypatch.setattr("vrag_desktop.qt.guide.sample_corpus_dir", lambda: None)
    w = MainWindow(ctx, first_run=True)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitUntil(lambda: w.guide.dialog is not None, timeout=5000)
    w.guide.dialog.example_button.click()
    qtbot.waitUntil(
        lambda: w.guide.example_bar.key == "vrag" and bool(w.graph_scene.node_items()), timeout=5000
    )
    assert ctx.profiles.active is None  # looking at an example chooses no model
    action = next(a for a in w.actions() if a.text() == "VimRAG example run (recorded)")
    action.trigger()
    qtbot.waitUntil(lambda: w.guide.example_bar.key == "vimrag", timeout=5000)
