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
from dataclasses import dataclass, field
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
    corpora: Path = field(init=False)  # one folder per corpus (manifest, index, derived images)
    runs: Path = field(init=False)  # saved agent runs (events, images)
    config: Path = field(init=False)  # settings the app and the CLI share: endpoints, local vLLM
    logs: Path = field(init=False)  # the app's log files
    runtime: Path = field(init=False)  # model-server state: state file, server logs, vLLM environment
    datasets: Path = field(init=False)  # the app's labelled datasets, one unified JSON file each
    models: Path = field(init=False)  # downloaded models, one plain folder each (core/models/store.py)
    training: Path = field(init=False)  # training runs, one directory each (core/training/rundir.py)
    evaluations: Path = field(init=False)  # evaluations, one resumable folder each (core/eval/store.py)

    def __post_init__(self) -> None:
        names = (
            "corpora",
            "runs",
            "config",
            "logs",
            "runtime",
            "datasets",
            "models",
            "training",
            "evaluations",
        )
        for name in names:
            object.__setattr__(self, name, self.root / name)

    @property
    def trainer_env(self) -> Path:
        """The trainer's own virtualenv (TRL, accelerate; made by ``vrag-desktop train env``)."""
        return self.runtime / "trainer-env"

    @property
    def python(self) -> Path:
        """A Python the app downloaded (uv) to create the environments above, when the machine had none."""
        return self.runtime / "python"

    @classmethod
    def resolve(cls, override: str | os.PathLike[str] | None = None) -> DataLayout:
        """The layout of the chosen data root (see :func:`resolve_data_dir`)."""
        return cls(resolve_data_dir(override))

    #: Files in :attr:`config` that a new data directory inherits from the previous one.
    SHARED_CONFIG_FILES = ("endpoints.json", "vllm.json", "models.json")

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
    """The app's bundled resources: inside the package in an installed wheel
    (``vrag_desktop/resources``, see setup.py), inside the bundle when frozen (either layout), else
    beside the package in a checkout."""
    import sys

    package = Path(__file__).resolve().parents[1]
    frozen = getattr(sys, "_MEIPASS", None)
    places = [Path(frozen) / "resources", Path(frozen) / "vrag_desktop" / "resources"] if frozen else []
    places += [package / "resources", package.parent / "resources"]
    return next((p for p in places if p.is_dir()), places[0])


def sample_corpus_dir() -> Path | None:
    """The small sample corpus indexed on first launch (None if this install has none)."""
    d = resources_dir() / "sample_corpus"
    return d if d.is_dir() else None
