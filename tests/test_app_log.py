"""The app log: written from the start, rolled over once the window has painted (qt/infra/app_log.py).

Real files in a temporary directory; the handlers are taken off the app's logger afterwards.
"""

from __future__ import annotations

import logging
import logging.handlers
from collections.abc import Iterator
from pathlib import Path

import pytest

from vrag_desktop.qt.infra import app_log


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    root = logging.getLogger("vrag_desktop")
    before = list(root.handlers)
    yield root
    for h in root.handlers:
        if h not in before:
            root.removeHandler(h)
            h.close()


def test_the_start_logs_to_the_file_and_the_swap_loses_no_line(
    logger: logging.Logger, tmp_path: Path
) -> None:
    path = app_log.setup_logging(tmp_path / "logs")
    assert path == tmp_path / "logs" / "app.log"
    ours = [h for h in logger.handlers if getattr(h, "baseFilename", None) == str(path)]
    assert [type(h) for h in ours] == [logging.FileHandler]  # no logging.handlers at the start
    logger.info("before the window")
    app_log.rotate_logs()
    ours = [h for h in logger.handlers if getattr(h, "baseFilename", None) == str(path)]
    assert [type(h) for h in ours] == [logging.handlers.RotatingFileHandler]
    assert ours[0].maxBytes == app_log.MAX_BYTES and ours[0].backupCount == app_log.BACKUPS
    logger.info("after the first paint")
    app_log.rotate_logs()  # a second call changes nothing
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [ln.split(": ", 1)[1] for ln in lines] == ["before the window", "after the first paint"]
    assert all(" INFO vrag_desktop: " in ln for ln in lines)


def test_a_log_grown_past_its_limit_rolls_over_after_the_swap(logger: logging.Logger, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_text("x" * (app_log.MAX_BYTES + 10), encoding="utf-8")  # last session's
    path = app_log.setup_logging(logs)
    assert path is not None
    app_log.rotate_logs()
    logger.warning("a new line")
    assert (logs / "app.log.1").stat().st_size > app_log.MAX_BYTES
    assert path.read_text(encoding="utf-8").endswith("a new line\n")


def test_an_unwritable_log_folder_leaves_the_app_without_a_log(
    logger: logging.Logger, tmp_path: Path
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("", encoding="utf-8")
    assert app_log.setup_logging(blocked / "logs") is None
    app_log.rotate_logs()  # nothing to swap
