"""The built-in catalogue (``catalogue_data.py``) as typed entries, plus entries made from a model
folder's real ``config.json`` and weights, so that every model — listed, downloaded or local — is
sized the same way before anything is loaded.

Why sizes come from the architecture: the hub cannot be asked offline, and the app's own vLLM
estimate (:func:`core.runtime.gpu.estimate_vllm_memory`) already turns a config into parameters and
GPU memory; one estimator means the Models view, the Runtime pre-flight and this catalogue agree.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from vrag_desktop.core.models.errors import NotAModelError

Kind = Literal["answer", "embedder", "reranker"]
KINDS: tuple[str, ...] = ("answer", "embedder", "reranker")

#: The context the "fits" verdict sizes vLLM's KV cache for: a VRAG turn with a few page images
#: and VimRAG's visual memory stay well inside it. The smallest context still called usable:
SERVE_CONTEXT = 32768
MIN_CONTEXT = 8192
#: Activations of an embedder's batch of page images on top of its weights (GPU or RAM).
EMBEDDER_WORKSPACE = 2 * 1024**3
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


@dataclass(frozen=True)
class CatalogueEntry:
    """One model the app knows how to size: from the catalogue, or from a folder's files."""

    id: str
    kind: Kind
    title: str
    licence: str = "see the model card"
    licence_checked: bool = False
    recommended: bool = False
    builtin: bool = False  # ships with the app (never downloaded, never removed)
    aliases: tuple[str, ...] = ()
    note: str = ""
    config: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    params: int = 0
    download_bytes: int = 0  # approximate for catalogue entries, measured for folders
    measured: bool = False  # sizes read from real files (a downloaded or local model)
    folder: Path | None = None

    def matches(self, spec: str) -> bool:
        key = spec.strip().lower()
        return key == self.id.lower() or key in (a.lower() for a in self.aliases)

    @property
    def size_text(self) -> str:
        """``~16.6 GB`` (approximate) or ``16.6 GB`` (measured)."""
        return ("" if self.measured else "~") + human_bytes(self.download_bytes)


def human_bytes(n: float) -> str:
    """Decimal units, as download sizes are usually shown (``16.6 GB``)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


def _from_data(raw: dict[str, Any]) -> CatalogueEntry:
    from vrag_desktop.core.runtime.gpu import count_params

    config = raw.get("config")
    params = int(raw.get("params") or (count_params(config) if config else 0))
    kind = raw["kind"]
    if kind not in KINDS:
        raise ValueError(f"catalogue entry {raw['id']}: kind {kind!r} is not one of {KINDS}")
    return CatalogueEntry(
        id=raw["id"],
        kind=kind,
        title=raw.get("title", raw["id"]),
        licence=raw.get("licence", "see the model card"),
        licence_checked=bool(raw.get("licence_checked", False)),
        recommended=bool(raw.get("recommended", False)),
        builtin=bool(raw.get("builtin", False)),
        aliases=tuple(raw.get("aliases", ())),
        note=raw.get("note", ""),
        config=config,
        params=params,
        download_bytes=int(raw.get("download_bytes") or params * 2),  # bf16 checkpoints
    )


@functools.cache
def catalogue() -> tuple[CatalogueEntry, ...]:
    """Every built-in entry, answer models first (the order the Models view shows)."""
    from vrag_desktop.core.models.catalogue_data import ENTRIES

    entries = [_from_data(raw) for raw in ENTRIES]
    return tuple(sorted(entries, key=lambda e: KINDS.index(e.kind)))


def find_entry(spec: str) -> CatalogueEntry | None:
    """The catalogue entry ``spec`` names (id or alias, any case), or None."""
    return next((e for e in catalogue() if e.matches(spec)), None)


def guess_kind(name: str, config: dict[str, Any] | None = None, folder: Path | None = None) -> Kind:
    """A reranker by its name (``cross-encoder``, ``rerank``) or its architecture (a sequence
    classifier); an embedder by its name (``embed``, ``gve``, ``minilm``) or its sentence-transformers
    files; otherwise an answer model."""
    low = name.lower()
    archs = (config or {}).get("architectures") or []
    if any(k in low for k in ("cross-encoder", "rerank")) or any(
        str(a).endswith("ForSequenceClassification") for a in archs
    ):
        return "reranker"
    if any(k in low for k in ("embed", "gve", "minilm", "bge", "e5-", "colqwen", "colpali")):
        return "embedder"
    if folder is not None and (folder / "modules.json").is_file():
        return "embedder"
    return "answer"


def weight_files(folder: Path) -> list[Path]:
    """The weight files a loader would read: safetensors if any, else PyTorch ``.bin``."""
    files = [p for p in folder.rglob("*") if p.is_file() and p.suffix in _WEIGHT_SUFFIXES]
    safetensors = [p for p in files if p.suffix == ".safetensors"]
    return safetensors or [p for p in files if p.suffix in (".bin", ".pt", ".pth")]


def check_model_folder(path: str | Path) -> tuple[Path, dict[str, Any], list[Path]]:
    """``(folder, config, weight files)`` of a folder that holds a model; :class:`NotAModelError`
    says what is missing otherwise (no folder, no or bad ``config.json``, no weights, shards the
    index names but the folder lacks)."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise NotAModelError(f"{folder} is not a folder")
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise NotAModelError(
            f"{folder} is not a model folder: it has no config.json (a Hugging Face model folder "
            "holds config.json and its weights, *.safetensors)"
        )
    try:
        config = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotAModelError(f"{cfg_path} cannot be read as JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise NotAModelError(f"{cfg_path} is not a JSON object")
    weights = weight_files(folder)
    if not weights and not (folder / "model.safetensors.index.json").is_file():
        raise NotAModelError(
            f"{folder} has a config.json but no weights (*.safetensors or pytorch_model*.bin): "
            "an unfinished copy or download?"
        )
    missing = _missing_shards(folder)
    if missing:
        raise NotAModelError(
            f"{folder} is incomplete: its weight index names {len(missing)} file(s) it does not have "
            f"({', '.join(missing[:3])})"
        )
    return folder, config, weights


def _missing_shards(folder: Path) -> list[str]:
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index = folder / index_name
        if not index.is_file():
            continue
        try:
            shards = set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values())
        except (OSError, ValueError, AttributeError) as exc:
            return [f"{index_name} unreadable: {exc}"]
        return sorted(s for s in shards if not (folder / s).is_file())
    return []


def entry_from_folder(
    path: str | Path, model_id: str | None = None, kind: Kind | None = None
) -> CatalogueEntry:
    """An entry sized from a model folder's real files (raises :class:`NotAModelError`)."""
    folder, config, weights = check_model_folder(path)
    known = find_entry(model_id) if model_id else None
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.name.startswith(".vrag"))
    weight_bytes = sum(w.stat().st_size for w in weights)
    try:
        from vrag_desktop.core.runtime.gpu import estimate_vllm_memory

        params = estimate_vllm_memory(folder).params  # from the weights' sizes when it can
    except (KeyError, ValueError, TypeError, OSError):
        params = weight_bytes // 2
    name = model_id or folder.name
    return CatalogueEntry(
        id=name,
        kind=kind or (known.kind if known else guess_kind(name, config, folder)),
        title=known.title if known else name,
        licence=known.licence if known else _licence_of(config),
        licence_checked=known.licence_checked if known else False,
        note=known.note if known else "",
        config=config,
        params=int(params),
        download_bytes=size,
        measured=True,
        folder=folder,
    )


def _licence_of(config: dict[str, Any]) -> str:
    value = config.get("license") or config.get("licence")
    return str(value) if value else "see the model card"
