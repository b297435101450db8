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
