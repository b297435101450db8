"""Application preferences: a small typed record kept as JSON in the per-user config directory.

The rule (docs/formats.md): settings the command line also reads live with the data, in
``<data>/config`` (:class:`~vrag_desktop.core.paths.DataLayout`); only the desktop app's own
preferences live here, outside the data directory, because the data directory is itself one of them.
A damaged file never stops the app: it is moved aside (so nothing the person wrote is lost) and the
defaults are used, with a message saying where the damaged copy went.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from vrag_desktop.core.fsutil import atomic_write_json
from vrag_desktop.core.paths import APP_NAME

CONFIG_DIR_ENV = "VRAG_DESKTOP_CONFIG_DIR"
SETTINGS_FILE = "settings.json"
SCHEMA_VERSION = 1
THEMES = ("system", "light", "dark")
AGENTS = ("vrag", "vimrag")
#: The page-view cache's cap (core/agents/page_views.py) by default, and at most: 1 TiB is a typo.
VIEW_CACHE_MB_DEFAULT = 2048
VIEW_CACHE_MB_MAX = 1024 * 1024


class SettingsError(RuntimeError):
    """Settings cannot be saved (message says why and where)."""


def default_config_dir() -> Path:
    """``$VRAG_DESKTOP_CONFIG_DIR``, else the per-user config directory (``~/.config/vrag-desktop``)."""
    env = os.environ.get(CONFIG_DIR_ENV)
    if env:
        return Path(env).expanduser().resolve()
    import platformdirs

    return platformdirs.user_config_path(APP_NAME, appauthor=False)


@dataclass
class AppSettings:
    """What the person chose. ``data_dir`` None: ``$VRAG_DESKTOP_DATA_DIR`` or the platform default."""

    data_dir: str | None = None
    embedder: str = "minilm"
    theme: str = "system"
    agent: str = "vrag"
    # earlier versions' Ask choice: made the active profile once (qt/current_model.py)
    profile: str | None = None
    top_k: int = 3
    max_steps: int = 10
    thinking: bool = True
    corpora: list[str] | None = None  # corpora to search; None: all
    first_run_done: bool = False
    view_cache_mb: int = VIEW_CACHE_MB_DEFAULT  # kept page views, at most; 0 keeps none
    # the release feed to ask (core/update_check.py); empty: never checked (there is no built-in one)
    update_url: str = ""
    update_check_at_start: bool = False
    schema_version: int = SCHEMA_VERSION

    def validate(self) -> list[str]:
        """Problems, as sentences (empty: fine). Invalid fields are reset by :func:`load_settings`."""
        problems = []
        if self.theme not in THEMES:
            problems.append(f"theme must be one of {', '.join(THEMES)}, not {self.theme!r}")
        if self.agent not in AGENTS:
            problems.append(f"agent must be one of {', '.join(AGENTS)}, not {self.agent!r}")
        if not (isinstance(self.top_k, int) and 1 <= self.top_k <= 50):
            problems.append(f"top_k must be a whole number from 1 to 50, not {self.top_k!r}")
        if not (isinstance(self.max_steps, int) and 1 <= self.max_steps <= 100):
            problems.append(f"max_steps must be a whole number from 1 to 100, not {self.max_steps!r}")
        if not isinstance(self.embedder, str) or not self.embedder.strip():
            problems.append("embedder must be a model name or directory")
        if not _valid_cache_mb(self.view_cache_mb):
            problems.append(
                f"view_cache_mb must be a whole number of megabytes from 0 to {VIEW_CACHE_MB_MAX}, "
                f"not {self.view_cache_mb!r}"
            )
        url_problem = _update_url_problem(self.update_url)
        if url_problem:
            problems.append(url_problem)
        if not isinstance(self.update_check_at_start, bool):
            problems.append(
                f"update_check_at_start must be true or false, not {self.update_check_at_start!r}"
            )
        return problems


def _update_url_problem(value: object) -> str | None:
    """Empty (no check) or an address the update check accepts (its module is loaded only for a
    set URL, so the default start imports nothing more)."""
    if not isinstance(value, str):
        return f"update_url must be an https:// address or empty, not {value!r}"
    if not value.strip():
        return None
    from vrag_desktop.core.update_check import url_problem

    problem = url_problem(value)
    return f"update_url: {problem}" if problem else None


def _valid_cache_mb(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= VIEW_CACHE_MB_MAX


_DEFAULTS = AppSettings()


def _coerce(data: dict[str, Any]) -> tuple[AppSettings, list[str]]:
    """Keep every valid field; reset the others to defaults (with a note each)."""
    notes: list[str] = []
    known = {f.name: f for f in fields(AppSettings)}
    kept: dict[str, Any] = {}
    for key, value in data.items():
        if key in known:
            kept[key] = value
    s = AppSettings(**kept)
    for problem in s.validate():
        notes.append(problem)
    for f in (
        "theme",
        "agent",
        "top_k",
        "max_steps",
        "embedder",
        "view_cache_mb",
        "update_url",
        "update_check_at_start",
    ):
        probe = AppSettings(**{**asdict(_DEFAULTS), f: getattr(s, f)})
        if probe.validate():
            setattr(s, f, getattr(_DEFAULTS, f))
    if not isinstance(s.thinking, bool):
        s.thinking = bool(s.thinking)
    if s.corpora is not None and not (
        isinstance(s.corpora, list) and all(isinstance(c, str) for c in s.corpora)
    ):
        notes.append("corpora must be a list of names; searching all corpora")
        s.corpora = None
    if s.data_dir is not None and not isinstance(s.data_dir, str):
        notes.append("data_dir must be a path; using the default")
        s.data_dir = None
    s.schema_version = SCHEMA_VERSION
    return s, notes


def load_settings(config_dir: Path | None = None) -> tuple[AppSettings, str | None]:
    """Read the settings; never raises. Returns (settings, message for the person or None)."""
    path = (config_dir or default_config_dir()) / SETTINGS_FILE
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return AppSettings(), None
    except OSError as exc:
        return (
            AppSettings(),
            f"Could not read the settings file {path} ({exc.strerror or exc}); using defaults.",
        )
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        backup = path.with_name(f"{path.stem}.damaged-{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}")
        try:
            path.replace(backup)
            where = f"it was kept as {backup}"
        except OSError:
            where = "it could not be moved aside"
        return AppSettings(), f"The settings file {path} was damaged ({exc}); {where}. Using defaults."
    settings, notes = _coerce(data)
    msg = ("Some settings were invalid and were reset: " + "; ".join(notes) + ".") if notes else None
    return settings, msg


def save_settings(settings: AppSettings, config_dir: Path | None = None) -> Path:
    """Write atomically (a crash mid-write leaves the previous file). Raises SettingsError."""
    directory = config_dir or default_config_dir()
    path = directory / SETTINGS_FILE
    try:
        atomic_write_json(path, asdict(settings), mkdir=True)
    except OSError as exc:
        raise SettingsError(f"Could not save settings to {path}: {exc.strerror or exc}") from exc
    return path


def _saved(key: str, config_dir: Path | None) -> object:
    """One saved value, read without :func:`load_settings`' side effect (moving a damaged file aside
    is the app's to do and say): for processes other than the app. None on any problem."""
    try:
        data = json.loads(((config_dir or default_config_dir()) / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get(key) if isinstance(data, dict) else None


def saved_view_cache_mb(config_dir: Path | None = None) -> int:
    """The saved page-view cache cap in MB (the command line keeps views too, in the same cache);
    the default on any problem."""
    value = _saved("view_cache_mb", config_dir)
    return value if isinstance(value, int) and _valid_cache_mb(value) else VIEW_CACHE_MB_DEFAULT


def saved_update_url(config_dir: Path | None = None) -> str:
    """The saved update feed (``vrag-desktop update-check`` reads the app's); empty when none is set.
    A saved address the check refuses comes back as saved, so the check says why it refuses it."""
    value = _saved("update_url", config_dir)
    return value.strip() if isinstance(value, str) else ""
