"""Write a corpus as the original VRAG search engine's three-file index, so its server can load it.

Why: people who keep running the original's ``search_engine_api.py`` (or its RL rollout) can index
with VRAG Desktop and serve the result there. The layout is the one its ``build_index`` writes and
its loader asserts (reference §2.3), under ``name_file = model_name.replace('/', '_').replace('-', '_')``:

- ``{name_file}_faiss_index.bin``: ``faiss.IndexFlatIP`` over the L2-normalised vectors, row i
  being record i;
- ``{name_file}_meta_data.json``: ``{"vector_dimension", "num_vectors", "model_name",
  "date_created": "%Y-%m-%d-%H-%M-%S"}``; the loader asserts ``model_name`` matches the file names
  and ``num_vectors == ntotal == len(file_data_list)``;
- ``{name_file}_file_data_list.jsonl``: one record per vector, ``{"type": "image"|"video"|"text",
  "file_path": …}`` plus ``"content"`` (the full text) for text.

Records point at files the original can read. What the app derived (PDF page renders, image
copies, video clips) lives in the corpus folder, which the app may rewrite; it is copied (hard-linked
where the disk allows) into ``out_dir/images`` and ``out_dir/videos``, pages named
``{pdf_stem}_{page}.jpg`` as the original's ``pdf2images`` names them (its RL reward rebuilds golden
ids from those names; a name past the file system's 255 bytes keeps its ``_{page}`` and loses the
end of its stem). The person's own files (text notes, a whole video indexed without clip
files) are referenced where they are. Paths are absolute, or relative to ``path_base`` (the folder
the original server runs from) when given. The three files are written atomically, the vectors
last-but-one and the record list last, so the loader never pairs new vectors with old records
after a successful export.

A corpus indexed by a multi-vector embedder (text chunks) gives one record per vector, each with
the item's full text, as the original does for a whole text file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.corpus.corpus import Corpus, CorpusError
from vrag_desktop.core.corpus.manifest import ItemRow
from vrag_desktop.core.fsutil import (
    NAME_MAX,
    atomic_open,
    atomic_write_bytes,
    atomic_write_text,
    name_bytes,
    shorten_name,
)

INDEX_SUFFIX = "_faiss_index.bin"
META_SUFFIX = "_meta_data.json"
LIST_SUFFIX = "_file_data_list.jsonl"
DATE_FORMAT = "%Y-%m-%d-%H-%M-%S"


def name_file(model_name: str) -> str:
    """The file-name stem the original derives from a model name."""
    return model_name.replace("/", "_").replace("-", "_")


@dataclass
class ExportReport:
    out_dir: Path
    name_file: str
    model_name: str
    vectors: int = 0
    files_copied: int = 0
    #: (item name, why) for vectors left out because their file is gone
    skipped: list[tuple[str, str]] = field(default_factory=list)


def export_original(
    corpus: Corpus,
    out_dir: str | os.PathLike[str],
    model_name: str | None = None,
    *,
    path_base: str | os.PathLike[str] | None = None,
) -> ExportReport:
    """Write ``corpus`` into ``out_dir`` in the original three-file layout (see the module docstring).

    ``model_name`` names the files and goes into the metadata; default: the model the corpus was
    indexed with. The original server must be started with the identical string."""
    m = corpus.manifest
    model = (model_name or m.get_meta("embedder_model") or corpus.embedder_id or "").strip()
    dim = corpus.dim
    if dim is None or not model:
        raise CorpusError(f"corpus '{corpus.name}' has not been indexed yet: nothing to export")
    stem = name_file(model)
    if not stem or any(c in stem for c in "\\\0") or stem in (".", ".."):
        raise CorpusError(f"model name {model!r} cannot name index files")
    out = Path(out_dir).resolve()
    if out.exists() and not out.is_dir():
        raise CorpusError(f"{out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    others = sorted(p.name for p in out.glob(f"*{INDEX_SUFFIX}") if p.name != stem + INDEX_SUFFIX)
    if others:
        raise CorpusError(
            f"{out} already holds another index ({', '.join(others)}); the original's loader reads "
            "one index per folder: export into an empty folder"
        )
    report = ExportReport(out, stem, model)
    held = corpus._lock.is_locked
    corpus.lock()  # a consistent snapshot: no indexing job adds or removes vectors meanwhile
    try:
        _export(corpus, out, stem, model, dim, path_base, report)
    finally:
        if not held:
            corpus.unlock()
    return report


def _export(
    corpus: Corpus,
    out: Path,
    stem: str,
    model: str,
    dim: int,
    path_base: str | os.PathLike[str] | None,
    report: ExportReport,
) -> None:
    m = corpus.manifest
    store = corpus.store()
    ids = np.sort(store.ids())
    rows = m.items_for_vectors(int(i) for i in ids)
    exported: dict[int, dict[str, str] | None] = {}  # item id -> record (None: left out)
    used: set[str] = set()
    keep: list[int] = []
    records: list[dict[str, str]] = []
    for vid in ids.tolist():
        row = rows.get(vid)
        if row is None:
            continue
        if row.id not in exported:
            exported[row.id] = _record(corpus, row, out, used, report)
        rec = exported[row.id]
        if rec is None:
            continue
        if path_base is not None:
            rec = {**rec, "file_path": os.path.relpath(rec["file_path"], Path(path_base).resolve())}
        keep.append(vid)
        records.append(rec)
    vectors = store.vectors(keep) if keep else np.zeros((0, dim), np.float32)
    report.vectors = len(records)
    _write(out, stem, model, dim, _normalised(vectors), records)


#: Item kinds whose record points at a file: (the row's attribute holding it, export subfolder,
#: record type, why the item is left out when the file is gone).
_IMAGE_FILE = ("image_path", "images", "image", "its page/image render is missing (re-index the corpus)")
_FILE_RECORDS: dict[str, tuple[str, str, str, str]] = {
    kinds.ITEM_PAGE: _IMAGE_FILE,
    kinds.ITEM_IMAGE: _IMAGE_FILE,
    kinds.ITEM_CLIP: ("media_path", "videos", "video", "its video file is missing"),
}


def _record(
    corpus: Corpus, row: ItemRow, out: Path, used: set[str], report: ExportReport
) -> dict[str, str] | None:
    """The original's record for one item, copying the file the app derived; None if it is gone."""
    spec = _FILE_RECORDS.get(row.kind)
    if spec is not None:
        attr, folder, rtype, missing = spec
        file: str | None = getattr(row, attr)
        if not file or not os.path.isfile(file):
            report.skipped.append((row.name, missing))
            return None
        path = _place(corpus, file, out / folder, _file_name(row, Path(file).suffix), used)
        report.files_copied += path != file
        return {"type": rtype, "file_path": path}
    src = corpus.manifest.source(row.source_id)
    path = row.media_path or (src.path if src else row.name)
    return {"type": "text", "file_path": os.path.abspath(path), "content": row.text or ""}


def _file_name(row: ItemRow, suffix: str) -> str:
    """``{name}{suffix}``, the stem cut to fit NAME_MAX when it must be (``_{page}`` kept)."""
    name, tail = row.name, suffix
    if row.kind in (kinds.ITEM_PAGE, kinds.ITEM_CLIP) and "_" in name:
        name, number = name.rsplit("_", 1)
        tail = f"_{number}{suffix}"
    return shorten_name(name, NAME_MAX - name_bytes(tail)) + tail


def _place(corpus: Corpus, path: str, folder: Path, name: str, used: set[str]) -> str:
    """Where the exported record points: a copy of a file the app made, or the person's own file.

    Copies keep the original-style base name; a second file of the same name (two ``report.pdf``
    in different folders) goes into a numbered subfolder so that the name stays intact."""
    real = os.path.realpath(path)
    if not _under(real, os.path.realpath(corpus.dir)):
        return os.path.abspath(path)
    target = folder / name
    n = 1
    while str(target) in used:
        n += 1
        target = folder / str(n) / name
    used.add(str(target))
    _copy(real, target)
    return str(target)


def _copy(src: str, target: Path) -> None:
    """Hard-link when possible (same disk, no space used), else copy; atomic either way."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and os.path.samefile(src, target):
        return
    tmp = target.with_name(f".{shorten_name(target.name, NAME_MAX - 6)}.link")
    try:
        if tmp.exists():
            tmp.unlink()
        os.link(src, tmp)
        os.replace(tmp, target)
        return
    except OSError:
        pass
    with open(src, "rb") as fin, atomic_open(target, "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)


def _normalised(vectors: np.ndarray) -> np.ndarray:
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return np.ascontiguousarray(v / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def _write(
    out: Path, stem: str, model: str, dim: int, vectors: np.ndarray, records: list[dict[str, str]]
) -> None:
    from vrag_desktop.core.index.faiss_lib import load_faiss

    faiss = load_faiss()

    index = faiss.IndexFlatIP(dim)
    if len(vectors):
        index.add(vectors)
    meta = {
        "vector_dimension": dim,
        "num_vectors": int(index.ntotal),
        "model_name": model,
        "date_created": time.strftime(DATE_FORMAT),
    }
    atomic_write_text(out / f"{stem}{META_SUFFIX}", json.dumps(meta, indent=4) + "\n")
    atomic_write_bytes(out / f"{stem}{INDEX_SUFFIX}", faiss.serialize_index(index).tobytes())
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    atomic_write_text(out / f"{stem}{LIST_SUFFIX}", lines)


def middle_frame(video: str, cache: Path) -> str | None:
    """Path of ``video``'s middle frame as a JPEG in ``cache``, written once per file version (keyed
    by real path, size and mtime); None if no frame decodes. The original indexes whole video files
    with nothing to show for them: its video records are shown by this frame (the HTTP searcher's
    hits, imported indexes)."""
    try:
        st = os.stat(video)
    except OSError:
        return None
    key = hashlib.sha1(f"{os.path.realpath(video)}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()
    stem = re.sub(r"[^\w.-]", "_", Path(video).stem)[:60] or "video"
    out = cache / f"{stem}-{key[:16]}.jpg"
    if out.is_file():
        return str(out)
    import cv2

    cap = cv2.VideoCapture(video)
    try:
        n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        if n > 2:
            cap.set(cv2.CAP_PROP_POS_FRAMES, n // 2)
        ok, frame = cap.read()
        if not ok and n > 2:  # seeking fails on some streams: take the first frame instead
            cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
            ok, frame = cap.read()
    finally:
        cap.release()
    if not ok or frame is None:
        return None
    ok, buf = cv2.imencode(".jpg", frame, [int(cv2.IMWRITE_JPEG_QUALITY), 90])
    if not ok:
        return None
    atomic_write_bytes(out, buf.tobytes(), mkdir=True)
    return str(out)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


__all__ = ["DATE_FORMAT", "ExportReport", "export_original", "middle_frame", "name_file"]
