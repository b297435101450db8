"""The double-click app, frozen: scripts/build-app.sh builds (or reuses) the PyInstaller bundle, and
the bundle — moved to a folder whose path has spaces and non-ASCII characters — opens its window
(under Xvfb when available, else offscreen), indexes the sample corpus, takes a file from a second
launch, answers a search from its own command line, refuses a data directory of a newer app and
quits cleanly, writing nothing into its own folder.

Minutes on a fresh clone (the build); about two more when the bundle is up to date. Marked
``frozen``: ``VRAG_SKIP_FROZEN=1`` skips it (CI runs it, through scripts/test.sh);
``VRAG_FROZEN_REUSE=1`` tests the bundle already in dist/ even if the sources changed since.
"""

from __future__ import annotations

import faulthandler
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APP = "VRAG Desktop"
BUILD_TIMEOUT_S = 1500
#: Start-up to a visible window, process start included: the cold-start target (docs/benchmarks.md
#: §5.1: 1.5 s on the app's own clock) plus the interpreter's start — or, on a loaded machine, no
#: slower than 1.5x the same start from source measured alongside.
FROZEN_START_TARGET_S = 2.5

pytestmark = [
    pytest.mark.frozen,
    pytest.mark.slow,
    pytest.mark.timeout(BUILD_TIMEOUT_S + 900),
    pytest.mark.skipif(
        os.environ.get("VRAG_SKIP_FROZEN") == "1",
        reason="VRAG_SKIP_FROZEN=1: the frozen-app build and smoke test are skipped (CI runs them)",
    ),
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="the bundle is built and tested on Linux"
    ),
]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Path]:
    """The built bundle, moved to ``…/Apps (test)/VRAG Désktop ünïcode/`` (links to the build's
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


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file() and not p.is_symlink()
    }


def _env(home: Path, **extra: str) -> dict[str, str]:
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


def _gui_prefix() -> tuple[list[str], dict[str, str]]:
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


def _run(argv: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd="/")


def _start_seconds(argv: list[str], home: Path, data: Path) -> float:
    """The best of two starts (after one to warm the page cache) to a visible window, process
    start included (``VRAG_DESKTOP_STARTUP_PROBE``: the app closes once its window shows)."""
    env = _env(home, QT_QPA_PLATFORM="offscreen", VRAG_DESKTOP_STARTUP_PROBE="1")
    if argv[0] == sys.executable:
        env["PYTHONPATH"] = str(ROOT)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        out = _run([*argv, "--data-dir", str(data)], env, timeout=120)
        elapsed = time.perf_counter() - t0
        assert out.returncode == 0 and "window-visible" in out.stdout, out.stderr[-3000:]
        best = min(best, elapsed)
    return best


def test_frozen_app_end_to_end(bundle: Path, tmp_path: Path) -> None:
    exe = str(bundle / APP)
    before = _listing(bundle)
    home = tmp_path / "hôme dir"
    data = tmp_path / "dätä dir"
    dropped = tmp_path / "dropped files"
    dropped.mkdir()
    (dropped / "launch notes.txt").write_text(
        "Zebrafinch quokka launch notes: the Ostrava warehouse opens on 3 March.\n", encoding="utf-8"
    )

    # -- the command line answers from the bundle at once
    out = _run([exe, "--version"], _env(home))
    assert out.returncode == 0 and "vrag-desktop" in out.stdout, out.stderr

    # -- no display: a clear message, exit 2
    out = _run([exe, "--data-dir", str(data)], _env(home))
    assert out.returncode == 2 and "no display" in out.stderr, (out.returncode, out.stderr)

    # -- start-up to a visible window: as fast as the app run from source (the same machine, now)
    probe_home = tmp_path / "probe home"  # its own: the first launch below must be a first run
    frozen_s = _start_seconds([exe], probe_home, tmp_path / "probe")
    source_s = _start_seconds([sys.executable, "-m", "vrag_desktop"], probe_home, tmp_path / "probe")
    assert frozen_s <= max(FROZEN_START_TARGET_S, 1.5 * source_s), (frozen_s, source_s)

    # -- the window: first launch indexes the sample corpus; a second launch, started while the
    #    first is indexing, hands over a folder and exits; the first adds it to a corpus, indexes
    #    it, then quits
    report = tmp_path / "smoke.json"
    prefix, gui_env = _gui_prefix()
    first = subprocess.Popen(
        [*prefix, exe, "--data-dir", str(data)],
        env=_env(
            home,
            **gui_env,
            VRAG_DESKTOP_SMOKE=str(report),
            VRAG_DESKTOP_SMOKE_WAIT="sample",
            VRAG_DESKTOP_SMOKE_TIMEOUT="420",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    try:
        deadline = time.monotonic() + 120
        locks = home / "run"
        while not list(locks.glob("vrag-desktop-*.lock")):
            assert first.poll() is None, f"the app ended early: {first.communicate()[1][-3000:]}"
            assert time.monotonic() < deadline, "the app never took its single-instance lock"
            time.sleep(0.2)
        second = _run(
            [exe, "--data-dir", str(data), str(dropped)],
            _env(home, QT_QPA_PLATFORM="offscreen"),
            timeout=60,
        )
        assert second.returncode == 0, second.stderr[-3000:]
        assert "already running" in second.stderr
        _stdout, stderr = first.communicate(timeout=480)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 0, f"exit {first.returncode}:\n{stderr[-4000:]}"
    result = json.loads(report.read_text(encoding="utf-8"))
    assert result["title"] == "VRAG Desktop" and result["visible"], result
    assert result["application"] == "VRAG Desktop", result
    assert result["outcome"] == "done", result
    assert "sample" in result["corpora"], result
    # programs it opens get the system's libraries, not the bundle's (OpenCV's import appends a
    # cv2/../../lib64 that does not exist: harmless)
    leaked = [
        p
        for p in result["ld_library_path"].split(os.pathsep)
        if p and os.path.isdir(p) and Path(p).resolve().is_relative_to(bundle.resolve())
    ]
    assert not leaked, result["ld_library_path"]
    assert all(outcome == "done" for _name, outcome in result["jobs"]), result

    # -- its own command line searches what the window indexed
    out = _run(
        [exe, "--data-dir", str(data), "search", "research and development spending", "--json"], _env(home)
    )
    assert out.returncode == 0, out.stderr[-3000:]
    hits = json.loads(out.stdout)
    assert any("northwind_annual_report" in json.dumps(h) for h in hits), out.stdout[:2000]
    out = _run(
        [exe, "--data-dir", str(data), "search", "zebrafinch quokka", "-k", "3"], _env(home)
    )  # the folder the second launch handed over went into a corpus (the selected one, else "default")
    assert out.returncode == 0 and "launch notes.txt" in out.stdout, (out.stdout, out.stderr[-2000:])

    # -- a data directory written by a newer app: refused, untouched
    newer = tmp_path / "newer data"
    newer.mkdir()
    stamp = newer / "vrag-desktop-data.json"
    stamp.write_text('{"format": 999, "written_by": "99.0"}', encoding="utf-8")
    out = _run([exe, "--data-dir", str(newer), "search", "anything"], _env(home))
    assert out.returncode != 0 and "newer VRAG Desktop" in out.stderr, out.stderr
    out = _run([exe, "--data-dir", str(newer)], _env(home, QT_QPA_PLATFORM="offscreen"), timeout=120)
    assert out.returncode == 3 and "newer VRAG Desktop" in out.stderr, out.stderr
    assert sorted(p.name for p in newer.iterdir()) == ["vrag-desktop-data.json"]
    assert stamp.read_text(encoding="utf-8") == '{"format": 999, "written_by": "99.0"}'

    # -- a read-only install location works: the app never wrote into its own folder
    assert _listing(bundle) == before
