"""Desktop integration (Linux): scripts/install-desktop.sh writes a valid .desktop entry (quoted
Exec for paths with spaces and non-ASCII characters, %F for opened files, the app's WM class) and
the icons, and --uninstall removes them; the app sets its name, desktop file name and icon."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "install-desktop.sh"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="freedesktop.org entries: Linux")


def _install(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_DATA_HOME": str(data)}
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)


def test_install_and_uninstall(tmp_path: Path) -> None:
    bundle = tmp_path / "Apps dir" / "VRAG Désktop"
    bundle.mkdir(parents=True)
    exe = bundle / "VRAG Desktop"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    data = tmp_path / "share"
    out = _install(data, "--bundle", str(bundle))
    assert out.returncode == 0, out.stderr
    desktop = data / "applications" / "vrag-desktop.desktop"
    cp = configparser.RawConfigParser(interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]
    cp.read(desktop, encoding="utf-8")
    entry = cp["Desktop Entry"]
    assert entry["Name"] == "VRAG Desktop" and entry["Type"] == "Application"
    assert entry["Exec"] == f'"{exe}" gui %F'
    assert entry["TryExec"] == str(exe)
    assert entry["Icon"] == "vrag-desktop" and entry["StartupWMClass"] == "VRAG Desktop"
    assert "inode/directory" in entry["MimeType"] and "application/pdf" in entry["MimeType"]
    for size in (16, 48, 256):
        assert (data / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "vrag-desktop.png").is_file()
    assert (data / "icons" / "hicolor" / "scalable" / "apps" / "vrag-desktop.svg").is_file()
    if shutil.which("desktop-file-validate"):
        check = subprocess.run(["desktop-file-validate", str(desktop)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr

    out = _install(data, "--uninstall")
    assert out.returncode == 0, out.stderr
    assert not desktop.exists()
    assert not (data / "icons" / "hicolor" / "48x48" / "apps" / "vrag-desktop.png").exists()


def test_missing_bundle_is_explained(tmp_path: Path) -> None:
    out = _install(tmp_path / "share", "--bundle", str(tmp_path))
    assert out.returncode == 1 and "build-app.sh" in out.stderr


def test_the_app_names_itself_and_has_an_icon(qapp) -> None:
    from vrag_desktop.qt.app import set_window_icon

    set_window_icon(qapp)
    assert not qapp.windowIcon().isNull()
    assert qapp.windowIcon().availableSizes()
