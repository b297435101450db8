"""FAISS helpers the store uses: IVF sizing (cells, probes) and reading every id and vector out of a
flat or IVF index."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def _faiss() -> Any:
    from vrag_desktop.core.index.faiss_lib import load_faiss

    return load_faiss()


def ivf_nlist(n: int) -> int:
    """Number of IVF cells: ~4·√n rounded to a power of two, at least 39 training points per cell."""
    target = 4 * math.sqrt(max(n, 1))
    nlist = 2 ** max(4, round(math.log2(target)))
    while nlist > 16 and n < nlist * 39:
        nlist //= 2
    return int(min(nlist, 65536))


def default_nprobe(nlist: int) -> int:
    """Cells visited per query. Measured with bench/search_latency.py on clustered 2048-d data:
    nprobe 16 gives recall@10 0.9995 at nlist 1024 (100k vectors, p50 1.2 ms) and 0.987 at nlist
    4096 (1M vectors, p50 3.7 ms); larger indexes need proportionally more (~sqrt(nlist) / 4)."""
    return int(max(16, round(math.sqrt(nlist) / 4)))


def is_ivf(index: Any) -> bool:
    faiss = _faiss()
    try:
        faiss.extract_index_ivf(index)
        return True
    except Exception:
        return False


def all_vectors(index: Any) -> tuple[np.ndarray, np.ndarray]:
    """(ids, vectors) of every entry of a flat IDMap or an IVF-Flat index."""
    faiss = _faiss()
    if isinstance(index, faiss.IndexIDMap2 | faiss.IndexIDMap):
        n = int(index.ntotal)
        vecs = index.index.reconstruct_n(0, n) if n else np.zeros((0, index.d), np.float32)
        return ids_of(index), vecs
    ivf = faiss.extract_index_ivf(index)
    invlists = ivf.invlists
    ids_parts, vec_parts = [], []
    for lst in range(ivf.nlist):
        size = invlists.list_size(lst)
        if size:
            ids_parts.append(np.array(faiss.rev_swig_ptr(invlists.get_ids(lst), size), dtype=np.int64))
            codes = faiss.rev_swig_ptr(invlists.get_codes(lst), size * invlists.code_size)
            vec_parts.append(np.frombuffer(bytes(codes), dtype=np.float32).reshape(size, ivf.d))
    if not ids_parts:
        return np.zeros(0, np.int64), np.zeros((0, ivf.d), np.float32)
    return np.concatenate(ids_parts), np.ascontiguousarray(np.concatenate(vec_parts))


def ids_of(index: Any) -> np.ndarray:
    faiss = _faiss()
    if isinstance(index, (faiss.IndexIDMap2, faiss.IndexIDMap)):
        return faiss.vector_to_array(index.id_map).astype(np.int64)
    ivf = faiss.extract_index_ivf(index)
    invlists = ivf.invlists
    parts = []
    for lst in range(ivf.nlist):
        size = invlists.list_size(lst)
        if size:
            ptr = invlists.get_ids(lst)
            parts.append(np.array(faiss.rev_swig_ptr(ptr, size), dtype=np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
