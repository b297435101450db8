"""What the frozen-app tests share (tests/test_frozen_app.py, tests/test_frozen_readonly.py): the
bundle scripts/build-app.sh builds (or reuses), moved to a path with spaces and non-ASCII
characters, and the environment the bundle runs in (its own HOME, no display unless asked)."""

from __future__ import annotations

import faulthandler
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APP = "VRAG Desktop"
BUILD_TIMEOUT_S = 1500


def frozen_marks(run_timeout_s: int) -> list[pytest.MarkDecorator]:
    """The marks of a test module that runs the bundle: ``frozen`` (``VRAG_SKIP_FROZEN=1`` skips
    it locally; CI runs it), Linux only, and a timeout covering a build plus ``run_timeout_s``."""
    return [
        pytest.mark.frozen,
        pytest.mark.slow,
        pytest.mark.timeout(BUILD_TIMEOUT_S + run_timeout_s),
        pytest.mark.skipif(
            os.environ.get("VRAG_SKIP_FROZEN") == "1",
            reason="VRAG_SKIP_FROZEN=1: the frozen-app build and smoke test are skipped (CI runs them)",
        ),
        pytest.mark.skipif(
            not sys.platform.startswith("linux"), reason="the bundle is built and tested on Linux"
        ),
    ]


def moved_bundle(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Path]:
    """The ``bundle`` fixture's body (each frozen test module has its own, module-scoped): the built
    bundle, moved to ``…/Apps (test)/VRAG Désktop ünïcode/`` (links to the build's
    files, so nothing is copied): the app must not depend on where it was built."""
    built = ROOT / "dist" / APP
    # A build takes minutes: no "stuck test" stack dump meanwhile (re-armed for the app's part).
    faulthandler.cancel_dump_traceback_later()
    if not (os.environ.get("VRAG_FROZEN_REUSE") == "1" and (built / APP).is_file()):
        proc = subprocess.run(
            ["bash", str(ROOT / "scripts" / "build-app.sh")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
        assert proc.returncode == 0, f"build-app.sh failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    assert (built / APP).is_file(), f"no executable in {built}"
    try:
        dump_after = float(request.config.getini("faulthandler_timeout") or 0)
    except ValueError:  # -p no:faulthandler
        dump_after = 0.0
    if dump_after > 0:
        faulthandler.dump_traceback_later(dump_after, exit=False)
    moved = tmp_path_factory.mktemp("frozen") / "Apps (test)" / "VRAG Désktop ünïcode"
    moved.parent.mkdir(parents=True)
    try:
        shutil.copytree(built, moved, copy_function=os.link, symlinks=True)
    except OSError:  # another file system: a real copy
        shutil.rmtree(moved, ignore_errors=True)
        shutil.copytree(built, moved, symlinks=True)
    yield moved
    shutil.rmtree(moved, ignore_errors=True)


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file() and not p.is_symlink()
    }


def run_env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
        and not k.startswith("VRAG_DESKTOP_")
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_RUNTIME_DIR=str(home / "run"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    (home / "run").mkdir(parents=True, exist_ok=True)
    os.chmod(home / "run", 0o700)
    env.update(extra)
    return env


#: What Qt's xcb platform plugin loads besides the bundle (scripts/display-deps.sh installs them).
XCB_LIBS = ("libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxkbcommon-x11.so.0", "libxcb-cursor.so.0")


def gui_prefix() -> tuple[list[str], dict[str, str]]:
    """Under Xvfb (a real X11 window) when xvfb-run and the xcb libraries are here
    (scripts/display-deps.sh), else Qt's offscreen platform."""
    if shutil.which("xvfb-run") and os.environ.get("VRAG_FROZEN_QPA") != "offscreen":
        ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
        try:
            known = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=30).stdout
        except OSError:
            known = ""
        if all(lib in known for lib in XCB_LIBS):
            return ["xvfb-run", "-a", "-s", "-screen 0 1280x800x24"], {}
    return [], {"QT_QPA_PLATFORM": "offscreen"}


def run(argv: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd="/")
