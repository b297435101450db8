"""Fixtures for the Qt tests: offscreen, private data/config directories, an in-memory keyring.

The offscreen platform is chosen in ``tests/conftest.py`` before any QApplication exists.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keyring
import keyring.backend
import keyring.errors
import pytest


class MemoryKeyring(keyring.backend.KeyringBackend):
    """The OS keyring's stand-in: CI has no Secret Service; tests must never touch the real one."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.store.pop((service, username), None) is None:
            raise keyring.errors.PasswordDeleteError(username)


@pytest.fixture(autouse=True)
def qt_isolation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryKeyring]:
    """Private config/data dirs and keyring for every Qt test; a clean error sink."""
    monkeypatch.setenv("VRAG_DESKTOP_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("VRAG_DESKTOP_DATA_DIR", str(tmp_path / "data"))
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    from vrag_desktop.qt.errors import error_sink

    error_sink().clear()
    yield backend
    keyring.set_keyring(previous)


@pytest.fixture
def ctx(tmp_path: Path) -> Any:
    """An AppContext on private directories."""
    from vrag_desktop.qt.context import AppContext

    return AppContext.for_dirs(data_dir=tmp_path / "data", config_dir=tmp_path / "cfg")


@pytest.fixture
def reports(qtbot: Any) -> list[tuple[str, str, str]]:
    """Everything reported to the error sink during the test, as (level, title, message)."""
    from vrag_desktop.qt.errors import error_sink

    got: list[tuple[str, str, str]] = []
    error_sink().reported.connect(lambda *a: got.append(a))
    return got
