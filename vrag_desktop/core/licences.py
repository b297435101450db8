"""What VRAG Desktop is licensed under, said once, and where this copy keeps its licence files.

The decision (NOTICE says it in full): the project's own code is Apache-2.0. It needs PyMuPDF,
which is AGPL-3.0 (or commercial from Artifex), so the program as it runs — the app together with
PyMuPDF — is a combined work that may be conveyed only under the AGPL-3.0; Apache-2.0 code may be
part of an AGPL-3.0 work (the reverse is not so). The double-click app and its installers carry
PyMuPDF and are therefore distributed under the AGPL-3.0; the wheel and the source carry only our
code and stay Apache-2.0. Qt and PySide6 are LGPL-3.0, shipped unmodified as replaceable shared
libraries.
"""

from __future__ import annotations

import importlib.metadata as md
import sys
from pathlib import Path

__all__ = ["LICENCE", "NOTICES", "STATEMENT", "licence_file"]

LICENCE = "Apache-2.0"
NOTICES = "THIRD_PARTY_NOTICES.md"
#: One paragraph for the About box and ``--version``-like places.
STATEMENT = (
    "VRAG Desktop's own code is licensed under the Apache License 2.0. It runs with PyMuPDF, which is "
    "licensed under the GNU AGPL v3.0 (or commercially by Artifex), so the app together with PyMuPDF — "
    "the double-click app and its installers — is distributed under the GNU AGPL v3.0: you may use, "
    "study, change and share it, and whoever passes it on must offer its source. Qt and PySide6 are "
    "LGPL-3.0. Every other package's licence is in the third-party notices."
)


def licence_file(name: str) -> Path | None:
    """``name`` (LICENSE, NOTICE, THIRD_PARTY_NOTICES.md, licenses/AGPL-3.0.txt…) as this copy of
    the app has it: the frozen app's folder, the checkout, or the installed wheel's dist-info
    (``licenses/``). None when this copy does not carry it."""
    meipass = getattr(sys, "_MEIPASS", None)
    if getattr(sys, "frozen", False) and meipass:
        path = Path(meipass) / name
        return path if path.is_file() else None
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / name).is_file():
        return root / name
    try:
        files = md.distribution("vrag-desktop").files or []
    except md.PackageNotFoundError:
        return None
    for f in files:
        if str(f).replace("\\", "/").endswith(f".dist-info/licenses/{name}"):
            path = Path(str(f.locate()))
            return path if path.is_file() else None
    return None
