"""Where VRAG Desktop keeps its data: one root, overridable, never inside the user's folders."""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "vrag-desktop"
DATA_DIR_ENV = "VRAG_DESKTOP_DATA_DIR"


def default_data_dir() -> Path:
    """The per-user data directory (``~/.local/share/vrag-desktop`` on Linux)."""
    import platformdirs

    return platformdirs.user_data_path(APP_NAME, appauthor=False)


def resolve_data_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """Pick the data root: explicit override, then ``$VRAG_DESKTOP_DATA_DIR``, then the platform default."""
    chosen = override or os.environ.get(DATA_DIR_ENV) or default_data_dir()
    return Path(chosen).expanduser().resolve()


def resources_dir() -> Path:
    """The app's bundled resources: beside the package in a checkout, inside the bundle when frozen."""
    import sys

    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        return Path(frozen) / "resources"
    return Path(__file__).resolve().parents[2] / "resources"


def sample_corpus_dir() -> Path | None:
    """The small sample corpus indexed on first launch (None if this install has none)."""
    d = resources_dir() / "sample_corpus"
    return d if d.is_dir() else None
