"""A data directory written by a newer VRAG Desktop is refused with a message and left untouched
(vrag_desktop/core/datadir.py; the CLI checks it before any command, the app before its window)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vrag_desktop.cli.main import main
from vrag_desktop.core.datadir import DATA_FORMAT, STAMP_NAME, DataDirTooNew, check, check_and_stamp


def test_a_new_directory_is_stamped(tmp_path: Path) -> None:
    d = tmp_path / "new dir"
    check_and_stamp(d)
    assert json.loads((d / STAMP_NAME).read_text())["format"] == DATA_FORMAT
    check_and_stamp(d)  # idempotent


def test_newer_format_is_refused_and_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stamp = tmp_path / STAMP_NAME
    text = json.dumps({"format": DATA_FORMAT + 1, "written_by": "9.9"})
    stamp.write_text(text)
    with pytest.raises(DataDirTooNew, match="newer VRAG Desktop"):
        check(tmp_path)
    with pytest.raises(DataDirTooNew):
        check_and_stamp(tmp_path)
    assert main(["--data-dir", str(tmp_path), "search", "anything"]) == 1
    assert "newer VRAG Desktop" in capsys.readouterr().err
    assert stamp.read_text() == text and [p.name for p in tmp_path.iterdir()] == [STAMP_NAME]


def test_damaged_stamp_is_used_and_kept(tmp_path: Path) -> None:
    stamp = tmp_path / STAMP_NAME
    stamp.write_text("{not json")
    check_and_stamp(tmp_path)
    assert stamp.read_text() == "{not json"
