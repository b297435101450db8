"""Where VRAG Desktop keeps its data: one root, overridable, never inside the user's folders.

:class:`DataLayout` is the only place that spells out what lies under the data directory; every
caller asks it (``DataLayout.resolve(dir).runs``) instead of joining names itself. The rule for
settings (see docs/formats.md): what the command line also reads (endpoint profiles, local vLLM
settings) lives in ``<data>/config``, so one data directory carries everything the app and the CLI
share; only the desktop app's own preferences (which data directory to open, theme, window
layout, Ask defaults) live in the per-user config directory (:mod:`vrag_desktop.core.settings`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
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


@dataclass(frozen=True)
class DataLayout:
    """The data directory's layout. Nothing is created here: each store makes its own folder."""

    root: Path

    @classmethod
    def resolve(cls, override: str | os.PathLike[str] | None = None) -> DataLayout:
        """The layout of the chosen data root (see :func:`resolve_data_dir`)."""
        return cls(resolve_data_dir(override))

    @property
    def corpora(self) -> Path:
        """One folder per corpus (manifest, index, derived images)."""
        return self.root / "corpora"

    @property
    def runs(self) -> Path:
        """Saved agent runs (events, images)."""
        return self.root / "runs"

    @property
    def config(self) -> Path:
        """Settings the app and the CLI share: endpoint profiles, local vLLM settings."""
        return self.root / "config"

    @property
    def logs(self) -> Path:
        """The app's log files."""
        return self.root / "logs"

    @property
    def runtime(self) -> Path:
        """Model-server state: state file, server logs, the vLLM environment."""
        return self.root / "runtime"

    #: Files in :attr:`config` that a new data directory inherits from the previous one.
    SHARED_CONFIG_FILES = ("endpoints.json", "vllm.json")

    def adopt_config(self, previous: DataLayout) -> list[Path]:
        """Copy the shared settings of ``previous`` that this data directory does not have yet.

        Switching data directory must not lose the person's endpoints; a directory that already has
        its own settings keeps them. Returns the files copied.
        """
        copied: list[Path] = []
        if previous.root == self.root:
            return copied
        for name in self.SHARED_CONFIG_FILES:
            src, dst = previous.config / name, self.config / name
            if src.is_file() and not dst.exists():
                self.config.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
                copied.append(dst)
        return copied


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
