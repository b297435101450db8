"""pyinstaller.spec keeps Qt plugins by role, named as Qt names them on every platform: on this
machine it keeps exactly the plugins the Linux bundle always had, and the same table keeps the
Windows and macOS window-system plugins (a build there is not precluded by Linux file names)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
NAMES = {"ALL", "QT_PLUGIN_ROLES", "QT_PLUGINS_KEPT", "_qt_plugin_wanted", "_qt_plugin_name"}


def _spec_parts() -> dict[str, Any]:
    """The spec's plugin table and filter, run on their own (the rest of the spec needs PyInstaller)."""
    tree = ast.parse((ROOT / "pyinstaller.spec").read_text(encoding="utf-8"))
    keep: list[ast.stmt] = []
    for node in tree.body:
        targets = (
            {t.id for t in node.targets if isinstance(t, ast.Name)}
            if isinstance(node, ast.Assign)
            else {node.name}
            if isinstance(node, ast.FunctionDef)
            else {node.target.id}
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name)
            else set()
        )
        if targets & NAMES or (isinstance(node, ast.For) and "QT_PLUGIN_ROLES" in ast.unparse(node.iter)):
            keep.append(node)
    ns: dict[str, Any] = {"Path": Path}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "pyinstaller.spec", "exec"), ns)
    return ns


#: What the Linux bundle kept before the table was by role (its Linux file names; None: the whole folder).
BEFORE = {
    "platforms": {"libqxcb.so", "libqwayland.so", "libqoffscreen.so", "libqminimal.so"},
    "xcbglintegrations": None,
    "platforminputcontexts": {
        "libcomposeplatforminputcontextplugin.so",
        "libibusplatforminputcontextplugin.so",
    },
    "platformthemes": None,
    "iconengines": None,
    "imageformats": {"libqjpeg.so", "libqgif.so", "libqico.so", "libqsvg.so", "libqtiff.so", "libqwebp.so"},
    "wayland-decoration-client": None,
    "wayland-graphics-integration-client": {"libqt-plugin-wayland-egl.so", "libshm-emulation-server.so"},
    "wayland-shell-integration": {"libxdg-shell.so"},
}


def test_on_linux_it_keeps_exactly_the_plugins_the_bundle_had() -> None:
    pyside = pytest.importorskip("PySide6")
    spec = _spec_parts()
    plugins = Path(pyside.__file__).parent / "Qt" / "plugins"
    files = [f for f in plugins.rglob("*") if f.is_file() and len(f.relative_to(plugins).parts) == 2]
    if not any(f.suffix == ".so" for f in files):
        pytest.skip("not a Linux PySide6")
    kept = {
        f
        for f in files
        if spec["_qt_plugin_wanted"](str(Path("PySide6", "Qt", "plugins", *f.relative_to(plugins).parts)))
    }
    before = {
        f
        for f in files
        if f.parent.name in BEFORE and (BEFORE[f.parent.name] is None or f.name in BEFORE[f.parent.name])  # type: ignore[operator]
    }
    assert kept == before, (sorted(map(str, kept - before)), sorted(map(str, before - kept)))
    assert any(f.name == "libqxcb.so" for f in kept) and not any(f.name == "libqvnc.so" for f in kept)


@pytest.mark.parametrize(
    ("dest", "wanted"),
    [
        ("PySide6/Qt/plugins/platforms/qwindows.dll", True),
        ("PySide6/Qt/plugins/platforms/libqcocoa.dylib", True),
        ("PySide6/Qt/plugins/styles/qmodernwindowsstyle.dll", True),
        ("PySide6/Qt/plugins/styles/libqmacstyle.dylib", True),
        ("PySide6/Qt/plugins/imageformats/qjpeg.dll", True),
        ("PySide6/Qt/plugins/imageformats/libqjpeg.dylib", True),
        ("PySide6/Qt/plugins/platforms/qdirect2d.dll", False),
        ("PySide6/Qt/plugins/imageformats/qpdf.dll", False),
        ("PySide6/Qt/plugins/sqldrivers/qsqlite.dll", False),
        ("PySide6/Qt/lib/libQt6Core.so.6", True),  # not a plugin: the filter leaves it alone
    ],
)
def test_the_same_table_serves_windows_and_macos(dest: str, wanted: bool) -> None:
    assert _spec_parts()["_qt_plugin_wanted"](dest) is wanted
