"""One running app per user and data directory: a second launch raises the first window and hands
it the files and folders it was given (they are added to a corpus there), then exits.

The first instance holds a lock file (``QLockFile``: a crashed instance's stale lock is taken over)
and listens on a local socket (``QLocalServer``). A later launch that cannot take the lock connects
to that socket, sends one JSON line ``{"paths": [...]}`` and waits for the reply line ``ok``.
Both names derive from the user and the data directory, so two data directories can run side by
side and a second user never reaches the first one's window.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_MS = 2000
#: How long a second launch keeps trying while the first one is still starting (lock held, no server yet).
START_WAIT_S = 15.0


def instance_key(data_dir: str | os.PathLike[str]) -> str:
    """A short name for this user and data directory (socket and lock names)."""
    try:
        user = getpass.getuser()
    except Exception:
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    digest = hashlib.sha256(f"{user}\0{os.path.realpath(os.fspath(data_dir))}".encode()).hexdigest()[:16]
    return f"vrag-desktop-{digest}"


def lock_path(key: str) -> Path:
    """Where the lock lives: the per-user runtime directory, else the temp directory."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if not base or not os.path.isdir(base) or not os.access(base, os.W_OK):
        base = tempfile.gettempdir()
    return Path(base) / f"{key}.lock"


class SingleInstance(QObject):
    """Primary: owns the lock and the server; ``received(paths)`` fires for each later launch."""

    received = Signal(list)

    def __init__(self, key: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.key = key
        self._lock = QLockFile(str(lock_path(key)))
        self._lock.setStaleLockTime(0)  # stale only when its process is gone (checked by pid)
        self._server: QLocalServer | None = None

    def try_primary(self) -> bool:
        """Take the lock and listen; False if another instance holds it."""
        if not self._lock.tryLock(0):
            return False
        QLocalServer.removeServer(self.key)  # a socket file left by a crashed instance
        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        if not server.listen(self.key):
            log.warning("single instance: cannot listen on %s: %s", self.key, server.errorString())
            return True  # still the primary; later launches then open their own window
        server.newConnection.connect(self._accept)
        self._server = server
        return True

    def _accept(self) -> None:
        assert self._server is not None
        while (sock := self._server.nextPendingConnection()) is not None:
            buf = bytearray()

            def ready(sock: QLocalSocket = sock, buf: bytearray = buf) -> None:
                buf.extend(bytes(sock.readAll().data()))
                if b"\n" not in buf:
                    return
                line = bytes(buf).split(b"\n", 1)[0]
                try:
                    msg = json.loads(line.decode("utf-8"))
                    paths = [str(p) for p in msg.get("paths", [])]
                except Exception as exc:
                    log.warning("single instance: bad message: %s", exc)
                    paths = []
                sock.write(b"ok\n")
                sock.waitForBytesWritten(1000)
                sock.disconnectFromServer()
                self.received.emit(paths)

            sock.readyRead.connect(ready)
            sock.disconnected.connect(sock.deleteLater)
            if sock.bytesAvailable():
                ready()

    def release(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self._lock.unlock()


def send_to_primary(key: str, paths: Sequence[str], timeout_ms: int = CONNECT_TIMEOUT_MS) -> bool:
    """Hand ``paths`` to the running instance (it raises its window); True once it acknowledged."""
    sock = QLocalSocket()
    sock.connectToServer(key)
    if not sock.waitForConnected(timeout_ms):
        return False
    sock.write((json.dumps({"paths": list(paths)}) + "\n").encode("utf-8"))
    sock.flush()
    if sock.bytesToWrite() > 0 and not sock.waitForBytesWritten(timeout_ms):
        return False
    reply = bytearray()
    while True:  # the reply may already be buffered (read while the message was being written)
        reply.extend(bytes(sock.readAll().data()))
        if b"\n" in reply or not sock.waitForReadyRead(timeout_ms):
            reply.extend(bytes(sock.readAll().data()))
            break
    sock.disconnectFromServer()
    return bytes(reply).startswith(b"ok")


def claim_or_forward(
    key: str,
    paths: Sequence[str],
    *,
    wait_s: float = START_WAIT_S,
    sleep: Callable[[float], None] | None = None,
) -> SingleInstance | None:
    """Become the primary instance (returned), or forward ``paths`` to it and return None.

    A lock held by an instance that is still starting has no server yet: retried for ``wait_s``.
    If the lock is held but nobody ever answers, this instance runs anyway (returned, not primary:
    it has no server) rather than refusing to start.
    """
    import time

    sleep = sleep or time.sleep
    guard = SingleInstance(key)
    deadline = time.monotonic() + wait_s
    while True:
        if guard.try_primary():
            return guard
        if send_to_primary(key, paths):
            return None
        if time.monotonic() >= deadline:
            log.warning("single instance: %s is locked but does not answer; starting anyway", key)
            return guard
        sleep(0.25)


def absolute_paths(paths: Sequence[str], cwd: str | None = None) -> list[str]:
    """The paths as absolute paths (the receiving instance has another working directory)."""
    base = cwd or os.getcwd()
    return [os.path.abspath(os.path.join(base, os.path.expanduser(p))) for p in paths]


__all__ = ["SingleInstance", "absolute_paths", "claim_or_forward", "instance_key", "send_to_primary"]
