"""Vector store durability (segments, compaction, IVF), reconciliation, incremental rescans, and
reading the original VRAG three-file index layout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import cli, drain, index_paths

from vrag_desktop.core.corpus.corpus import CorpusError
from vrag_desktop.core.index.store import VectorStore
from vrag_desktop.core.search import SearchEngine, SearchError


def _unit(n: int, d: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_segments_survive_reopen_and_compaction_never_duplicates(tmp_path: Path) -> None:
    v = _unit(300, 16)
    s = VectorStore(tmp_path, 16)
    s.add(np.arange(100), v[:100])
    s.checkpoint()
    s.add(np.arange(100, 300), v[100:])
    s.checkpoint()
    assert VectorStore(tmp_path, 16).ntotal == 300
    # Simulate a crash in compaction after the new base is written but before segments are deleted.
    seg_bytes = {p.name: p.read_bytes() for p in tmp_path.glob("seg-*.npz")}
    s.compact()
    for name, data in seg_bytes.items():
        (tmp_path / name).write_bytes(data)
    again = VectorStore(tmp_path, 16)
    ids = again.ids().tolist()
    assert len(ids) == 300 and len(set(ids)) == 300
    scores, found = again.search(v[:5], 1)
    assert found[:, 0].tolist() == [0, 1, 2, 3, 4]
    assert np.allclose(scores[:, 0], 1.0, atol=1e-5)


def test_dimension_mismatch_is_refused(tmp_path: Path) -> None:
    VectorStore(tmp_path, 16)
    with pytest.raises(Exception, match="dimension"):
        VectorStore(tmp_path, 32)


def test_switches_to_ivf_past_threshold_and_keeps_recall(tmp_path: Path) -> None:
    # clustered data (like real embeddings): 50 centres in 32-d
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(50, 32))
    x = centres[rng.integers(0, 50, 4000)] + 0.3 * rng.normal(size=(4000, 32))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    s = VectorStore(tmp_path, 32, ann_threshold=32 * 3000)
    s.add(np.arange(4000), x)
    s.compact()
    assert s.kind == "ivf"
    reopened = VectorStore(tmp_path, 32)
    assert reopened.kind == "ivf" and reopened.ntotal == 4000
    q = x[:50] + 0.05 * rng.normal(size=(50, 32)).astype(np.float32)
    exact = (q @ x.T).argsort(axis=1)[:, ::-1][:, :10]
    _, approx = reopened.search(q, 10)
    recall = np.mean(
        [len(set(a) & set(e)) / 10 for a, e in zip(approx.tolist(), exact.tolist(), strict=True)]
    )
    assert recall >= 0.9
    reopened.remove([0, 1])
    reopened.checkpoint()
    assert VectorStore(tmp_path, 32).ntotal == 3998


def test_reconcile_repairs_both_directions(library, minilm, make_pdf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pdf = make_pdf("a.pdf", [f"Page {i} about topic {i}" * 5 for i in range(6)])
    corpus, _, _ = index_paths(library, "r", [pdf], minilm)
    store = corpus.store()
    # (1) the manifest lost track of two vectors' items' rows? → orphans in the index get dropped
    store.add(np.array([9999]), minilm.embed_queries(["orphan"]))
    store.checkpoint()
    # (2) vectors the manifest lists but the index lost → their items are redone
    victim = corpus.manifest.vector_ids()[0]
    store.remove([victim])
    store.checkpoint()
    corpus.close()
    corpus = library.open("r")
    s2 = corpus.store()
    assert 9999 not in s2.ids().tolist()
    assert corpus.stats()["pending_files"] == 1  # the page with the missing vector will be redone
    drain(corpus.build(minilm))
    assert sorted(s2.ids().tolist()) == sorted(corpus.manifest.vector_ids())
    assert sorted(i.ordinal for i in corpus.manifest.items()) == [1, 2, 3, 4, 5, 6]


def test_rescan_is_incremental(library, minilm, make_pdf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    a = make_pdf("a.pdf", ["Apples grow in orchards.", "Pears ripen in autumn."], folder=folder)
    b = make_pdf("b.pdf", ["Submarines dive under the sea."], folder=folder)
    corpus, scan, build = index_paths(library, "inc", [folder], minilm)
    assert (scan.added, build.items) == (2, 3)
    first_ids = sorted(corpus.manifest.vector_ids())
    # unchanged: nothing re-embedded
    scan = drain(corpus.scan())
    assert (scan.added, scan.changed, scan.unchanged) == (0, 0, 2)
    assert drain(corpus.build(minilm)).items == 0
    # changed: a.pdf re-derived; deleted: b.pdf leaves the index
    make_pdf(
        "a.pdf",
        ["Volcanoes erupt lava.", "Geysers spout hot water.", "Calderas form after eruptions."],
        folder=folder,
    )
    b.unlink()
    scan = drain(corpus.scan())
    assert (scan.changed, scan.removed) == (1, 1)
    report = drain(corpus.build(minilm))
    assert report.items == 3
    names = sorted(i.name for i in corpus.manifest.items())
    assert names == ["a_1", "a_2", "a_3"]
    ids = corpus.store().ids().tolist()
    assert sorted(ids) == sorted(corpus.manifest.vector_ids()) and not set(ids) & set(first_ids)
    engine = SearchEngine(library, ["inc"], minilm)
    assert engine.search("lava", 1)[0].page == 1
    assert all("Submarines" not in h.text for h in engine.search("submarine under the sea", 3))
    assert a.exists()


def test_pdf_pages_named_like_the_original_and_rendered_for_the_embedder(library, minilm, make_pdf) -> None:  # type: ignore[no-untyped-def]
    from PIL import Image

    pdf = make_pdf("My Report.pdf", ["one", "two", "three"])
    corpus, _, _ = index_paths(library, "names", [pdf], minilm)
    items = corpus.manifest.items()
    assert [i.name for i in items] == ["My Report_1", "My Report_2", "My Report_3"]
    for it in items:
        p = Path(it.image_path or "")
        assert p.name == f"{it.name}.jpg" and corpus.dir in p.parents  # never next to the user's file
        w, h = Image.open(p).size
        assert abs(w * h - minilm.info.render_pixels) / minilm.info.render_pixels < 0.02


def test_video_split_into_clips_with_keyframes(library, minilm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import cv2

    path = tmp_path / "v" / "clip.mp4"
    path.parent.mkdir()
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (160, 120))
    for i in range(250):  # 25 s
        frame = np.full((120, 160, 3), (i * 3) % 255, np.uint8)
        w.write(frame)
    w.release()
    corpus = library.open("vid", create=True)
    corpus.clip_seconds = 10
    corpus.add_paths([path])
    drain(corpus.scan())
    drain(corpus.build(minilm, ocr=False))
    clips = corpus.manifest.items()
    assert [c.name for c in clips] == ["clip_1", "clip_2", "clip_3"]
    assert [(c.t_start, c.t_end) for c in clips] == [(0.0, 10.0), (10.0, 20.0), (20.0, 25.0)]
    for c in clips:
        assert Path(c.media_path or "").exists() and Path(c.image_path or "").exists()
        cap = cv2.VideoCapture(c.media_path)
        assert cap.get(cv2.CAP_PROP_FRAME_COUNT) == (50 if c.ordinal == 3 else 100)
        cap.release()
        frames = list(Path(c.image_path or "").parent.glob(f"{c.name}_f*.jpg"))
        assert len(frames) == 4


def test_several_corpora_searched_together(library, minilm, make_pdf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    index_paths(
        library, "one", [make_pdf("x.pdf", ["Penguins live in Antarctica."], folder=tmp_path / "x")], minilm
    )
    index_paths(
        library,
        "two",
        [make_pdf("y.pdf", ["Camels cross the Sahara desert."], folder=tmp_path / "y")],
        minilm,
    )
    engine = SearchEngine(library, None, minilm)
    assert engine.search("desert animal", 1)[0].corpus == "two"
    assert engine.search("antarctic birds", 1)[0].corpus == "one"


def test_embedder_mismatch_is_refused(library, minilm, make_pdf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tiny_vl_models import build_tiny_qwen25_vl

    from vrag_desktop.core.embedders.qwen_vl import GVEEmbedder

    index_paths(library, "m", [make_pdf("m.pdf", ["Some text."])], minilm)
    other = GVEEmbedder(str(build_tiny_qwen25_vl(tmp_path / "gve")), max_pixels=28 * 28 * 16)
    with pytest.raises(SearchError, match="indexed with embedder 'minilm-l6-v2'"):
        SearchEngine(library, ["m"], other)
    # a shared, already loaded model is reused only when it is the corpus's own
    assert SearchEngine(library, ["m"], reuse=minilm).embedder is minilm
    assert SearchEngine(library, ["m"], reuse=other).embedder.info.id == "minilm-l6-v2"
    corpus = library.open("m")
    with pytest.raises(CorpusError, match="indexed with embedder 'minilm-l6-v2'"):
        drain(corpus.build(other))


def _write_legacy(
    folder: Path, model: str, vecs: np.ndarray, records: list[dict], count: int | None = None
) -> None:
    import faiss

    folder.mkdir(parents=True, exist_ok=True)
    name = model.replace("/", "_").replace("-", "_")
    index = faiss.IndexFlatIP(vecs.shape[1])
    index.add(vecs)
    faiss.write_index(index, str(folder / f"{name}_faiss_index.bin"))
    (folder / f"{name}_meta_data.json").write_text(
        json.dumps(
            {
                "vector_dimension": vecs.shape[1],
                "num_vectors": count if count is not None else len(records),
                "model_name": model,
                "date_created": "2025-06-01-12-00-00",
            }
        )
    )
    with open(folder / f"{name}_file_data_list.jsonl", "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def test_import_original_index_and_search_it(minilm, tmp_path: Path, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    from PIL import Image

    imgs = tmp_path / "corpus" / "img"
    imgs.mkdir(parents=True)
    texts = [
        "slide about quarterly cloud revenue",
        "slide about a mountain hiking trail",
        "slide about coffee roasting",
    ]
    records = []
    for i, _ in enumerate(texts):
        p = imgs / f"slide_{i + 1}.jpg"
        Image.new("RGB", (64, 48), (i * 60, 80, 120)).save(p)
        records.append({"type": "image", "file_path": str(p)})
    records.append({"type": "text", "file_path": "notes/n.txt", "content": "the espresso machine manual"})
    vecs = minilm.embed_queries([*texts, "the espresso machine manual"])
    _write_legacy(tmp_path / "idx", "sentence-transformers/all-MiniLM-L6-v2", vecs, records)

    views = tmp_path / "views"
    proc = cli(
        "corpus", "import-legacy", str(tmp_path / "idx"), "--name", "old",
        data_dir=data_dir, env={"VRAG_DESKTOP_VIEW_CACHE": str(views)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Imported 4 vectors" in proc.stdout
    assert len(list(views.rglob("*.jpg"))) == 3  # the pages' model views, made ahead (not the text)
    out = json.loads(
        cli("search", "hiking in the mountains", "-k", "1", "--json", data_dir=data_dir, check=True).stdout
    )
    assert Path(out[0]["source"]).name == "slide_2.jpg" and out[0]["image"].endswith("slide_2.jpg")
    out = json.loads(cli("search", "espresso", "-k", "1", "--json", data_dir=data_dir, check=True).stdout)
    assert out[0]["modality"] == "text" and "espresso" in out[0]["text"]


def test_inconsistent_original_index_is_refused(minilm, tmp_path: Path, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    vecs = minilm.embed_queries(["a", "b"])
    _write_legacy(tmp_path / "bad", "GVE-3B", vecs, [{"type": "image", "file_path": "x.jpg"}] * 2, count=3)
    proc = cli("corpus", "import-legacy", str(tmp_path / "bad"), "--name", "bad", data_dir=data_dir)
    assert proc.returncode == 1 and "inconsistent index" in proc.stderr
    proc = cli("corpus", "import-legacy", str(tmp_path), "--name", "bad", data_dir=data_dir)
    assert proc.returncode == 1 and "not an original VRAG index folder" in proc.stderr
    assert "bad" not in cli("corpus", "list", data_dir=data_dir).stdout


def test_original_index_counts_that_disagree_are_named(minilm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.legacy import read_legacy_index

    vecs = minilm.embed_queries(["a", "b"])
    records = [{"type": "image", "file_path": f"p_{i}.jpg"} for i in range(3)]
    _write_legacy(tmp_path / "idx", "GVE-3B", vecs, records, count=2)  # FAISS 2 = meta 2, records 3
    with pytest.raises(CorpusError) as err:
        read_legacy_index(tmp_path / "idx")
    msg = str(err.value)
    assert (
        "GVE_3B_faiss_index.bin holds 2 vectors" in msg and "GVE_3B_file_data_list.jsonl has 3 records" in msg
    )
    assert "says 2 vectors" in msg and "one record per vector" in msg


def test_bge_m3_index_is_refused_with_what_to_do(minilm, tmp_path: Path, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    docs = tmp_path / "corpus" / "text"
    docs.mkdir(parents=True)
    records = []
    for name in ("a.txt", "b.txt"):
        (docs / name).write_text(f"note {name}")
        records.append({"type": "text", "file_path": str(docs / name), "content": f"note {name}"})
    vecs = np.random.default_rng(0).normal(size=(2, 1024)).astype(np.float32)
    _write_legacy(tmp_path / "bge", "BAAI/bge-m3", vecs, records)
    proc = cli("corpus", "import-legacy", str(tmp_path / "bge"), "--name", "bge", data_dir=data_dir)
    assert proc.returncode == 1
    assert "built with 'BAAI/bge-m3' (bge-m3), a text-only embedding model" in proc.stderr
    assert f"vrag-desktop index {docs} --corpus NAME" in proc.stderr  # where the source files are
    proc = cli(
        "corpus",
        "import-legacy",
        str(tmp_path / "bge"),
        "--name",
        "bge",
        "--embedder",
        "minilm",
        data_dir=data_dir,
    )
    assert proc.returncode == 1 and "bge-m3" in proc.stderr  # no other model can read its vectors
    assert "bge" not in cli("corpus", "list", data_dir=data_dir).stdout


def test_imported_video_records_are_shown_by_a_frame(library, minilm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import cv2
    from PIL import Image

    from vrag_desktop.core.corpus.legacy import import_legacy_index

    video = tmp_path / "corpus" / "video" / "talk_1.mp4"
    video.parent.mkdir(parents=True)
    w = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 10, (64, 48))
    for i in range(20):
        w.write(np.full((48, 64, 3), 10 * i, np.uint8))
    w.release()
    records = [{"type": "video", "file_path": str(video)}, {"type": "video", "file_path": "gone/talk_2.mp4"}]
    _write_legacy(tmp_path / "idx", "Alibaba-NLP/GVE-3B", minilm.embed_queries(["one", "two"]), records)
    corpus = import_legacy_index(library, tmp_path / "idx", "talks", embedder="minilm")
    by_name = {i.name: i for i in corpus.manifest.items()}
    assert by_name["talk_1"].kind == "clip" and by_name["talk_1"].media_path == str(video)
    frame = Path(str(by_name["talk_1"].image_path))
    assert corpus.dir in frame.parents
    assert abs(np.asarray(Image.open(frame).convert("L"), dtype=float).mean() - 100) < 8  # frame 10 of 20
    assert by_name["talk_2"].image_path is None  # a missing video stays listed, with nothing to show


def test_clip_length_is_kept_per_corpus_and_changing_it_recuts(library, minilm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import cv2

    path = tmp_path / "v" / "clip.mp4"
    path.parent.mkdir()
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (64, 48))
    for i in range(120):  # 12 s
        w.write(np.full((48, 64, 3), i * 2, np.uint8))
    w.release()
    corpus = library.open("clips", create=True)
    corpus.clip_seconds = 5
    corpus.add_paths([path])
    drain(corpus.scan())
    drain(corpus.build(minilm, ocr=False))
    assert len(corpus.manifest.items()) == 3
    corpus.close()
    corpus = library.open("clips")  # reopened: still 5-s clips, nothing to redo
    assert corpus.clip_seconds == 5.0
    assert drain(corpus.scan()).unchanged == 1 and corpus.pending_work() == 0
    corpus.clip_seconds = 6
    drain(corpus.scan())
    drain(corpus.build(minilm, ocr=False))
    assert [(c.t_start, c.t_end) for c in corpus.manifest.items()] == [(0.0, 6.0), (6.0, 12.0)]
    assert sorted(corpus.store().ids().tolist()) == sorted(corpus.manifest.vector_ids())


@pytest.mark.parametrize("how", ["token", "close"])
def test_cancel_keeps_work_and_resume_completes(
    library, minilm, make_pdf, tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.progress import CancelToken

    monkeypatch.setattr(minilm, "batch_size", 4)
    pdf = make_pdf("long.pdf", [f"Section {i}: notes on topic number {i}." for i in range(30)])
    corpus = library.open("cancel", create=True)
    corpus.add_paths([pdf])
    drain(corpus.scan())
    token = CancelToken()
    gen = corpus.build(minilm, token)
    start = next(gen)  # said before the first batch is derived: the embedder is ready
    assert (start.phase, start.done, start.total) == ("index", 0, 30)
    first = next(gen)
    assert first.phase == "index" and first.total == 30 and 0 < first.done < 30 and first.rate > 0
    if how == "token":
        token.cancel()
        report = drain(gen)
        assert report.cancelled
    else:
        gen.close()
    kept = len(corpus.manifest.items())
    assert kept >= first.done  # what was embedded before the stop is saved
    assert kept < 30
    assert sorted(corpus.store().ids().tolist()) == sorted(corpus.manifest.vector_ids())
    report = drain(corpus.build(minilm))
    assert report.items == 30 - kept and not report.cancelled
    assert sorted(i.ordinal for i in corpus.manifest.items()) == list(range(1, 31))
    assert sorted(corpus.store().ids().tolist()) == sorted(corpus.manifest.vector_ids())


def test_ivf_is_retrained_when_the_collection_outgrows_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(64, 16))

    def draw(n: int) -> np.ndarray:
        x = centres[rng.integers(0, 64, n)] + 0.3 * rng.normal(size=(n, 16))
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    first = draw(1000)
    s = VectorStore(tmp_path, 16, ann_threshold=16 * 900)
    s.add(np.arange(1000), first)
    s.compact()
    import faiss

    small_nlist = faiss.extract_index_ivf(s._index).nlist
    more = draw(30000)
    s.add(np.arange(1000, 31000), more)
    s.compact()  # 31x more vectors: re-trained with more cells, nothing lost
    reopened = VectorStore(tmp_path, 16)
    assert faiss.extract_index_ivf(reopened._index).nlist >= 4 * small_nlist
    ids = reopened.ids()
    assert len(ids) == 31000 and len(set(ids.tolist())) == 31000
    scores, found = reopened.search(np.concatenate([first[:3], more[:3]]), 1)
    assert found[:, 0].tolist() == [0, 1, 2, 1000, 1001, 1002]
    assert np.allclose(scores[:, 0], 1.0, atol=1e-5)
