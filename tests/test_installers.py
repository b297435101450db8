"""The menu entry and the Linux installers. ``vrag-desktop --install-desktop`` writes the .desktop
entry and icons into a temporary HOME (from source; from the bundle, in its frozen test) and
``--uninstall-desktop`` removes them. The .deb and the AppImage that ``scripts/build-app.sh --deb
--appimage`` make are opt-in: each test skips, saying so, when its installer is not in dist/ (or
is older than the bundle); otherwise it is unpacked into a temporary root (``dpkg-deb -x``,
``unsquashfs`` / ``--appimage-extract``), its menu entry and icon are checked, and the app it
installed starts under Xvfb (or offscreen) until its window is visible."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from frozen_bundle import APP, ROOT, frozen_marks, gui_prefix, moved_bundle, run, run_env

from vrag_desktop.core.desktop_entry import entry_text

DIST = ROOT / "dist"
STAMP = DIST / APP / ".vrag-build-stamp"
ID = "vrag-desktop"

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="freedesktop.org and Debian: Linux")


def _entry(path: Path) -> configparser.SectionProxy:
    cp = configparser.RawConfigParser(interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]
    cp.read(path, encoding="utf-8")
    return cp["Desktop Entry"]


def _validate(desktop: Path) -> None:
    if shutil.which("desktop-file-validate"):
        check = subprocess.run(["desktop-file-validate", str(desktop)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr


def _window_opens(argv: list[str], tmp: Path) -> None:
    """The installed app starts and shows its window (its start-up probe: it closes once visible)."""
    prefix, gui_env = gui_prefix()
    env = run_env(tmp / "home", **gui_env, VRAG_DESKTOP_STARTUP_PROBE="1")
    out = run([*prefix, *argv, "--data-dir", str(tmp / "data")], env, timeout=180)
    assert out.returncode == 0 and "window-visible" in out.stdout, (out.returncode, out.stderr[-3000:])


def _installer(pattern: str, how: str) -> Path:
    """The newest installer matching ``pattern`` in dist/, made from the current bundle; else skip."""
    found = sorted(DIST.glob(pattern), key=lambda p: p.stat().st_mtime)
    if not found:
        pytest.skip(f"no {pattern} in dist/: build it with scripts/build-app.sh {how}")
    if STAMP.is_file() and found[-1].stat().st_mtime < STAMP.stat().st_mtime:
        pytest.skip(f"{found[-1].name} is older than the bundle: rebuild it with scripts/build-app.sh {how}")
    return found[-1]


def test_entry_quotes_the_program_as_the_spec_says() -> None:
    text = entry_text(['/opt/My Apps/VRAG "x" $HOME `id` 100%\\'])
    exec_line = next(line for line in text.splitlines() if line.startswith("Exec="))
    assert exec_line == 'Exec="/opt/My Apps/VRAG \\\\"x\\\\" \\\\$HOME \\\\`id\\\\` 100%%\\\\\\\\" gui %F'
    assert "Exec=vrag-desktop gui %F" in entry_text(["vrag-desktop"])
    assert "TryExec" not in entry_text(["vrag-desktop"])


@linux
def test_install_desktop_from_the_app_into_a_temporary_home(tmp_path: Path) -> None:
    home = tmp_path / "hôme"
    env = run_env(home)
    env.pop("XDG_DATA_HOME")  # the default: ~/.local/share
    env["PYTHONPATH"] = str(ROOT)
    out = run([sys.executable, "-m", "vrag_desktop", "--install-desktop"], env, timeout=120)
    assert out.returncode == 0, out.stderr
    share = home / ".local" / "share"
    desktop = share / "applications" / f"{ID}.desktop"
    entry = _entry(desktop)
    assert entry["Exec"] == f'"{sys.executable}" "-m" "vrag_desktop" gui %F', entry["Exec"]
    assert entry["Icon"] == ID and entry["StartupWMClass"] == APP and "inode/directory" in entry["MimeType"]
    for size in (16, 48, 256):
        assert (share / "icons" / "hicolor" / f"{size}x{size}" / "apps" / f"{ID}.png").is_file()
    assert (share / "icons" / "hicolor" / "scalable" / "apps" / f"{ID}.svg").is_file()
    _validate(desktop)
    out = run([sys.executable, "-m", "vrag_desktop", "--uninstall-desktop"], env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert not desktop.exists() and not list((share / "icons").rglob(f"{ID}.*"))


def _frozen(test: Callable[..., None]) -> Callable[..., None]:
    for mark in frozen_marks(120):
        test = mark(test)
    return test


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Path]:
    yield from moved_bundle(tmp_path_factory, request)


@_frozen
def test_bundle_installs_its_own_menu_entry(bundle: Path, tmp_path: Path) -> None:
    """No checkout: the bundle (moved to a path with spaces and non-ASCII) writes its entry."""
    home = tmp_path / "home"
    env = run_env(home)
    out = run([str(bundle / APP), "--install-desktop"], env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    desktop = Path(env["XDG_DATA_HOME"]) / "applications" / f"{ID}.desktop"
    entry = _entry(desktop)
    exe = (bundle / APP).resolve()
    assert entry["Exec"] == f'"{exe}" gui %F' and entry["TryExec"] == str(exe), entry["Exec"]
    assert (Path(env["XDG_DATA_HOME"]) / "icons" / "hicolor" / "256x256" / "apps" / f"{ID}.png").is_file()
    _validate(desktop)
    out = run([str(bundle / APP), "--uninstall-desktop"], env, timeout=120)
    assert out.returncode == 0 and not desktop.exists(), out.stderr[-3000:]


def _check_share(share: Path, exec_word: str) -> None:
    desktop = share / "applications" / f"{ID}.desktop"
    entry = _entry(desktop)
    assert entry["Exec"] == f"{exec_word} gui %F" and entry["Icon"] == ID, dict(entry)
    assert (share / "icons" / "hicolor" / "256x256" / "apps" / f"{ID}.png").is_file()
    assert (share / "icons" / "hicolor" / "scalable" / "apps" / f"{ID}.svg").is_file()
    _validate(desktop)


@linux
@pytest.mark.timeout(600)
def test_deb_installs_into_a_temporary_root(tmp_path: Path) -> None:
    if not shutil.which("dpkg-deb"):
        pytest.skip("dpkg-deb is not installed")
    deb = _installer(f"{ID}_*_amd64.deb", "--deb")
    info = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True).stdout
    fields = dict(
        line.split(": ", 1) for line in info.splitlines() if ": " in line and not line.startswith(" ")
    )
    assert fields["Package"] == ID and fields["Architecture"] == "amd64", fields
    assert "libc6 (>= 2.35)" in fields["Depends"] and "libstdc++6" in fields["Depends"], fields
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True, timeout=300)
    _check_share(root / "usr" / "share", ID)
    assert (root / "usr" / "share" / "doc" / ID / "copyright").is_file()
    command = root / "usr" / "bin" / ID
    assert command.is_symlink() and command.resolve() == (root / "opt" / ID / APP).resolve()
    assert not (root / "opt" / ID / ".vrag-build-stamp").exists()
    _window_opens([str(command)], tmp_path)


@linux
@pytest.mark.timeout(600)
def test_appimage_unpacks_and_starts(tmp_path: Path) -> None:
    images = sorted(DIST.glob("VRAG_Desktop-*-x86_64.AppImage"))
    if images:
        image = _installer("VRAG_Desktop-*-x86_64.AppImage", "--appimage")
        out = subprocess.run(
            [str(image), "--appimage-extract"], cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr[-2000:]
    else:
        if not shutil.which("unsquashfs"):
            pytest.skip("unsquashfs is not installed (Debian: squashfs-tools)")
        image = _installer("VRAG_Desktop-*-x86_64.AppImage.squashfs", "--appimage")
        subprocess.run(
            ["unsquashfs", "-q", "-n", "-d", str(tmp_path / "squashfs-root"), str(image)],
            check=True,
            capture_output=True,
            timeout=300,
        )
    appdir = tmp_path / "squashfs-root"
    assert os.access(appdir / "AppRun", os.X_OK)
    assert (appdir / f"{ID}.desktop").is_file() and (appdir / ".DirIcon").resolve().is_file()
    _check_share(appdir / "usr" / "share", ID)
    _window_opens([str(appdir / "AppRun")], tmp_path)
