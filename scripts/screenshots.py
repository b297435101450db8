"""Drive the real app through a scripted VRAG run and save screenshots into docs/screenshots/.

Run it under a display (``scripts/screenshots.sh`` starts Xvfb). What happens is what a person
does: first launch (the sample corpus is indexed by the app itself), pick an endpoint, ask, watch,
click a graph node and the answer's evidence. Only the model's words are scripted: a loopback
OpenAI-compatible server (tests/scripted_openai.py) answers like the VRAG model would, with boxes
computed from where the table really is on the page. The script fails if the run does not produce
a graph with nodes and evidence with crop boxes.

The README's "First run" pictures (what a newcomer meets: the model chooser, Ask off with its
reason, a recorded example run, the Models view and a download in progress) are made by::

    xvfb-run -a -s "-screen 0 1600x1000x24" env QT_QPA_PLATFORM=xcb HF_HUB_OFFLINE=1 \
        .venv/bin/python scripts/screenshots.py --readme

which writes docs/screenshots/{first-run,ask-off,example-run,models,models-download}.png (it runs
``--newcomer`` and ``--models`` below, each in a process of its own). Nothing leaves the machine: the
download comes from a fake hub on loopback (tests/fake_hub.py).
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

QUESTION = "Which region generated the most revenue for Northwind last year, and how much?"
PAGE_PT = (595.0, 842.0)
TABLE_PT = (56.0, 250.0, 540.0, 369.0)  # "Table 1. Revenue by region" on page 2 of the annual report
ROW_PT = (58.0, 287.0, 540.0, 303.0)  # its North America row
# --readme: which of the --newcomer / --models pictures the README shows, and under which name.
README_SHOTS = {
    "first-run-dialog": "first-run.png",
    "ask-off": "ask-off.png",
    "example-vrag": "example-run.png",
    "models-list": "models.png",
    "models-downloading": "models-download.png",
}


def _last_image_size(body: dict[str, Any]) -> tuple[int, int]:
    from PIL import Image

    for msg in reversed(body["messages"]):
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for part in reversed(content):
            if part.get("type") == "image_url":
                data = part["image_url"]["url"].split(",", 1)[1]
                return Image.open(io.BytesIO(base64.b64decode(data))).size  # type: ignore[no-any-return]
    raise RuntimeError("the model was shown no image")


def make_script(page_raw: tuple[int, int]) -> list[Any]:
    """VRAG turns: search, zoom into the table, zoom into its first row, answer."""
    from vrag_desktop.core.agents.vrag_protocol import View

    state: dict[str, Any] = {}

    def frac_box(pt: tuple[float, float, float, float], size: tuple[int, int]) -> list[int]:
        w, h = size
        return [
            round(pt[0] / PAGE_PT[0] * w),
            round(pt[1] / PAGE_PT[1] * h),
            round(pt[2] / PAGE_PT[0] * w),
            round(pt[3] / PAGE_PT[1] * h),
        ]

    def zoom_table(body: dict[str, Any]) -> dict[str, Any]:
        shown = _last_image_size(body)
        box = frac_box(TABLE_PT, shown)
        _region, view = View(shown, page_raw).zoom(tuple(box))
        state["view"] = view
        return {
            "content": f"<think>Page 2 of the annual report has a table of revenue by region. I need the exact "
            "figures, so I will zoom into the table before answering.</think>\n"
            f"<bbox>{box}</bbox>",
            "chunk": 6,
            "delay": 0.01,
        }

    def zoom_row(body: dict[str, Any]) -> dict[str, Any]:
        shown = _last_image_size(body)
        view = state["view"]
        ox, oy = view.origin
        sx, sy = shown[0] / view.raw_size[0], shown[1] / view.raw_size[1]
        rx1, ry1, rx2, ry2 = frac_box(ROW_PT, page_raw)
        box = [round((rx1 - ox) * sx), round((ry1 - oy) * sy), round((rx2 - ox) * sx), round((ry2 - oy) * sy)]
        return {
            "content": "<think>North America has the largest 2024 figure in the table. Let me zoom into that "
            f"row to be sure of the number.</think>\n<bbox>{box}</bbox>",
            "chunk": 6,
            "delay": 0.01,
        }

    return [
        {
            "content": "<think>The question is about revenue by region in the last fiscal year. Northwind's "
            "annual report should have a breakdown, so I will search for it.</think>\n"
            "<search>Northwind revenue by region 2024</search>",
            "chunk": 6,
            "delay": 0.01,
        },
        zoom_table,
        zoom_row,
        {
            "content": "<think>The row reads: North America, 151.0 in 2023 and 168.4 in 2024 (USD millions), "
            "the largest of all regions.</think>\n"
            "<answer>North America, with USD 168.4 million of revenue in 2024 (40.9% of the total).</answer>",
            "chunk": 6,
            "delay": 0.01,
        },
    ]


def wait(app: Any, cond: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise SystemExit(f"screenshots: timed out after {timeout:.0f} s waiting for {what}")
        app.processEvents()
        time.sleep(0.02)


def settle(app: Any, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.02)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    ap.add_argument("--theme", default="light", choices=["light", "dark"])
    ap.add_argument(
        "--size",
        default=None,
        help="the screen's size as named in the pictures (default: the screen's own); the window "
        "sizes itself to the screen as on a first start",
    )
    ap.add_argument(
        "--newcomer",
        action="store_true",
        help="instead: what a newcomer sees (the model chooser, Ask off with its reason, the recorded "
        "example runs), named after --size",
    )
    ap.add_argument(
        "--models",
        action="store_true",
        help="instead: the Models view (the list, a download in progress from a local fake hub, a "
        "finished one), named after --size; no sample corpus is indexed",
    )
    ap.add_argument(
        "--readme",
        action="store_true",
        help="the README's First run pictures: --newcomer and --models, keeping only "
        + ", ".join(README_SHOTS.values()),
    )
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.readme and not (args.newcomer or args.models):
        for mode in ("--newcomer", "--models"):
            cmd = [sys.executable, __file__, mode, "--readme", "--out", str(out), "--theme", args.theme]
            subprocess.run([*cmd, *(["--size", args.size] if args.size else [])], check=True)
        return 0
    work = Path(tempfile.mkdtemp(prefix="vrag-shots-"))
    os.environ["VRAG_DESKTOP_DATA_DIR"] = str(work / "data")
    os.environ["VRAG_DESKTOP_CONFIG_DIR"] = str(work / "config")
    os.environ.setdefault("QT_API", "pyside6")

    from PySide6.QtWidgets import QApplication

    app = QApplication([sys.argv[0]])
    app.setApplicationName("VRAG Desktop")
    from scripted_openai import ScriptedOpenAI

    from vrag_desktop.core.endpoints.profiles import EndpointProfile
    from vrag_desktop.qt.context import AppContext
    from vrag_desktop.qt.infra.errors import error_sink
    from vrag_desktop.qt.infra.theme import apply_theme
    from vrag_desktop.qt.main_window import MainWindow

    error_sink().reported.connect(lambda lvl, t, m: print(f"[{lvl}] {t}: {m}", file=sys.stderr))
    ctx = AppContext.load()
    ctx.settings.theme = args.theme
    apply_theme(app, args.theme)
    window = MainWindow(ctx, first_run=not args.models)  # the first launch indexes the sample corpus
    screen = window.screen().availableGeometry()
    args.size = args.size or f"{screen.width()}x{screen.height()}"
    window.show()
    settle(app, 0.5)
    if not screen.contains(window.frameGeometry()):
        raise SystemExit(
            f"screenshots: the window {window.frameGeometry()} is not inside the screen {screen}"
        )
    if args.models:
        return models(app, window, out, tag(args))
    indexed: list[str] = []
    window.corpora.indexed.connect(indexed.append)
    t0 = time.monotonic()
    wait(app, lambda: "sample" in indexed, 900, "the sample corpus to be indexed")
    print(f"sample corpus indexed in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    if args.newcomer:
        return newcomer(app, window, out, tag(args))
    dialog = window.guide.dialog  # the model chooser: the scripted model is chosen below
    if dialog is not None:
        dialog.close()

    corpus = ctx.library.open("sample")
    item = next(
        i
        for i in corpus.manifest.items()
        if i.name.startswith("northwind_annual_report_2024") and i.ordinal == 1
    )
    from PIL import Image

    with Image.open(item.image_path) as im:
        page_raw = im.size
    corpus.close()

    with ScriptedOpenAI(make_script(page_raw)) as srv:
        ctx.profiles.save(
            EndpointProfile(
                name="Scripted VRAG", kind="local-vllm", base_url=srv.base_url, model="Qwen2.5-VL-7B-VRAG"
            )
        )
        window.ask.refresh_profiles()
        window.ask.profile_combo.setCurrentIndex(window.ask.profile_combo.findData("Scripted VRAG"))
        window.ask.agent_combo.setCurrentIndex(window.ask.agent_combo.findData("vrag"))
        window.ask.question_edit.setPlainText(QUESTION)
        ended: list[tuple[str, str]] = []
        window.controller.finished.connect(lambda s, r: ended.append((s, r)))
        live: list[Any] = []  # the window mid-run, once the second crop is drawn: the graph follows

        def live_shot(_event: Any) -> None:
            kinds = [n.info.kind for n in window.graph_scene.node_items()]
            if not live and kinds.count("crop") >= 2:
                live.append(window.grab())

        window.controller.agentEvent.connect(live_shot)
        window.ask.send()
        wait(app, lambda: bool(ended), 120, "the scripted run to finish")
    status, run_id = ended[0]
    print(f"run {run_id}: {status}", file=sys.stderr)
    if status != "answered":
        raise SystemExit(f"screenshots: the run ended '{status}', not answered")

    settle(app, 1.0)
    if live:
        args.live = live[0]
    return run_shots(app, window, out, args)


def run_shots(app: Any, window: Any, out: Path, args: argparse.Namespace) -> int:
    """The run as the window shows it at this screen size: the graph with the crop node's details
    and History; the evidence (a tab of its own on a small screen); the Runtime panel. On a screen
    large enough, the graph and the evidence floated on their own too (graph.png, evidence.png)."""
    scene = window.graph_scene
    nodes = scene.node_items()
    crop_nodes = [n for n in nodes if n.info.kind == "crop"]
    if len(nodes) < 5 or not crop_nodes:
        raise SystemExit(f"screenshots: the graph has {len(nodes)} nodes ({len(crop_nodes)} crops)")
    window.history.refresh()
    wait(app, lambda: window.history.model.rowCount() > 0, 10, "the run in History")
    scene.select_node(crop_nodes[-1].node_id)
    suffix = "" if args.theme == "light" else "-dark"
    name = f"{args.size}{suffix}"
    shoot = partial(save_shot, app, out, tag="")
    if getattr(args, "live", None) is not None:
        shoot(f"main-window-live-{name}.png", args.live)
    window.graph_view.fit()  # the whole run, as a double-click shows it
    settle(app, 1.0)
    shoot(f"main-window-{name}.png", window)
    evidence = window.ask.evidence_links()
    if evidence:
        window.open_evidence(evidence[0])
    settle(app, 2.0)
    page = window.evidence.current_page()
    regions = page.regions if page is not None else []
    if len(regions) < 2:
        raise SystemExit(f"screenshots: the evidence view shows {len(regions)} crop boxes")
    if window.graph_dock.visibleRegion().isEmpty():  # graph and evidence are tabs: the other one
        shoot(f"main-window-evidence-{name}.png", window)
    window.open_runtime()
    shoot(f"runtime-{name}.png", window)
    screen = window.screen().availableGeometry()
    if screen.width() >= 1300 and screen.height() >= 900:
        window.window_layout.show_run_views()
        for base, dock in (("graph", window.graph_dock), ("evidence", window.evidence_dock)):
            # on its own, floated and large enough to read every card / the page
            dock.setFloating(True)
            dock.resize(1300, 900)
            settle(app, 0.5)
            window.graph_view.fit()
            window.evidence.page_view.fit()
            shoot(f"{base}{suffix}.png", dock)
    window.close()
    return 0


def tag(args: argparse.Namespace) -> str | None:
    """What the --newcomer / --models pictures' names end in; None: the README's names."""
    return None if args.readme else f"{args.size}{'' if args.theme == 'light' else '-dark'}"


def save_shot(app: Any, out: Path, name: str, widget: Any = None, *, tag: str | None) -> None:
    """``widget`` (or the whole screen) as ``name-tag.png`` (``tag`` "": ``name`` as it is); with no
    tag, only the README's pictures, under their README names. Re-saved losslessly smaller by Pillow."""
    from PIL import Image
    from PySide6.QtGui import QGuiApplication, QPixmap

    if tag is None and name not in README_SHOTS:
        return
    settle(app, 0.8)
    path = out / (README_SHOTS[name] if tag is None else f"{name}-{tag}.png" if tag else name)
    if isinstance(widget, QPixmap):  # grabbed earlier
        image = widget
    elif widget is not None:
        image = widget.grab()
    else:
        image = QGuiApplication.primaryScreen().grabWindow(0)
    if not image.save(str(path)):
        raise SystemExit(f"screenshots: could not write {path}")
    with Image.open(path) as im:
        im.load()
    im.save(path, optimize=True)
    print(f"wrote {path} ({path.stat().st_size // 1024} KB)")


def newcomer(app: Any, window: Any, out: Path, tag: str | None) -> int:
    """A first launch on this machine: the model chooser, then (decided later) the Ask panel off with
    its reason, then each recorded example open in the graph and evidence views."""

    def shoot(name: str, widget: Any = None) -> None:
        save_shot(app, out, name, widget, tag=tag)

    ev = window.evidence
    dialog = window.guide.dialog
    if dialog is None:
        raise SystemExit("screenshots: the first launch showed no model chooser")
    wait(app, lambda: dialog.local.verdict is not None, 30, "the GPU probe and the local model's fit")
    dialog.move(window.geometry().center() - dialog.rect().center())
    shoot("first-run")  # the whole screen: the chooser over the window
    shoot("first-run-dialog", dialog)
    dialog.later_button.click()
    wait(app, lambda: window.guide.dialog is None, 10, "the chooser to close")
    wait(app, lambda: bool(window.ask.readiness_bar.reason()), 10, "Ask's reason")
    if window.ask.send_button.isEnabled():
        raise SystemExit("screenshots: Ask is on with no model chosen")
    shoot("ask-off", window)
    for key in ("vrag", "vimrag"):
        window.guide.open_example(key)
        shown = lambda k=key: window.guide.example_bar.key == k and bool(window.graph_scene.node_items())  # noqa: E731
        wait(app, shown, 10, f"the {key} example")
        wait(app, lambda: ev.current is not None and ev.loaded == ev.current, 20, "the example's page")
        window.graph_view.fit()
        window.evidence.page_view.fit()
        shoot(f"example-{key}", window)
    window.close()
    return 0


def models(app: Any, window: Any, out: Path, tag: str | None) -> int:
    """The Models view: the list (this machine's verdicts), a download in progress from a fake hub on
    loopback (never the internet), the finished one and *Serve…* leading to the Runtime panel."""
    from fake_hub import FakeHub
    from models_support import tiny_files

    from vrag_desktop.core.models import update_settings

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.pop(var, None)
    import huggingface_hub.constants as hub_constants

    hub_constants.HF_HUB_OFFLINE = False

    def shoot(name: str, widget: Any = None) -> None:
        save_shot(app, out, f"models-{name}", widget, tag=tag)

    repo = "demo-org/tiny-vision-model"
    with FakeHub() as hub:
        hub.repo(repo).commit(tiny_files(weights=48 * 1024 * 1024))
        hub.throttle["model.safetensors"] = 6 * 1024 * 1024
        update_settings(window.ctx.layout, endpoint=hub.url)
        view = window.models.open(focus="autumncc/Qwen2.5-VL-7B-VRAG")
        view.move(window.geometry().center() - view.rect().center())
        wait(app, lambda: view.listing is not None, 30, "the models list")
        view.tabs.setCurrentIndex(0)
        shoot("list", view)
        view.tabs.setCurrentIndex(1)
        shoot("embedders", view)
        view.tabs.setCurrentIndex(0)
        view.id_edit.setText(repo)
        view.id_button.click()
        dl = view.downloads
        wait(app, lambda: dl.active is not None and dl.active.progress is not None
             and dl.active.progress.fraction > 0.35 and dl.active.progress.rate > 0, 60, "the download")  # fmt: skip
        shoot("downloading", view)
        shoot("downloading-screen")  # the Models window over the main window, the status bar's badge
        hub.throttle.clear()
        wait(app, lambda: not dl.busy, 60, "the download to finish")
        wait(app, lambda: (c := view.card(repo)) is not None and c.row.state == "downloaded", 30, "its row")
        view.focus(repo)
        shoot("downloaded", view)
        card = view.card(repo)
        assert card is not None
        card.use_button.click()  # Serve…: the Runtime panel's Local vLLM server, ready to start
        shoot("serve-screen")
    window.models.shutdown()
    window.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
