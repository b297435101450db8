"""The app package as an engine environment installs it: from a local path, never by name.

Why: ``vrag-desktop`` and ``vrag-desktop-trainer`` are not names we hold on PyPI. An install command
that asked an index for them (``vrag-desktop==0.1.0``) would install whatever anyone published
under that name (dependency confusion). So every environment gets the app from a checkout, from
the frozen app's wheels, or, for an app installed from a wheel, from a wheel packed here from the
installed files themselves (:func:`pack_installed`); :func:`local_package_arg` is the one check.

Headless: the trainer's environment needs the app's core (agents, training data, the HTTP search
client), not its window, OCR or plots. Extras can only add, so the app keeps one complete list of
requirements (what ``pip install vrag-desktop`` gives people) and an engine environment installs
the app with ``--no-deps`` plus :func:`headless_requirements`: that list less :data:`GUI_ONLY`.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata as md
import io
import re
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "APP_DIST",
    "GUI_ONLY",
    "OUR_DISTRIBUTIONS",
    "NamedByIndex",
    "app_requirements",
    "headless_requirements",
    "local_package_arg",
    "names_our_package",
    "norm",
    "pack_installed",
    "packed_wheel_name",
]

APP_DIST = "vrag-desktop"
TRAINER_DIST = "vrag-desktop-trainer"
#: Distributions only we publish (as files): an install must name them by a local path.
OUR_DISTRIBUTIONS = frozenset({APP_DIST, TRAINER_DIST})
#: The app's requirements an engine environment never imports: the Qt window and its plots, OCR
#: (rapidocr and its onnxruntime backend run only while indexing, in the app). The trainer reaches
#: the corpus through the app's search server (``HttpSearcher``), so it needs none of them;
#: tests/test_app_package.py imports every app module the trainer imports with these blocked.
GUI_ONLY = frozenset({"pyside6-essentials", "shiboken6", "qasync", "pyqtgraph", "rapidocr", "onnxruntime"})


class NamedByIndex(ValueError):
    """An install argument would fetch one of our packages from an index by name."""


def norm(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(spec: str) -> str:
    return norm(re.split(r"[\s<>=!~;\[(@]", spec.strip(), maxsplit=1)[0])


def names_our_package(arg: str) -> bool:
    """True if the install argument ``arg`` asks an index for one of our distributions: a bare
    requirement (``vrag-desktop``, ``vrag_desktop==0.1``, ``vrag-desktop[x]>=0``) rather than a
    path to a wheel or a source folder."""
    if arg.startswith("-") or "/" in arg or "\\" in arg or arg.endswith(".whl"):
        return False
    return _requirement_name(arg) in OUR_DISTRIBUTIONS


def local_package_arg(source: str | Path) -> str:
    """``source`` as an install argument, refusing a requirement that names our package."""
    text = str(source)
    if names_our_package(text) or not Path(text).exists():
        raise NamedByIndex(
            f"{text!r} is not a local wheel or folder: VRAG Desktop's own packages are installed only "
            "from the files this installation carries, never looked up by name on a package index"
        )
    return text


def app_requirements(checkout: Path | None = None) -> list[str]:
    """The app's declared requirements: a checkout's pyproject.toml (its editable install's metadata
    is only as new as the last ``pip install -e``), else the running app's own metadata (the
    installed wheel's, the frozen app's copy)."""
    if sys.version_info >= (3, 11) and checkout is not None and (checkout / "pyproject.toml").is_file():
        import tomllib  # (Python 3.10 reads the metadata)

        with (checkout / "pyproject.toml").open("rb") as f:
            return list(tomllib.load(f)["project"]["dependencies"])
    return list(md.requires(APP_DIST) or [])


def headless_requirements(requires: Iterable[str] | None = None) -> tuple[str, ...]:
    """The app's run-time requirements without :data:`GUI_ONLY` (and without extras' ones), from
    ``requires`` or :func:`app_requirements`."""
    if requires is None:
        requires = app_requirements()
    out = []
    for spec in requires:
        if "extra ==" in spec.replace('"', "").replace("'", "") or _requirement_name(spec) in GUI_ONLY:
            continue
        out.append(spec.strip())
    return tuple(out)


def packed_wheel_name(dist: str, version: str) -> str:
    return f"{norm(dist).replace('-', '_')}-{version}-py3-none-any.whl"


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def pack_installed(dist_name: str, out_dir: str | Path) -> Path:
    """A wheel of the installed distribution ``dist_name``, packed from the files its RECORD lists
    (scripts and byte code left out: pip makes them again), with a fresh RECORD. Refuses an
    editable install (its RECORD names a finder, not the package). Returns the wheel's path."""
    dist = md.distribution(dist_name)
    files = [f for f in dist.files or [] if not str(f).startswith("..") and "__pycache__" not in str(f)]
    if dist.read_text("RECORD") is None or not any(str(f).endswith(".py") and "/" in str(f) for f in files):
        raise NamedByIndex(
            f"{dist_name} is not installed here from a wheel (an editable install or a source "
            "checkout): nothing to pack"
        )
    name, version = dist.metadata["Name"], dist.version
    info = f"{norm(name).replace('-', '_')}-{version}.dist-info"
    out = Path(out_dir) / packed_wheel_name(name, version)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, str, str]] = []
    tmp = out.with_suffix(".part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in files:
            rel = str(f).replace("\\", "/")
            if rel.endswith(("/RECORD", "/INSTALLER", "/REQUESTED", "/direct_url.json")):
                continue
            data = Path(str(f.locate())).read_bytes()
            arc = f"{info}/{rel.split('/', 1)[1]}" if rel.split("/", 1)[0].endswith(".dist-info") else rel
            zf.writestr(arc, data)
            rows.append((arc, _record_hash(data), str(len(data))))
        record = io.StringIO()
        csv.writer(record, lineterminator="\n").writerows([*rows, (f"{info}/RECORD", "", "")])
        zf.writestr(f"{info}/RECORD", record.getvalue())
    tmp.replace(out)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m vrag_desktop.core.runtime.app_package DIST OUT_DIR``: pack an installed wheel."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m vrag_desktop.core.runtime.app_package DIST OUT_DIR", file=sys.stderr)
        return 2
    try:
        print(pack_installed(args[0], args[1]))
    except (md.PackageNotFoundError, NamedByIndex, OSError) as exc:
        print(f"error: cannot pack {args[0]}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
