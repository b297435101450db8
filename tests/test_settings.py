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


def test_data_layout_names_every_folder(tmp_path: Path) -> None:
    from vrag_desktop.core.paths import DataLayout

    layout = DataLayout.resolve(tmp_path / "d")
    assert layout.root == (tmp_path / "d").resolve()
    assert {p.name for p in (layout.corpora, layout.runs, layout.config, layout.logs, layout.runtime)} == {
        "corpora",
        "runs",
        "config",
        "logs",
        "runtime",
    }
    assert not layout.root.exists()  # naming a place creates nothing


def test_switching_data_directory_keeps_endpoints_and_never_overwrites(tmp_path: Path) -> None:
    """Endpoint profiles and vLLM settings live with the data (the CLI reads them too); a switch to a
    data directory that has none brings them along, and one that has its own keeps them."""
    from vrag_desktop.qt.context import AppContext

    ctx = AppContext.for_dirs(data_dir=tmp_path / "old", config_dir=tmp_path / "cfg")
    old_cfg = ctx.layout.config
    old_cfg.mkdir(parents=True)
    (old_cfg / "endpoints.json").write_text('{"profiles": ["mine"]}')
    (old_cfg / "vllm.json").write_text('{"model": "mine"}')
    own = tmp_path / "own"
    (own / "config").mkdir(parents=True)
    (own / "config" / "endpoints.json").write_text('{"profiles": ["theirs"]}')

    ctx.set_data_dir(tmp_path / "new")
    assert (tmp_path / "new" / "config" / "endpoints.json").read_text() == '{"profiles": ["mine"]}'
    assert (tmp_path / "new" / "config" / "vllm.json").read_text() == '{"model": "mine"}'
    ctx.set_data_dir(own)
    assert (own / "config" / "endpoints.json").read_text() == '{"profiles": ["theirs"]}'  # kept
    assert (own / "config" / "vllm.json").read_text() == '{"model": "mine"}'  # the missing one came
    assert (old_cfg / "endpoints.json").read_text() == '{"profiles": ["mine"]}'  # the source is untouched

    blocked = tmp_path / "file-not-dir"
    blocked.write_text("x")
    ctx.set_data_dir(blocked)  # an unusable directory: nothing raised here, reported when a store opens
    assert ctx.data_dir == blocked.resolve()


def test_update_feed_settings_round_trip_and_default_off(tmp_path: Path) -> None:
    assert (AppSettings().update_url, AppSettings().update_check_at_start) == ("", False)
    s = AppSettings(update_url="https://example.org/feed.json", update_check_at_start=True)
    assert s.validate() == []
    save_settings(s, tmp_path)
    assert load_settings(tmp_path) == (s, None)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("update_url", "http://example.org/feed.json", "must use https"),
        ("update_url", "ftp://example.org/feed.json", "must start with https://"),
        ("update_url", 42, "update_url must be an https:// address or empty"),
        ("update_check_at_start", "yes", "update_check_at_start must be true or false"),
    ],
)
def test_bad_update_settings_are_refused_and_reset(
    tmp_path: Path, field: str, value: object, words: str
) -> None:
    assert any(words in p for p in AppSettings(**{field: value}).validate())  # type: ignore[arg-type]
    (tmp_path / "settings.json").write_text(json.dumps({field: value, "theme": "dark"}), encoding="utf-8")
    s, msg = load_settings(tmp_path)
    assert getattr(s, field) == getattr(AppSettings(), field) and s.theme == "dark"
    assert msg and words in msg


def test_saved_update_url_reads_without_writing(tmp_path: Path) -> None:
    from vrag_desktop.core.settings import saved_update_url

    assert saved_update_url(tmp_path) == ""
    (tmp_path / "settings.json").write_text(
        '{"update_url": " https://example.org/f.json "}', encoding="utf-8"
    )
    assert saved_update_url(tmp_path) == "https://example.org/f.json"
    (tmp_path / "settings.json").write_text('{"update_url": ', encoding="utf-8")  # damaged: left as it is
    assert saved_update_url(tmp_path) == ""
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]
