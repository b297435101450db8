"""Long but valid file names: a 255-byte name (NAME_MAX) is indexed whole. Neither the temporary
names of atomic writes nor the derived files' names may go past the limit; the items keep the
original's ids (``{stem}_{page}``) with the whole stem. Real indexing: MiniLM, the derive child."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from vrag_desktop.core.corpus.job import IndexRequest, index_job
from vrag_desktop.core.corpus.original_layout import export_original
from vrag_desktop.core.fsutil import NAME_MAX, atomic_open, atomic_write_bytes, shorten_name
from vrag_desktop.core.progress import CancelToken

# 83 Chinese characters (3 bytes each) + 2 ASCII + a 4-byte extension: exactly 255 bytes.
STEM = "长" * 40 + "文件名测试" * 8 + "报告年" + "ab"


def long_name(ext: str) -> str:
    name = STEM + ext
    assert len(os.fsencode(name)) == NAME_MAX, len(os.fsencode(name))
    return name


def fits(folder: Path) -> None:
    for p in folder.rglob("*"):
        assert len(os.fsencode(p.name)) <= NAME_MAX, p.name


@pytest.mark.parametrize("sole_writer", [False, True])
def test_temporary_names_fit_the_name_limit(tmp_path: Path, sole_writer: bool) -> None:
    for name in (long_name(".jpg"), os.fsdecode(b"\xff" * 250 + b".json")):  # also not UTF-8
        target = tmp_path / name
        with atomic_open(target, "wb", sole_writer=sole_writer) as fh:
            fh.write(b"new")
            (tmp,) = [p for p in tmp_path.iterdir() if p.name.startswith(".")]
            assert len(os.fsencode(tmp.name)) <= NAME_MAX
        assert target.read_bytes() == b"new"
    atomic_write_bytes(tmp_path / long_name(".jpg"), b"again", sole_writer=sole_writer)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no leftovers


def test_a_cut_name_ends_on_a_character() -> None:
    assert (
        shorten_name("报告", 5) == "报" and shorten_name("报告", 6) == "报告" and shorten_name("ab", 1) == "a"
    )
    assert shorten_name(os.fsdecode(b"a\xffb"), 2) == os.fsdecode(b"a\xff")


def _pdf(path: Path, pages: int) -> Path:
    import pymupdf

    doc = pymupdf.open()
    for i in range(pages):
        doc.new_page(width=300, height=400).insert_text((30, 60), f"Long-named report, page {i + 1}: harbour")
    doc.save(str(path))
    doc.close()
    return path


def _image(path: Path) -> Path:
    from PIL import Image

    Image.new("RGB", (120, 80), "teal").save(path, format="PNG")
    return path


def _video(path: Path) -> Path:
    import cv2
    import numpy as np

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 10.0, (64, 48))
    for i in range(20):
        writer.write(np.full((48, 64, 3), i * 10, dtype=np.uint8))
    writer.release()
    return path


def _index(library: Any, folder: Path, minilm: Any) -> Any:
    gen = index_job(
        library, IndexRequest("long", paths=[str(folder)], create=True), lambda _: minilm, CancelToken()
    )
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


def test_a_255_byte_name_indexes_every_page_image_and_clip(library, minilm, tmp_path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    folder.mkdir()
    pdf = _pdf(folder / long_name(".pdf"), 5)
    image = _image(folder / long_name(".png"))
    video = _video(folder / long_name(".avi"))
    result = _index(library, folder, minilm)
    assert result.failures == [], result.failures
    corpus = library.open("long")
    try:
        by_source = {s.path: s for s in corpus.manifest.sources()}
        assert {p: by_source[str(p)].status for p in (pdf, image, video)} == dict.fromkeys(
            (pdf, image, video), "indexed"
        )
        items = corpus.manifest.items()
        pages = sorted((i.ordinal, i.name, i.status) for i in items if i.source_id == by_source[str(pdf)].id)
        assert pages == [(n, f"{STEM}_{n}", "embedded") for n in range(1, 6)]  # the original's ids, whole
        (img,) = [i for i in items if i.source_id == by_source[str(image)].id]
        assert img.name == STEM and img.status == "embedded"
        (clip,) = [i for i in items if i.source_id == by_source[str(video)].id]
        assert (
            clip.name == f"{STEM}_1" and clip.status == "embedded" and Path(clip.media_path or "").is_file()
        )
        for i in items:
            assert i.image_path and Path(i.image_path).is_file()
        fits(corpus.derived_dir)
        # The export to the original's layout names pages {stem}_{page}.jpg: the stem is cut, the page kept.
        report = export_original(corpus, tmp_path / "original")
        assert report.vectors == 7 and report.skipped == []
        fits(tmp_path / "original")
        exported = {p.name for p in (tmp_path / "original" / "images").iterdir()}
        cut = {n for n in exported if n != f"{STEM}.jpg"}  # the image's name fits whole
        assert sorted(n.rsplit("_", 1)[1] for n in cut) == [f"{k}.jpg" for k in range(1, 6)]
        assert all(STEM.startswith(n.rsplit("_", 1)[0]) for n in cut)
    finally:
        corpus.close()
