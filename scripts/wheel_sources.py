#!/usr/bin/env python3
"""The files the app's wheel is built from, in one place: scripts/build-app.sh copies them to build
the wheel the bundle ships (and fingerprints them, so a change rebuilds it), and tests/test_packaging.py
builds its wheel from the same copy. The licence files are among them: pyproject.toml's
``license-files`` puts LICENSE, NOTICE, THIRD_PARTY_NOTICES.md and licenses/*.txt in the wheel's
dist-info/licenses/ only when the copy has them (setuptools skips a missing one).

    python scripts/wheel_sources.py --list      # the paths, one a line (relative to the checkout)
    python scripts/wheel_sources.py DEST        # copy them into the new folder DEST
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Files and folders (relative to the checkout) the wheel is built from.
SOURCES = (
    "pyproject.toml",
    "setup.py",
    "MANIFEST.in",
    "README.md",
    "LICENSE",
    "NOTICE",
    "THIRD_PARTY_NOTICES.md",
    "licenses",
    "vrag_desktop",
    "resources",
    "trainer/pyproject.toml",
    "trainer/vrag_trainer",
)
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


def copy_sources(dest: Path, root: Path = ROOT) -> None:
    """Copy :data:`SOURCES` from ``root`` into ``dest`` (which must not exist yet)."""
    missing = [name for name in SOURCES if not (root / name).exists()]
    if missing:
        raise SystemExit(f"wheel_sources.py: missing from {root}: {', '.join(missing)}")
    dest.mkdir(parents=True)
    for name in SOURCES:
        src, out = root / name, dest / name
        out.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, out, ignore=_SKIP)
        else:
            shutil.copy2(src, out)


def main(argv: list[str]) -> int:
    if argv == ["--list"]:
        print("\n".join(SOURCES))
        return 0
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    copy_sources(Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
