"""Issue 31's walk-through, the panels ``scripts/screenshots.py`` does not reach (docs/walkthrough.md).

Opens the real app on a copy of a data directory the command line prepared from empty (the sample
corpus and a user folder holding a copy of one of its PDFs, a retrieval evaluation over both,
finished and stopped training runs) and saves, as ``walk-<step>-<size>[-dark].png``: the window at
start; the question a folder handed to the app asks; New corpus; Datasets → Import's target
question and the imported dataset; Evaluations and *HTML report* with (here) no browser; the
Training dock's plots and log of each run; Runtime's Local vLLM with its pre-flight; a warning and
an error banner. Run under a display with no trainer going (closing would wait on the question)::

    xvfb-run -a -s "-screen 0 1280x800x24" env QT_QPA_PLATFORM=xcb .venv/bin/python \\
        scripts/walkthrough_panels.py --data DIR --folder DIR --theme dark --out /tmp/walk-shots
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="the prepared data directory (copied, never changed)")
    ap.add_argument(
        "--folder", required=True, help="the user folder handed to the app as `gui <folder>` does"
    )
    ap.add_argument("--theme", default="light", choices=["light", "dark"])
    ap.add_argument("--out", default="/tmp/walk-shots")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="vrag-walk-"))
    shutil.copytree(args.data, work / "data")
    os.environ["VRAG_DESKTOP_DATA_DIR"] = str(work / "data")
    os.environ["VRAG_DESKTOP_CONFIG_DIR"] = str(work / "config")

    from PySide6.QtWidgets import QApplication

    app = QApplication([sys.argv[0]])
    from screenshots import settle

    from vrag_desktop.qt.context import AppContext
    from vrag_desktop.qt.infra.theme import apply_theme
    from vrag_desktop.qt.main_window import MainWindow

    ctx = AppContext.load()
    ctx.settings.theme = args.theme
    apply_theme(app, args.theme)
    window = MainWindow(ctx, first_run=False)
    window.show()
    settle(app, 1.0)
    screen = window.screen().availableGeometry()
    inside = screen.contains(window.frameGeometry())
    print(f"window {window.frameGeometry()} on screen {screen}: inside {inside}")
    tag = f"{screen.width()}x{screen.height()}{'' if args.theme == 'light' else '-dark'}"
    walk(app, window, out, tag, args.folder)
    window.close()
    settle(app, 0.5)
    return 0 if inside else 1


def walk(app: Any, window: Any, out: Path, tag: str, folder: str) -> None:
    from screenshots import save_shot, settle, wait

    from vrag_desktop.qt.corpora.add_to_corpus import ask_and_add
    from vrag_desktop.qt.datasets.import_target import ImportTargetDialog
    from vrag_desktop.qt.infra.errors import error_sink

    def shoot(step: str, widget: Any = None) -> None:  # no widget: the whole screen
        save_shot(app, out, f"walk-{step}-{tag}.png", widget, tag="")

    shoot("start")
    dialog = ask_and_add(window.corpora, [folder])  # what the app does with `vrag-desktop gui <folder>`
    settle(app, 1.5)
    shoot("gui-folder")
    if dialog is not None:
        dialog.reject()
    window.corpora.new_corpus()
    settle(app, 0.5)
    shoot("new-corpus", window)
    window.corpora.close_editor()

    window.window_layout.show_tool(window.datasets_dock)
    datasets = window.panels.datasets.get()
    settle(app, 1.0)
    print("Import… opens in:", datasets._import_folder)
    source = str(ROOT / "resources" / "sample_corpus" / "questions.json")
    target = ImportTargetDialog(source, datasets.names(), datasets.current_name(), window)
    target.show()
    settle(app, 0.8)
    shoot("import-target")
    name = target.target()
    print("Import's default target:", name)
    target.accept()
    datasets.import_file(name or "questions", source)
    wait(app, lambda: bool(datasets.names()), 20, "the imported dataset")
    settle(app, 3.0)
    shoot("datasets", window)

    window.window_layout.show_tool(window.evaluations_dock)
    evaluations = window.panels.evaluations.get()
    evaluations.refresh()
    settle(app, 2.0)
    if evaluations.list.topLevelItemCount():
        evaluations.list.setCurrentItem(evaluations.list.topLevelItem(0))
    settle(app, 2.0)
    shoot("evaluations", window)
    print("HTML report opened by a program:", evaluations.open_html())
    settle(app, 1.0)
    shoot("open-html")

    window.window_layout.show_tool(window.training_dock)
    training = window.panels.training.get()
    settle(app, 2.0)
    runs = sorted(p for p in (Path(os.environ["VRAG_DESKTOP_DATA_DIR"]) / "training").glob("*") if p.is_dir())
    for run in runs:
        training.select(run)
        settle(app, 2.5)
        shoot(f"training-{run.name}-plots", window)
        training.view.tabs.setCurrentIndex(1)  # Log
        settle(app, 1.5)
        shoot(f"training-{run.name}-log", window)
        training.view.tabs.setCurrentIndex(0)

    window.open_runtime()
    runtime = window.panels.runtime.get()
    runtime.tabs.setCurrentIndex(1)  # Local vLLM
    runtime.vllm.model_edit.setText("autumncc/Qwen2.5-VL-7B-VRAG")
    settle(app, 4.0)
    print("pre-flight box shown:", runtime.vllm.preflight_box.isVisible())
    shoot("runtime-vllm", window)
    error_sink().report("Check the folder", "a warning banner", "warning")
    error_sink().report("vLLM could not start", "the local server exited (code 1)", "error")
    settle(app, 1.0)
    shoot("banners", window)


if __name__ == "__main__":
    raise SystemExit(main())
