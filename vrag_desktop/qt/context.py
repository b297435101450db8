"""What every panel shares: where data and config live, the settings, the core stores, and the one
current model (:class:`~vrag_desktop.qt.current_model.CurrentModel`, whose ``changed`` signal every
panel showing or using the model follows).

The stores are created on first use so the window opens before anything touches the disk, and a
data directory that cannot be created is reported once, when a panel needs it, not at start-up.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from vrag_desktop.core.long_lived import long_lived
from vrag_desktop.core.paths import DataLayout, resolve_data_dir
from vrag_desktop.core.settings import AppSettings, default_config_dir, load_settings, save_settings

_EMBEDDER_LOCK = threading.Lock()
_T = TypeVar("_T")


if TYPE_CHECKING:
    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.datasets.store import DatasetStore
    from vrag_desktop.core.endpoints.profiles import ProfileStore
    from vrag_desktop.core.run.store import RunStore
    from vrag_desktop.qt.current_model import CurrentModel


@dataclass
class AppContext:
    data_dir: Path
    config_dir: Path
    settings: AppSettings
    settings_message: str | None = None  # why the settings file was reset, if it was
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)
    _current_model: Any = field(default=None, repr=False)  # outlives data directory changes
    #: Set by the main window once the panels it makes after its first paint are made: the warm-up
    #: starts then (see :meth:`start_warmup`).
    window_settled: threading.Event = field(default_factory=threading.Event, repr=False)

    @classmethod
    def load(cls, data_dir: str | Path | None = None, config_dir: str | Path | None = None) -> AppContext:
        """From the settings file; an explicit ``data_dir`` (``--data-dir``) wins over the setting."""
        cfg = Path(config_dir).expanduser().resolve() if config_dir else default_config_dir()
        settings, message = load_settings(cfg)
        root = resolve_data_dir(data_dir or settings.data_dir)
        return cls(data_dir=root, config_dir=cfg, settings=settings, settings_message=message)

    @classmethod
    def for_dirs(cls, data_dir: str | Path, config_dir: str | Path) -> AppContext:
        """For tests and embedding: explicit directories, settings read from ``config_dir``."""
        return cls.load(data_dir=data_dir, config_dir=config_dir)

    @property
    def layout(self) -> DataLayout:
        """What lies where under the data directory."""
        return DataLayout(self.data_dir)

    # ---- stores (lazy)
    def _store(self, key: str, make: Callable[[], _T]) -> _T:
        """The store cached under ``key``, made by ``make()`` on first use (again after a data
        directory change)."""
        if key not in self._cache:
            self._cache[key] = make()
        return cast("_T", self._cache[key])

    @property
    def library(self) -> Library:
        from vrag_desktop.core.corpus.library import Library

        return self._store("library", lambda: Library(self.data_dir))

    @property
    def runs(self) -> RunStore:
        from vrag_desktop.core.run.store import RunStore

        return self._store("runs", lambda: RunStore(self.layout.runs))

    @property
    def datasets(self) -> DatasetStore:
        """The app's datasets (one store, so the dialog and the dock serialise their writes)."""
        from vrag_desktop.core.datasets.store import DatasetStore

        return self._store("datasets", lambda: DatasetStore(self.layout.datasets))

    @property
    def profiles(self) -> ProfileStore:
        from vrag_desktop.core.endpoints.profiles import ProfileStore

        return self._store("profiles", lambda: ProfileStore(self.layout.config))

    @property
    def current_model(self) -> CurrentModel:
        """The one current model the panels share (made on first use, on the GUI thread)."""
        if self._current_model is None:
            from vrag_desktop.qt.current_model import CurrentModel

            self._current_model = CurrentModel(self)
        return cast("CurrentModel", self._current_model)

    def embedder(self, spec: str | None = None) -> Any:
        """The embedder ``spec`` (default: the one named in the settings), loaded once and kept until
        another is asked for (call off the GUI thread: the first call imports torch and loads it)."""
        with _EMBEDDER_LOCK:
            spec = spec or self.settings.embedder
            cached = self._cache.get("embedder")
            if cached is None or cached[0] != spec:
                from vrag_desktop.core.embedders import create_embedder

                with long_lived():
                    self._cache["embedder"] = (spec, create_embedder(spec, data_dir=self.data_dir))
            return self._cache["embedder"][1]

    def start_warmup(self) -> threading.Thread | None:
        """Import torch & co. in the background (:mod:`~vrag_desktop.core.warmup`), then load the
        embedder when it is the small default, so the first indexing or question does not load it
        next to the window's work."""
        from vrag_desktop.core import warmup

        # after the window's deferred panels (torch's start holds the GIL), or 10 s without a window
        return warmup.start(delay=0.2, then=self.preload_embedder, after=self.window_settled)

    def preload_embedder(self) -> None:
        """Load the settings' embedder now if it loads quickly (see ``loads_quickly``); a large one
        waits until a job or a search needs it."""
        from vrag_desktop.core.embedders import loads_quickly

        if loads_quickly(self.settings.embedder):
            self.embedder()

    @property
    def log_dir(self) -> Path:
        return self.layout.logs

    def save(self) -> Path:
        """Persist the settings (raises SettingsError with a clear message)."""
        return save_settings(self.settings, self.config_dir)

    def set_data_dir(self, path: str | Path | None) -> None:
        """Switch data directory: stores are reopened there on next use. Endpoint profiles and vLLM
        settings come along when the new directory has none (nothing the person set is lost)."""
        previous = self.layout
        self.settings.data_dir = str(path) if path else None
        self.data_dir = resolve_data_dir(path)
        with contextlib.suppress(OSError):  # an unusable directory is reported when a store opens it
            self.layout.adopt_config(previous)
        embedder = self._cache.get("embedder")
        self._cache.clear()
        if embedder is not None:  # the model does not depend on where data lives
            self._cache["embedder"] = embedder
        if self._current_model is not None:  # the new directory's profiles say which model is current
            self._current_model.sync()
