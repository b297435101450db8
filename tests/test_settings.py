"""App settings: round trip, damaged file kept aside, invalid fields reset, read-only directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vrag_desktop.core.settings import AppSettings, SettingsError, load_settings, save_settings


def test_round_trip(tmp_path: Path) -> None:
    s = AppSettings(theme="dark", agent="vimrag", top_k=5, max_steps=7, thinking=False, corpora=["a"])
    save_settings(s, tmp_path)
    back, msg = load_settings(tmp_path)
    assert msg is None
    assert back == s


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "nope") == (AppSettings(), None)


def test_damaged_file_is_kept_aside(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text('{"theme": "dark", ', encoding="utf-8")
    s, msg = load_settings(tmp_path)
    assert s == AppSettings()
    assert msg and "damaged" in msg
    kept = list(tmp_path.glob("settings.damaged-*.json"))
    assert len(kept) == 1 and kept[0].read_text(encoding="utf-8") == '{"theme": "dark", '


def test_invalid_fields_are_reset_others_kept(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text(
        json.dumps({"theme": "purple", "top_k": -3, "agent": "vimrag", "unknown": 1}), encoding="utf-8"
    )
    s, msg = load_settings(tmp_path)
    assert (s.theme, s.top_k, s.agent) == ("system", 3, "vimrag")
    assert msg and "theme" in msg and "top_k" in msg


def test_unwritable_dir_raises_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    with pytest.raises(SettingsError, match="Could not save settings"):
        save_settings(AppSettings(), blocker / "cfg")
