"""Read the original VRAG index layout so its users can bring existing indexes.

A folder holds ``{name}_faiss_index.bin`` (``IndexFlatIP``), ``{name}_meta_data.json``
(``vector_dimension``, ``num_vectors``, ``model_name``, ``date_created``) and
``{name}_file_data_list.jsonl`` (one record per vector, row-aligned: ``type``, ``file_path``,
optional ``content``). Importing copies the vectors into a new corpus whose items point at the
original files; the original folder is only read. A video record (the original indexes whole video
files) is shown by its middle frame, written into the corpus's derived folder.

Refused, with what to do instead:

- an index whose vector count disagrees between the FAISS file, the metadata and the record list
  (the original's own loader asserts they agree; a half-written save leaves them apart);
- an index built with bge-m3: its vectors live in bge-m3's text-only 1024-d space, and a query must
  be embedded by the same model to be compared with them. VRAG Desktop does not run bge-m3 (it is
  neither shipped nor loadable offline), and no other model's vectors are comparable, so importing
  would give a corpus that can never be searched; the honest route is to index the source files
  again, which gives a multimodal index.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.corpus.corpus import Corpus, CorpusError
from vrag_desktop.core.corpus.manifest import I_EMBEDDED, S_INDEXED, NewItem
from vrag_desktop.core.corpus.original_layout import INDEX_SUFFIX, LIST_SUFFIX, META_SUFFIX, middle_frame
from vrag_desktop.core.index.store import VectorStore


@dataclass
class LegacyIndex:
    name: str
    model_name: str
    dim: int
    vectors: np.ndarray
    records: list[dict[str, Any]]


def read_legacy_index(folder: str | os.PathLike[str]) -> LegacyIndex:
    """Load and validate one three-file index from ``folder``; clear errors for anything off."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CorpusError(f"{folder} is not a folder")
    names = sorted(p.name[: -len(INDEX_SUFFIX)] for p in folder.glob(f"*{INDEX_SUFFIX}"))
    if not names:
        raise CorpusError(f"no *{INDEX_SUFFIX} in {folder}: not an original VRAG index folder")
    if len(names) > 1:
        raise CorpusError(f"{folder} holds several indexes ({', '.join(names)}); import one folder per index")
    name = names[0]
    meta_path, list_path = folder / f"{name}{META_SUFFIX}", folder / f"{name}{LIST_SUFFIX}"
    for p in (meta_path, list_path):
        if not p.exists():
            raise CorpusError(f"incomplete index: {p.name} is missing")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        dim, count, model = int(meta["vector_dimension"]), int(meta["num_vectors"]), str(meta["model_name"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CorpusError(f"{meta_path.name} is not valid index metadata: {exc}") from exc
    records: list[dict[str, Any]] = []
    with open(list_path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except ValueError as exc:
                    raise CorpusError(f"{list_path.name} line {n} is not JSON: {exc}") from exc
    if is_text_only_model(model):
        raise CorpusError(_text_only_message(model, count, records, folder))
    from vrag_desktop.core.index.faiss_lib import load_faiss

    faiss = load_faiss()

    try:
        index = faiss.read_index(str(folder / f"{name}{INDEX_SUFFIX}"))
    except Exception as exc:
        raise CorpusError(f"cannot read {name}{INDEX_SUFFIX}: {exc}") from exc
    if not (index.ntotal == count == len(records)) or index.d != dim:
        raise CorpusError(
            f"inconsistent index: {name}{INDEX_SUFFIX} holds {index.ntotal} vectors of dimension "
            f"{index.d}, {name}{LIST_SUFFIX} has {len(records)} records and {name}{META_SUFFIX} says "
            f"{count} vectors of dimension {dim}; they must agree (one record per vector; a build "
            "that stopped part-way leaves them apart). Run the original's build_index again to finish "
            "the index, or index the source files with VRAG Desktop instead"
        )
    vectors = index.reconstruct_n(0, index.ntotal) if index.ntotal else np.zeros((0, dim), np.float32)
    return LegacyIndex(
        name=name, model_name=model, dim=dim, vectors=vectors.astype(np.float32), records=records
    )


#: Text-only embedding models the original supports and VRAG Desktop does not run (see the docstring).
TEXT_ONLY_MODELS = ("bge-m3", "bge_m3")


def is_text_only_model(model_name: str) -> bool:
    name = model_name.lower()
    return any(m in name for m in TEXT_ONLY_MODELS)


def _text_only_message(model: str, count: int, records: list[dict[str, Any]], folder: Path) -> str:
    paths = [
        _resolve(str(r["file_path"]), folder.resolve())
        for r in records[:1000]  # enough to name the folder; a big index need not be stat'ed whole
        if isinstance(r, dict) and r.get("file_path")
    ]
    found = [os.path.dirname(p) for p in paths if os.path.exists(p)]
    try:
        where = os.path.commonpath(found) if found else "FOLDER_OF_YOUR_FILES"
    except ValueError:  # files on several drives
        where = "FOLDER_OF_YOUR_FILES"
    return (
        f"this index was built with {model!r} (bge-m3), a text-only embedding model VRAG Desktop does "
        f"not run, so its {count} vectors cannot be searched here (a query must be embedded by the "
        "same model). Import the source files instead, which builds an index VRAG Desktop can search: "
        f"vrag-desktop index {shlex.quote(where)} --corpus NAME"
    )


def legacy_embedder_id(model_name: str, dim: int) -> str:
    """The embedder id our loaders give ``model_name`` (so searching needs no re-embedding)."""
    from vrag_desktop.core.embedders import _MINILM_ALIASES
    from vrag_desktop.core.embedders.minilm import MINILM_ID
    from vrag_desktop.core.embedders.qwen_vl_inputs import detect_family

    if model_name.lower() in _MINILM_ALIASES or model_name.lower().endswith("all-minilm-l6-v2"):
        return MINILM_ID
    family = detect_family(model_name)
    base = model_name.rstrip("/\\").replace("\\", "/").split("/")[-1].lower()
    return f"{family or 'legacy'}:{base}:{dim}"


def import_legacy_index(
    library: Any, folder: str | os.PathLike[str], name: str, embedder: str | None = None
) -> Corpus:
    """Create corpus ``name`` from an original index folder (vectors copied, files referenced)."""
    legacy = read_legacy_index(folder)
    if library.exists(name):
        raise CorpusError(f"a corpus named '{name}' already exists")
    model = embedder or legacy.model_name
    corpus: Corpus = library.open(name, create=True)
    try:
        m = corpus.manifest
        m.set_meta("embedder_id", legacy_embedder_id(model, legacy.dim))
        m.set_meta("embedder_model", model)
        m.set_meta("dim", str(legacy.dim))
        m.set_meta("imported_from", str(Path(folder).resolve()))
        base = Path(folder).resolve()
        ids = np.arange(len(legacy.records), dtype=np.int64)
        with m.transaction():
            for row, rec in enumerate(legacy.records):
                path = _resolve(str(rec.get("file_path") or rec.get("uid") or f"record-{row}"), base)
                rtype = str(rec.get("type", "image"))
                kind = {"image": kinds.ITEM_IMAGE, "video": kinds.ITEM_CLIP, "text": kinds.ITEM_TEXT}.get(
                    rtype, kinds.ITEM_IMAGE
                )
                src = m.source_by_path(path)
                st = os.stat(path) if os.path.exists(path) else None
                sid = (
                    src.id
                    if src
                    else m.upsert_source(
                        path,
                        kind=kinds.kind_of(Path(path)) or rtype,
                        size=st.st_size if st else None,
                        mtime_ns=st.st_mtime_ns if st else None,
                        sha256=None,
                        status=S_INDEXED,
                        n_expected=1,
                    )
                )
                if st is not None:
                    m.add_root(path)
                ordinal = len(m.done_ordinals(sid)) + 1
                image = path if kind == kinds.ITEM_IMAGE else None
                if kind == kinds.ITEM_CLIP and st is not None:
                    image = middle_frame(path, corpus.derived_dir / "legacy-frames")
                item_id = m.insert_item(
                    NewItem(
                        source_id=sid,
                        ordinal=ordinal,
                        name=_name(path),
                        kind=kind,
                        status=I_EMBEDDED,
                        image_path=image,
                        media_path=path if kind != kinds.ITEM_IMAGE else None,
                        text=str(rec.get("content") or ""),
                        text_source="file" if rec.get("content") else "none",
                    )
                )
                m.insert_vector(int(ids[row]), item_id, 0)
        # Write the vectors before anything opens the store: opening reconciles it with the manifest,
        # which already lists these ids.
        store = VectorStore(corpus.dir / "index", legacy.dim)
        store.add(ids, legacy.vectors)
        store.compact()
    except BaseException:
        corpus.delete_files()
        raise
    return corpus


def _resolve(path: str, base: Path) -> str:
    """Original paths were relative to wherever its engine ran; try the cwd, then near the index."""
    if os.path.isabs(path):
        return path
    for root in (Path.cwd(), base, *base.parents):
        candidate = root / path
        if candidate.exists():
            return str(candidate)
    return str((Path.cwd() / path).resolve())


def _name(path: str) -> str:
    return Path(path).stem
