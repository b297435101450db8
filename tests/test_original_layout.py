"""Exporting a corpus to the original VRAG three-file index (reference §2.3) and reading it back.

The exported folder is read twice: by a loader written here the way the original's engine loads an
index (faiss + json, its assertions), and by the app's own legacy import, which must give back the
same items and vectors, searchable."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import cli, drain, index_paths

from vrag_desktop.core.corpus.corpus import CorpusError
from vrag_desktop.core.corpus.legacy import import_legacy_index
from vrag_desktop.core.corpus.original_layout import export_original, name_file
from vrag_desktop.core.search import SearchEngine

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def load_like_the_original(
    index_dir: Path, model_name: str
) -> tuple[Any, dict[str, Any], list[dict[str, Any]]]:
    """What the original's search engine does when it loads (or resumes) an index folder."""
    import faiss

    stem = model_name.replace("/", "_").replace("-", "_")
    index = faiss.read_index(str(index_dir / f"{stem}_faiss_index.bin"))
    with open(index_dir / f"{stem}_meta_data.json") as f:
        meta = json.load(f)
    with open(index_dir / f"{stem}_file_data_list.jsonl") as f:
        file_data_list = [json.loads(line) for line in f]
    assert meta["model_name"] == model_name
    assert meta["num_vectors"] == index.ntotal == len(file_data_list)
    assert meta["vector_dimension"] == index.d
    datetime.strptime(meta["date_created"], "%Y-%m-%d-%H-%M-%S")
    return index, meta, file_data_list


@pytest.fixture
def corpus(library, minilm, make_pdf, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A small corpus of every kind: a 2-page PDF, an image, a note, a video of 2 clips."""
    import cv2
    from PIL import Image

    pdf = make_pdf(
        "Field Notes.pdf",
        ["Lava flows from the volcano crater at night.", "Penguins huddle together on the Antarctic ice."],
    )
    img = tmp_path / "docs" / "harbor.png"
    Image.new("RGB", (320, 240), (20, 60, 160)).save(img)
    note = tmp_path / "docs" / "recipe.txt"
    note.write_text("Let the pancake batter rest for thirty minutes before frying.")
    video = tmp_path / "docs" / "drone.mp4"
    w = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 10, (96, 64))
    for i in range(40):
        w.write(np.full((64, 96, 3), 5 * i, np.uint8))
    w.release()
    c = library.open("mixed", create=True)
    c.clip_seconds = 2
    c.add_paths([pdf, img, note, video])
    drain(c.scan())
    drain(c.build(minilm, ocr=False))
    c.close()  # the indexing is over: its writer (and its lock) goes, as the job's does
    return library.open("mixed", read_only=True)


def test_export_satisfies_the_original_loader(corpus, minilm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "image_index"
    report = export_original(corpus, out)
    assert (
        report.model_name == MINILM
        and report.name_file == name_file(MINILM) == "sentence_transformers_all_MiniLM_L6_v2"
    )
    assert sorted(p.name for p in out.glob("*_*")) == [
        f"{report.name_file}_faiss_index.bin",
        f"{report.name_file}_file_data_list.jsonl",
        f"{report.name_file}_meta_data.json",
    ]
    index, meta, records = load_like_the_original(out, MINILM)
    n_vectors = corpus.store().ntotal
    assert index.ntotal == n_vectors == report.vectors and not report.skipped
    assert type(index).__name__ == "IndexFlatIP" and meta["vector_dimension"] == 384
    vecs = index.reconstruct_n(0, index.ntotal)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    # records: pages named as pdf2images names them, copied beside the index; clips copied; text inline
    kinds = [r["type"] for r in records]
    assert sorted(set(kinds)) == ["image", "text", "video"]
    images = sorted(Path(r["file_path"]).name for r in records if r["type"] == "image")
    assert images == ["Field Notes_1.jpg", "Field Notes_2.jpg", "harbor.jpg"]
    for r in records:
        path = Path(r["file_path"])
        assert path.is_absolute() and path.is_file(), r
        if r["type"] != "text":
            assert out in path.parents  # what the app derived is copied out of its corpus folder
    videos = [Path(r["file_path"]) for r in records if r["type"] == "video"]
    assert [p.name for p in videos] == ["drone_1.mp4", "drone_2.mp4"] and videos[0].parent == out / "videos"
    (text,) = [r for r in records if r["type"] == "text"]
    assert text["content"].startswith("Let the pancake batter") and text["file_path"].endswith("recipe.txt")
    # row-aligned: searching the exported index like the original does finds the right record
    for query, want in (("volcano lava", "Field Notes_1.jpg"), ("penguins on ice", "Field Notes_2.jpg")):
        _, found = index.search(minilm.embed_queries([query]), 1)
        assert Path(records[int(found[0][0])]["file_path"]).name == want


def test_round_trip_through_the_legacy_import(corpus, library, minilm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "exported"
    export_original(corpus, out)
    back = import_legacy_index(library, out, "back")
    assert len(back.manifest.items()) == len(corpus.manifest.items()) == corpus.store().ntotal
    ids = sorted(corpus.store().ids().tolist())
    original = corpus.store().vectors(ids)
    imported = back.store().vectors(sorted(back.store().ids().tolist()))
    assert np.allclose(original, imported, atol=1e-6)
    assert sorted(i.kind for i in back.manifest.items()) == sorted(
        {"page": "image"}.get(i.kind, i.kind) for i in corpus.manifest.items()
    )
    engine = SearchEngine(library, ["back"], minilm)
    hit = engine.search("lava from a volcano", 1)[0]
    assert hit.name == "Field Notes_1" and Path(str(hit.image)).is_file()
    clip = next(h for h in engine.search("drone", 10) if h.modality == "clip")
    assert clip.media and clip.media.endswith(".mp4") and Path(str(clip.image)).is_file()  # a frame
    note = engine.search("pancake batter", 1)[0]
    assert note.modality == "text" and "thirty minutes" in note.text
    engine.close()


def test_relative_paths_and_model_name(corpus, library, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = tmp_path / "VRAG"
    out = repo / "search_engine" / "corpus" / "image_index"
    report = export_original(corpus, out, model_name="Alibaba-NLP/GVE-3B", path_base=repo)
    assert report.name_file == "Alibaba_NLP_GVE_3B"
    _, _, records = load_like_the_original(out, "Alibaba-NLP/GVE-3B")
    pages = [r["file_path"] for r in records if r["type"] == "image"]
    assert "search_engine/corpus/image_index/images/Field Notes_1.jpg" in pages
    assert all((repo / p).is_file() for p in pages)
    # the app's import finds them again from the index folder
    back = import_legacy_index(library, out, "rel", embedder=MINILM)
    assert all(Path(str(i.image_path)).is_file() for i in back.manifest.items() if i.kind == "image")
    # re-exporting the same model into the same folder replaces it; another model is refused
    export_original(corpus, out, model_name="Alibaba-NLP/GVE-3B", path_base=repo)
    with pytest.raises(CorpusError, match="already holds another index"):
        export_original(corpus, out, model_name="other-model")


def test_duplicate_page_names_keep_the_original_base_name(library, minilm, make_pdf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a = make_pdf("report.pdf", ["Alpha page."], folder=tmp_path / "a")
    b = make_pdf("report.pdf", ["Beta page."], folder=tmp_path / "b")
    c, _, _ = index_paths(library, "dups", [a, b], minilm)
    export_original(c, tmp_path / "out")
    _, _, records = load_like_the_original(tmp_path / "out", MINILM)
    paths = sorted(r["file_path"] for r in records)
    assert len(set(paths)) == 2 and {Path(p).name for p in paths} == {"report_1.jpg"}


def test_cli_export_and_its_errors(library, minilm, make_pdf, tmp_path: Path, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    c, _, _ = index_paths(library, "cli", [make_pdf("x.pdf", ["Camels cross the desert."])], minilm)
    c.close()
    library.open("empty", create=True).close()
    out = tmp_path / "out"
    proc = cli("corpus", "export-original", "cli", "--out", str(out), data_dir=data_dir)
    assert proc.returncode == 0, proc.stderr
    assert "Exported 1 vectors of corpus 'cli'" in proc.stdout and MINILM in proc.stdout
    load_like_the_original(out, MINILM)
    proc = cli("corpus", "export-original", "empty", "--out", str(tmp_path / "o2"), data_dir=data_dir)
    assert proc.returncode == 1 and "has not been indexed yet" in proc.stderr
    proc = cli("corpus", "export-original", "nope", "--out", str(tmp_path / "o3"), data_dir=data_dir)
    assert proc.returncode == 1 and "nope" in proc.stderr
    (tmp_path / "file").write_text("x")
    proc = cli("corpus", "export-original", "cli", "--out", str(tmp_path / "file"), data_dir=data_dir)
    assert proc.returncode == 1 and "not a folder" in proc.stderr


def test_export_waits_for_no_indexing_job(corpus, library, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An indexing job holds the corpus lock: the export says so instead of copying a moving index."""
    from vrag_desktop.core.corpus.corpus import CorpusBusy

    job = library.open("mixed")
    job.lock()
    try:
        with pytest.raises(CorpusBusy, match="being indexed"):
            export_original(corpus, tmp_path / "busy")
    finally:
        job.close()
    export_original(corpus, tmp_path / "free")  # and works once the job is done
    corpus.lock()  # a caller that holds the lock keeps it
    export_original(corpus, tmp_path / "held")
    assert corpus._lock.is_locked
