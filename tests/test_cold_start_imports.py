"""Cold start (issue 31): nothing is imported before the window shows that the window does not need.

Why a module set and not a time: a shared CI machine's timings say little, while one heavy import
slipping in before the window (a panel importing pyqtgraph, numpy or keyring at module level, or
starting a look-up that imports them while the window is built) costs a person 0.2-1 s at every start.
The app runs as ``vrag-desktop gui`` does on a fresh data directory; the modules loaded at the
window's first ``showEvent`` are recorded and none may be in ``qt.app.NOT_BEFORE_WINDOW``
(bench/cold_start.py measures the time).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import gc, sys
from vrag_desktop.qt import main_window
from vrag_desktop.qt.infra import tasks

at_show, collector = [], {}
shown = main_window.MainWindow.showEvent
release = tasks.release_starts

def show_event(self, event):
    if not at_show:
        at_show.append(set(sys.modules))
        collector["at-show"] = gc.isenabled()
    shown(self, event)

def release_starts():
    collector["after-paint"] = gc.isenabled()
    collector["frozen"] = gc.get_freeze_count()
    release()

main_window.MainWindow.showEvent = show_event
tasks.release_starts = release_starts
from vrag_desktop.qt.app import main

rc = main(data_dir=sys.argv[1])
heavy = sys.argv[2].split(",")
print("RC", rc)
print("AT-SHOW", ",".join(sorted(m for m in heavy if m in at_show[0])))
print("APP-MODULES", len([m for m in at_show[0] if m.startswith("vrag_desktop")]))
print("GC", collector["at-show"], collector["after-paint"], collector["frozen"])
"""


def test_window_shows_before_heavy_libraries_load(tmp_path: Path) -> None:
    from vrag_desktop.core.settings import AppSettings, save_settings
    from vrag_desktop.qt.app import NOT_BEFORE_WINDOW  # the one list (bench/cold_start.py's too)

    save_settings(AppSettings(first_run_done=True), tmp_path / "cfg")  # a returning person
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "VRAG_DESKTOP_STARTUP_PROBE": "1",  # the app shows its window, processes events, leaves
        "VRAG_DESKTOP_CONFIG_DIR": str(tmp_path / "cfg"),
    }
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "fresh-data"), ",".join(NOT_BEFORE_WINDOW)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert lines["RC"] == "0"
    assert int(lines["APP-MODULES"]) > 50  # the probe saw the real window being built
    loaded = [m for m in lines.get("AT-SHOW", "").split(",") if m]
    assert loaded == [], f"imported before the window showed (defer them to first use): {loaded}"
    # no garbage collection while the window is built; back on once it has painted, before the held
    # look-ups start, with what the start made frozen (later full collections skip it)
    at_show, after_paint, frozen = lines["GC"].split()
    assert (at_show, after_paint) == ("False", "True")
    assert int(frozen) > 20_000


def test_the_gui_start_reads_its_arguments_as_the_full_parser_does() -> None:
    """``vrag-desktop [gui]`` skips building every command's parser (their modules cost ~0.1 s before
    the window); what it reads must be what the full parser reads, and anything else goes to it."""
    from vrag_desktop.cli.main import _gui_args, _parser

    for raw in ([], ["gui"], ["--data-dir", "D"], ["--data-dir=D", "gui", "a", "b c"], ["gui", "x"]):
        fast, full = _gui_args(raw), _parser().parse_args(raw)
        assert fast is not None and full.command in (None, "gui"), raw
        assert (fast.data_dir, fast.paths) == (full.data_dir, getattr(full, "paths", [])), raw
    for raw in (["--version"], ["gui", "--help"], ["index", "x"], ["--data-dir"], ["-h"], ["ask", "q"]):
        assert _gui_args(raw) is None, raw
