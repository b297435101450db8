"""The agents' fast image path gives the model the bytes the plain path gives.

``core/agents/imaging`` resizes in stripes on threads and keeps recent decodes; the scripted runs
of ``agent_script`` are replayed with the plain path (Pillow's one-call resize, a fresh decode
every time) and every request the model receives must hash the same. ``bench/agent_overhead.py
--tree`` makes the same comparison against an older source tree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from agent_script import make_pages, vimrag_digests, vrag_digests
from PIL import Image

from vrag_desktop.core.agents import imaging


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_pages(tmp_path_factory.mktemp("pages"), 9)


def plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The implementation before the optimisation: one-call resize, no kept decodes, copying convert."""
    bicubic = Image.Resampling.BICUBIC
    monkeypatch.setattr(imaging, "resize", lambda img, size, resample=bicubic: img.resize(size, resample))
    monkeypatch.setattr(imaging, "decoded", lambda source, im, make: make())
    monkeypatch.setattr(imaging, "rgb", lambda im: im.convert("RGB"))


@pytest.mark.parametrize("stripes", [2, 3, 4])
def test_split_resize_is_pillows_resize(stripes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(imaging, "workers", lambda: stripes)
    monkeypatch.setattr(imaging, "_order", None)
    if not imaging._parallel_ok():  # this Pillow's pass order is none we know: the product never splits
        pytest.skip("Pillow resamples in an order imaging does not know")
    rng = np.random.default_rng(stripes)
    for trial in range(25):
        w, h = int(rng.integers(40, 900)), int(rng.integers(40, 900))
        im = Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8), "RGB")
        if trial % 4 == 0:
            im = im.convert("L")
        size = (int(rng.integers(10, 2 * w)), int(rng.integers(10, 2 * h)))
        if trial % 5 == 0:
            size = (w, size[1])
        elif trial % 7 == 0:
            size = (size[0], h)
        for resample in (Image.Resampling.BICUBIC, Image.Resampling.LANCZOS):
            assert imaging._split(im, size, resample).tobytes() == im.resize(size, resample).tobytes(), (
                im.size,
                size,
            )


def test_resize_splits_only_when_a_core_is_free(monkeypatch: pytest.MonkeyPatch) -> None:
    im = Image.new("RGB", (800, 600), (10, 20, 30))
    calls: list[int] = []
    monkeypatch.setattr(
        imaging, "_split", lambda img, size, resample: calls.append(1) or img.resize(size, resample)
    )
    monkeypatch.setattr(imaging, "_parallel_ok", lambda: True)
    monkeypatch.setattr(imaging, "workers", lambda: 2)
    monkeypatch.setattr(imaging, "_cpu_times", lambda: None)  # no /proc/stat: the load average decides
    monkeypatch.setattr(imaging.os, "getloadavg", lambda: (0.3, 0.3, 0.3))
    imaging.resize(im, (400, 300))
    monkeypatch.setattr(imaging.os, "getloadavg", lambda: (2.4, 2.0, 1.0))
    imaging.resize(im, (400, 300))
    assert calls == [1]


def test_free_cores_are_read_from_the_machines_idle_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Idle ticks over the last quarter second: ≥ half a core idle splits; the window moves on."""
    clock = iter(x * 0.3 for x in range(100))
    ticks = iter([(0, 0), (100, 200), (110, 400), (110, 400), (300, 600)])  # (idle, total) on 2 cores
    monkeypatch.setattr(imaging.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(imaging, "_cpu_times", lambda: next(ticks))
    monkeypatch.setattr(imaging.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(imaging.os, "getloadavg", lambda: (5.0, 5.0, 5.0))
    monkeypatch.setattr(imaging, "_cpu_ref", None)
    monkeypatch.setattr(imaging, "_cpu_verdict", None)
    # first sample: no window yet, the load average decides; then 1 core idle; 0.1 core; 0.1 (kept); 1.9
    assert [imaging._cores_idle() for _ in range(5)] == [False, True, False, False, True]


def test_resize_falls_back_for_other_modes() -> None:
    im = Image.new("RGBA", (800, 600), (10, 20, 30, 128))
    assert (
        imaging.resize(im, (400, 300)).tobytes() == im.resize((400, 300), Image.Resampling.BICUBIC).tobytes()
    )


def test_kept_decode_is_the_fresh_decode(pages: list[Path]) -> None:
    from vrag_desktop.core.agents import vrag_protocol as vp

    imaging.clear()
    first, size = vp.open_for_pixels(str(pages[0]), 400_000)
    again, size2 = vp.open_for_pixels(str(pages[0]), 380_000)  # same draft scale: the kept decode
    assert again is first and size2 == size
    other, _ = vp.open_for_pixels(str(pages[0]), 90_000)  # another scale: decoded anew
    assert other is not first and other.width < first.width
    with Image.open(pages[0]) as im:
        im.draft("RGB", first.size)
        assert im.convert("RGB").tobytes() == first.tobytes()


def test_vrag_run_sends_the_same_bytes(
    pages: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    imaging.clear()
    fast = vrag_digests(pages, tmp_path / "fast")
    with monkeypatch.context() as m:
        plain(m)
        reference = vrag_digests(pages, tmp_path / "plain")
    assert len(fast) >= 10 and fast == reference


def test_vimrag_run_sends_the_same_bytes(
    pages: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    imaging.clear()
    fast = vimrag_digests(pages, tmp_path / "fast")
    with monkeypatch.context() as m:
        plain(m)
        reference = vimrag_digests(pages, tmp_path / "plain")
    assert len(fast) == 17 and fast == reference
