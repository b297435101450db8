"""The kept page views' bound (core/agents/page_views.py): least recently used views go first once the
cap is passed, the trim runs on the writer thread only, ``clear`` removes only the cache's own files,
and a cache that cannot be trimmed only costs disk space. Real files throughout."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from doubles import tmpfs
from PIL import Image

from vrag_desktop.cli.main import main as cli_main
from vrag_desktop.core import settings as app_settings
from vrag_desktop.core.agents import imaging, page_views
from vrag_desktop.core.settings import AppSettings, load_settings, save_settings, saved_view_cache_mb

SPEC = page_views.ViewSpec(max_pixels=200_704)
MB = page_views.MB


@pytest.fixture
def views(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache, a private settings folder, and the module's cap state as in a new process."""
    d = tmp_path / "views"
    monkeypatch.setenv(page_views.CACHE_ENV, str(d))
    monkeypatch.setenv(app_settings.CONFIG_DIR_ENV, str(tmp_path / "cfg"))
    monkeypatch.delenv(page_views.LIMIT_ENV, raising=False)
    monkeypatch.setattr(page_views, "_cap", page_views._Cap())
    imaging.clear()
    yield d
    page_views.flush()


@pytest.fixture
def trims(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of the thread each trim ran on (the real trim runs)."""
    seen: list[str] = []
    real = page_views.trim

    def watched(limit_bytes: int | None = None) -> int:
        seen.append(threading.current_thread().name)
        return real(limit_bytes)

    monkeypatch.setattr(page_views, "trim", watched)
    return seen


def _page(path: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (600, 450, 3), dtype=np.uint8)).save(path, "JPEG", quality=90)
    return path


def _fill(root: Path, n: int, size: int) -> list[Path]:
    """``n`` files named as the cache names views, oldest first (mtimes 1000 s apart)."""
    made = []
    for i in range(n):
        name = f"{i:032x}"[::-1]
        f = root / name[:2] / f"{name}.jpg"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"\xff" * size)
        os.utime(f, ns=(i * 10**12, 10**15 + i * 10**12))
        made.append(f)
    return made


def _kept(root: Path) -> list[Path]:
    return sorted(root.rglob("*.jpg")) if root.exists() else []


def test_trim_drops_the_least_recently_used_until_under_the_cap(views: Path) -> None:
    files = _fill(views, 20, 100_000)
    assert page_views.usage() == (20, 2_000_000)
    assert page_views.trim(1_500_000) == 700_000  # down to 90 % of the cap: 1.35 MB, 13 files
    assert [f.exists() for f in files] == [False] * 7 + [True] * 13
    assert page_views.trim(1_500_000) == 0 and page_views.usage() == (13, 1_300_000)  # under: untouched


def test_a_hit_refreshes_the_view_so_the_trim_keeps_it(views: Path, tmp_path: Path) -> None:
    pages = [_page(tmp_path / f"p{i}.jpg", seed=i) for i in range(3)]
    for p in pages:
        page_views.view(p, SPEC)
    page_views.flush()
    kept = [page_views._file(p, SPEC) for p in pages]
    for i, f in enumerate(kept):
        assert f is not None
        os.utime(f, ns=(10**15 + i, 10**15 + i))  # long ago, in the order shown
    first = kept[0]
    assert first is not None and first.stat().st_mtime_ns == 10**15
    assert page_views.cached(pages[0], SPEC) is not None  # used again: now the most recent
    assert first.stat().st_mtime_ns > time.time_ns() - 60 * 10**9
    size = first.stat().st_size
    page_views.trim(size * 2)  # room for one view after the trim (90 % of two)
    assert _kept(views) == [first]


def test_writes_trim_on_the_writer_thread_at_the_first_write_then_every_so_many_bytes(
    views: Path, tmp_path: Path, trims: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pages = [_page(tmp_path / f"p{i}.jpg", seed=i) for i in range(8)]
    one = len(page_views.make(pages[0], SPEC).jpeg)
    monkeypatch.setattr(page_views, "TRIM_EVERY", int(2.5 * one))  # every third write (64 MB in the app)
    page_views.configure(int(2.5 * one))
    for p in pages:
        page_views.view(p, SPEC)  # on this (the caller's) thread: it never trims here
        page_views.flush()
        time.sleep(0.02)  # distinct mtimes even where the clock is coarse
    assert threading.current_thread().name not in trims
    assert len(trims) == 3 and all(name.startswith("vrag-page-views") for name in trims)  # writes 1, 4, 7
    # after write 7 the trim kept 6 and 7 (90 % of the cap); write 8 comes before the next check
    assert (
        [f.name for f in sorted(_kept(views), key=lambda f: f.stat().st_mtime_ns)]
        == [
            page_views._file(p, SPEC).name  # type: ignore[union-attr]
            for p in pages[5:]
        ]
    )


def test_prepare_trims_on_the_writer_thread_too(views: Path, tmp_path: Path, trims: list[str]) -> None:
    pages = [_page(tmp_path / f"p{i}.jpg", seed=i) for i in range(3)]
    _fill(views, 5, 400_000)
    page_views.configure(1 * MB)
    assert list(page_views.prepare(pages, SPEC))
    page_views.flush()
    assert trims and all(name.startswith("vrag-page-views") for name in trims)
    assert page_views.usage()[1] <= 1 * MB and len(_kept(views)) >= 3  # the three new views stay


def test_cap_zero_keeps_nothing_and_pages_still_show(
    views: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = _page(tmp_path / "p.jpg")
    page_views.configure(0)
    assert page_views.view(page, SPEC) == page_views.make(page, SPEC)
    page_views.flush()
    assert _kept(views) == [] and list(page_views.prepare([page], SPEC)) == []
    page_views.configure(None)
    monkeypatch.setenv(page_views.LIMIT_ENV, "0")  # the variable does the same
    assert page_views.view(page, SPEC) == page_views.make(page, SPEC)
    page_views.flush()
    assert _kept(views) == []


def test_choosing_a_smaller_cap_trims_now(views: Path) -> None:
    _fill(views, 10, 100_000)
    page_views.configure(2 * MB)  # the app at start: nothing to do
    page_views.flush()
    assert page_views.usage() == (10, 1_000_000)
    page_views.configure(0)  # chosen in Settings
    page_views.flush()
    assert page_views.usage() == (0, 0)
    with pytest.raises(ValueError, match="cannot be negative"):
        page_views.configure(-1)


def test_clear_removes_only_the_cache_s_own_files(views: Path) -> None:
    made = _fill(views, 4, 1000)
    tmp = made[0].with_name(f".{made[0].name}.1234.tmp")
    tmp.write_bytes(b"half a view")
    own = [
        views / "holiday.jpg",  # the variable pointed at a person's folder
        views / "ab" / "notes.txt",
        views / "zz" / ("f" * 32 + ".jpg"),  # not a hex folder
        views / made[1].parent.name / ("0" * 32 + ".jpg"),  # a view's name in another view's folder
        views / "Photos" / "ab" / ("a" * 32 + ".jpg"),
    ]
    for f in own:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"mine")
    assert page_views.usage() == (5, 4000 + len(b"half a view"))
    assert page_views.clear() == 4000 + len(b"half a view")
    assert all(f.exists() for f in own) and not any(f.exists() for f in [*made, tmp])
    assert page_views.usage() == (0, 0)


def test_stale_temp_files_go_at_the_next_trim_live_ones_stay(views: Path) -> None:
    (view,) = _fill(views, 1, 1000)
    stale = view.with_name(f".{view.name}.99.tmp")
    live = view.with_name(f".{view.name}.98.tmp")
    for f in (stale, live):
        f.write_bytes(b"x" * 10)
    os.utime(stale, ns=(10**15, 10**15))
    assert page_views.trim(10 * MB) == 10
    assert not stale.exists() and live.exists() and view.exists()


def test_a_file_vanishing_during_the_trim_is_harmless(views: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _fill(views, 10, 100_000)
    real = page_views._entries

    def then_one_vanishes(root: Path) -> list[page_views._Entry]:
        found = real(root)
        files[0].unlink(missing_ok=True)  # a reader found it damaged, or another process trimmed it
        return found

    monkeypatch.setattr(page_views, "_entries", then_one_vanishes)
    page_views.trim(500_000)
    assert page_views.usage() == (4, 400_000)  # the vanished file counted as gone: no extra victim
    assert [f.exists() for f in files] == [False] * 6 + [True] * 4


def test_a_trimmed_view_being_read_is_a_miss_and_made_again(views: Path, tmp_path: Path) -> None:
    page = _page(tmp_path / "p.jpg")
    shown = page_views.view(page, SPEC)
    page_views.flush()
    page_views.trim(0)
    assert page_views.cached(page, SPEC) is None
    assert page_views.view(page, SPEC) == shown


def test_a_read_only_cache_is_only_not_trimmed(
    views: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = _page(tmp_path / "p.jpg")
    with tmpfs(tmp_path / "ro", "4m") as mnt:
        monkeypatch.setenv(page_views.CACHE_ENV, str(mnt / "views"))
        page_views.configure(10 * MB)
        _fill(mnt / "views", 3, 1000)
        page_views.view(page, SPEC)
        page_views.flush()
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        before = page_views.usage()
        assert page_views.cached(page, SPEC) is not None  # a hit; its mtime stays as it was
        page_views.configure(0)  # a smaller cap: a trim on the writer thread that can remove nothing
        page_views.flush()
        assert page_views.trim(0) == 0 and page_views.clear() == 0
        assert page_views.usage() == before
        page_views.configure(None)


def test_bad_cap_variable_is_a_clear_error_and_the_setting_is_used(
    views: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    for bad in ("-1", "lots", "2.5", str(app_settings.VIEW_CACHE_MB_MAX + 1)):
        with pytest.raises(ValueError, match="VRAG_DESKTOP_VIEW_CACHE_MB must be a whole number"):
            page_views.parse_limit_mb(bad)
    assert page_views.parse_limit_mb(" 512 ") == 512
    save_settings(AppSettings(view_cache_mb=300))
    monkeypatch.setenv(page_views.LIMIT_ENV, "lots")
    with pytest.raises(ValueError):
        page_views.cap_bytes()
    with caplog.at_level(logging.WARNING):
        assert page_views.limit() == 300 * MB == page_views.limit()  # the CLI reads the saved setting
    assert sum("VRAG_DESKTOP_VIEW_CACHE_MB" in r.message for r in caplog.records) == 1  # said once
    monkeypatch.setenv(page_views.LIMIT_ENV, "64")
    page_views.configure(1000 * MB)
    assert page_views.limit() == 64 * MB  # the variable wins over the app


@pytest.mark.parametrize("bad", [-1, 10**9, "2048", 2048.5, True, None])
def test_setting_is_validated_and_reset(tmp_path: Path, bad: object) -> None:
    assert any("view_cache_mb must be a whole number" in p for p in AppSettings(view_cache_mb=bad).validate())  # type: ignore[arg-type]
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "settings.json").write_text(json.dumps({"view_cache_mb": bad, "top_k": 7}))
    loaded, message = load_settings(cfg)
    assert loaded.view_cache_mb == 2048 and loaded.top_k == 7
    assert message is not None and "view_cache_mb" in message
    assert saved_view_cache_mb(cfg) == 2048


def test_saved_cap_is_read_without_touching_a_damaged_file(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    save_settings(AppSettings(view_cache_mb=0), cfg)
    assert saved_view_cache_mb(cfg) == 0 and load_settings(cfg)[0].view_cache_mb == 0
    (cfg / "settings.json").write_text("{torn")
    assert saved_view_cache_mb(cfg) == 2048 and (cfg / "settings.json").read_text() == "{torn"
    assert saved_view_cache_mb(tmp_path / "nowhere") == 2048


def test_cli_cache_show_and_clear(views: Path, data_dir: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _fill(views, 3, 2 * MB)
    assert cli_main(["cache", "show"]) == 0
    out = capsys.readouterr().out
    assert str(views) in out and "3 pages, 6.0 MB" in out and "Cap: 2048 MB (the app's setting)" in out
    assert cli_main(["cache", "show", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "folder": str(views),
        "files": 3,
        "bytes": 6 * MB,
        "cap_bytes": 2048 * MB,
    }
    assert cli_main(["cache", "clear"]) == 0
    assert "Removed 6.0 MB" in capsys.readouterr().out and page_views.usage() == (0, 0)
    monkeypatch.setenv(page_views.LIMIT_ENV, "-5")
    assert cli_main(["cache", "show"]) == 1
    assert "VRAG_DESKTOP_VIEW_CACHE_MB must be a whole number" in capsys.readouterr().err
    monkeypatch.setenv(page_views.CACHE_ENV, "off")
    assert cli_main(["cache", "clear"]) == 0 and "not kept" in capsys.readouterr().out
