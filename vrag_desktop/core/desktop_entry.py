"""The freedesktop.org menu entry (``vrag-desktop.desktop``) and icons, in one place.

Why one module: the entry is written by the app itself (``vrag-desktop --install-desktop``, so a
bundle needs no checkout), by scripts/install-desktop.sh, and into the .deb and the AppImage that
scripts/build-app.sh makes; each used to need its own copy of the text and its quoting rules.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "APP_ID",
    "ICON_SIZES",
    "data_home",
    "entry_text",
    "install",
    "install_icons",
    "program_argv",
    "uninstall",
]

APP_ID = "vrag-desktop"
APP_NAME = "VRAG Desktop"
ICON_SIZES = (16, 32, 48, 64, 128, 256)
MIME_TYPES = (
    "application/pdf;image/png;image/jpeg;image/webp;image/tiff;image/gif;image/bmp;video/mp4;"
    "video/x-matroska;video/webm;video/quicktime;text/plain;text/markdown;inode/directory;"
)


def quote_exec_arg(arg: str) -> str:
    """One ``Exec`` argument, quoted as the Desktop Entry spec says (``\\ " ` $`` escaped inside
    double quotes, then backslashes doubled for the string value; ``%`` doubled)."""
    inner = "".join("\\" + c if c in '\\"`$' else c for c in arg)
    return '"' + inner.replace("\\", "\\\\").replace("%", "%%") + '"'


def entry_text(program: Sequence[str], *, try_exec: str | None = None) -> str:
    """The .desktop file that runs ``program`` (argv; the first item quoted if it needs it) with
    ``gui %F``: files a file manager opens with it go to a corpus."""
    head, *rest = program
    words = [head if head.replace("-", "").replace("_", "").isalnum() else quote_exec_arg(head)]
    words += [quote_exec_arg(a) for a in rest]
    lines = [
        "[Desktop Entry]",
        "Type=Application",
        "Version=1.5",
        f"Name={APP_NAME}",
        "GenericName=Document question answering",
        "Comment=Answer questions from your own documents, images and videos, offline",
        f"Exec={' '.join(words)} gui %F",
        *([f"TryExec={try_exec}"] if try_exec else []),
        f"Icon={APP_ID}",
        "Terminal=false",
        "Categories=Office;Utility;",
        "Keywords=RAG;search;PDF;OCR;documents;questions;",
        f"MimeType={MIME_TYPES}",
        "StartupNotify=true",
        f"StartupWMClass={APP_NAME}",
        "SingleMainWindow=true",
    ]
    return "\n".join(lines) + "\n"


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")


def program_argv() -> list[str]:
    """How this app is started again: the bundle's executable, an installed ``vrag-desktop``
    script, or this interpreter with ``-m vrag_desktop``."""
    if getattr(sys, "frozen", False):
        return [str(Path(sys.executable).resolve())]
    script = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    if script is not None and script.name == APP_ID and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "vrag_desktop"]


def _icons_source() -> Path:
    from vrag_desktop.core.paths import resources_dir

    return resources_dir() / "icons"


def install_icons(hicolor: Path, source: Path | None = None) -> list[Path]:
    """The icons in ``hicolor`` (``…/icons/hicolor``): the SVG and each PNG size."""
    src = source or _icons_source()
    pairs = [(src / f"{APP_ID}.svg", hicolor / "scalable" / "apps" / f"{APP_ID}.svg")]
    pairs += [
        (src / f"{APP_ID}-{s}.png", hicolor / f"{s}x{s}" / "apps" / f"{APP_ID}.png") for s in ICON_SIZES
    ]
    missing = [str(a) for a, _ in pairs if not a.is_file()]
    if missing:
        raise FileNotFoundError(f"The app's icons are missing: {', '.join(missing)}")
    for a, b in pairs:
        b.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(a, b)
    return [b for _, b in pairs]


def _refresh(data: Path) -> None:
    """Tell the desktop (where its tools are installed); nothing depends on it."""
    for argv in (
        ["update-desktop-database", "-q", str(data / "applications")],
        ["gtk-update-icon-cache", "-q", "-t", str(data / "icons" / "hicolor")],
    ):
        if shutil.which(argv[0]):
            subprocess.run(argv, capture_output=True, check=False, timeout=60)


def install(program: Sequence[str] | None = None, data: Path | None = None) -> Path:
    """Write the entry and the icons under ``data`` (``$XDG_DATA_HOME``, ``~/.local/share``);
    returns the .desktop file. Written to a temporary name first, so a menu never sees half."""
    data = data or data_home()
    argv = list(program or program_argv())
    apps = data / "applications"
    apps.mkdir(parents=True, exist_ok=True)
    install_icons(data / "icons" / "hicolor")
    desktop = apps / f"{APP_ID}.desktop"
    tmp = apps / f".{APP_ID}.desktop.tmp"
    try_exec = argv[0] if len(argv) == 1 else None
    tmp.write_text(entry_text(argv, try_exec=try_exec), encoding="utf-8")
    tmp.chmod(0o644)
    tmp.replace(desktop)
    _refresh(data)
    return desktop


def uninstall(data: Path | None = None) -> list[Path]:
    """Remove what :func:`install` wrote; returns the files removed."""
    data = data or data_home()
    hicolor = data / "icons" / "hicolor"
    paths = [data / "applications" / f"{APP_ID}.desktop", hicolor / "scalable" / "apps" / f"{APP_ID}.svg"]
    paths += [hicolor / f"{s}x{s}" / "apps" / f"{APP_ID}.png" for s in ICON_SIZES]
    removed = [p for p in paths if p.is_file()]
    for p in removed:
        p.unlink()
    _refresh(data)
    return removed


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m vrag_desktop.core.desktop_entry``: install/uninstall for the user, or write the
    entry alone (``--entry FILE --exec CMD``: what build-app.sh puts in the .deb and AppImage)."""
    p = argparse.ArgumentParser(prog="python -m vrag_desktop.core.desktop_entry")
    p.add_argument("--exec", dest="program", help="the command the entry runs (default: this app)")
    p.add_argument("--uninstall", action="store_true")
    p.add_argument("--entry", metavar="FILE", help="only write the .desktop file to FILE")
    p.add_argument("--icons", metavar="HICOLOR", help="only copy the icons into HICOLOR")
    args = p.parse_args(argv)
    program = [args.program] if args.program else program_argv()
    if args.entry or args.icons:
        if args.entry:
            Path(args.entry).write_text(entry_text(program), encoding="utf-8")
        if args.icons:
            install_icons(Path(args.icons))
        return 0
    if args.uninstall:
        gone = uninstall()
        print(f"Removed {len(gone)} file(s) of the menu entry." if gone else "No menu entry was installed.")
        return 0
    print(f"Installed {install(program)} (runs: {' '.join(program)}).")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
