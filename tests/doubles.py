"""Stand-ins for what CI machines lack: an OS keyring, and a small filesystem we can fill or freeze."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import keyring.backend
import keyring.errors
import pytest


class MemoryKeyring(keyring.backend.KeyringBackend):
    """A keyring that lives in a dict: CI has no Secret Service, and tests must never touch a real one."""

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


@contextmanager
def tmpfs(mountpoint: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of ``size`` (e.g. ``64k``, ``1m``) at ``mountpoint``, to fill up or remount read-only.
    Needs permission to mount: the test is skipped where that is not allowed."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a test filesystem here: {proc.stderr.strip() or proc.returncode}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)
