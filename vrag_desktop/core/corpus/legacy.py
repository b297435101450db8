"""Read the original VRAG index layout so its users can bring existing indexes.

A folder holds ``{name}_faiss_index.bin`` (``IndexFlatIP``), ``{name}_meta_data.json``
(``vector_dimension``, ``num_vectors``, ``model_name``, ``date_created``) and
``{name}_file_data_list.jsonl`` (one record per vector, row-aligned: ``type``, ``file_path``,
optional ``content``). Importing copies the vectors into a new corpus whose items point at the
original files; the original folder is only read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.corpus.corpus import Corpus, CorpusError
from vrag_desktop.core.corpus.manifest import I_EMBEDDED, S_INDEXED, NewItem
from vrag_desktop.core.index.store import VectorStore

INDEX_SUFFIX = "_faiss_index.bin"
META_SUFFIX = "_meta_data.json"
LIST_SUFFIX = "_file_data_list.jsonl"


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
    records = []
    with open(list_path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except ValueError as exc:
                    raise CorpusError(f"{list_path.name} line {n} is not JSON: {exc}") from exc
    import faiss

    try:
        index = faiss.read_index(str(folder / f"{name}{INDEX_SUFFIX}"))
    except Exception as exc:
        raise CorpusError(f"cannot read {name}{INDEX_SUFFIX}: {exc}") from exc
    if not (index.ntotal == count == len(records)) or index.d != dim:
        raise CorpusError(
            f"inconsistent index: metadata says {count} vectors of dimension {dim}, the FAISS file has "
            f"{index.ntotal} of dimension {index.d}, the record list has {len(records)} lines"
        )
    vectors = index.reconstruct_n(0, index.ntotal) if index.ntotal else np.zeros((0, dim), np.float32)
    return LegacyIndex(
        name=name, model_name=model, dim=dim, vectors=vectors.astype(np.float32), records=records
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
                item_id = m.insert_item(
                    NewItem(
                        source_id=sid,
                        ordinal=ordinal,
                        name=_name(path),
                        kind=kind,
                        status=I_EMBEDDED,
                        image_path=path if kind == kinds.ITEM_IMAGE else None,
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
