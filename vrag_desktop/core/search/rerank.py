"""Reranking: a cross-encoder reads the query and each fused candidate's text together and reorders
the fused top candidates by its score.

Why a second stage: fusion ranks by votes of two rankings that never saw the query and the page
side by side; a cross-encoder (a BERT sequence classifier trained on query–passage relevance, the
sentence-transformers ``CrossEncoder`` layout) does, at a cost per candidate — so it reads only the
fused top :data:`~vrag_desktop.core.search.settings.RERANK_TOP` and keeps the rest after them.

Off by default: no cross-encoder's quality could be measured where this was built (no weights
there), and a default must win on every benchmark (docs/benchmarks.md, "Reranking"). A reranker
that is missing or fails to load or run never stops a search: it answers with the fused ranking and
says so once (:attr:`Reranking.problem`, a log line).

Two forward passes, one model, as for the offline embedder (:mod:`~vrag_desktop.core.embedders.minilm`):
NumPy (:mod:`~vrag_desktop.core.embedders.bert_numpy`, no torch import: a cold ``vrag-desktop
search`` stays fast) and transformers on torch once it pays (bench/rerank_latency.py).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from vrag_desktop.core.search.hit import Hit
from vrag_desktop.core.search.settings import RERANK_TOP

log = logging.getLogger(__name__)

#: Word pieces of a candidate's text the model reads. 128, not 256: the cost nearly doubles with
#: it (bench/rerank_latency.py), 128 is the only budget where a top-50 comes near 150 ms on 2 cores
#: (TinyBERT-L2 on torch), and MS MARCO's training passages are ~100 word pieces; what 256 would
#: gain on whole pages is unmeasured (docs/benchmarks.md, "Reranking").
PASSAGE_TOKENS = 128
#: Word pieces of the query (questions are short; a pasted paragraph is cut).
QUERY_TOKENS = 64
#: Text past this many characters per passage token is never tokenised (English word pieces average
#: 4–5 characters with their spaces; tokenising whole pages cost a top-50 ~80 ms).
CHARS_PER_TOKEN = 8
#: Rows scored per forward pass.
BATCH = 16
#: BLAS threads of the NumPy pass: on a shared 2-core machine 2 threads ran 4–6× slower than one
#: (OpenBLAS's threads spin-wait; bench/rerank_latency.py), as for the embedder's queries.
NUMPY_THREADS = 1
#: Tokens (rows × padded width) a process scores in NumPy before it moves to torch: one query's
#: top-50 is 7,000–14,000 tokens, so a ``vrag-desktop search`` never pays torch's import (seconds),
#: while a long-lived server or app moves to torch after a few queries — torch ran up to 2× faster
#: than NumPy for the larger shapes (bench/rerank_latency.py). A process that has torch already
#: (indexing, the trainer) uses it from the start.
NUMPY_BUDGET = 40_000
_ARCHITECTURES = ("BertForSequenceClassification",)
_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


class RerankError(RuntimeError):
    """The reranker cannot be used (message says what and how to fix it)."""


def model_folder(spec: str, data_dir: str | os.PathLike[str] | None) -> Path:
    """The folder of reranker ``spec``: a model folder itself, else the download of that id in the
    data directory's models folder (a search never downloads). :class:`RerankError` otherwise."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    from vrag_desktop.core.models.store import ModelStore
    from vrag_desktop.core.paths import DataLayout

    found = ModelStore(DataLayout.resolve(data_dir)).path(spec)
    if found is None or not found.is_dir():
        raise RerankError(
            f"the reranker {spec!r} is not downloaded: `vrag-desktop models pull {spec}` (or Models in "
            "the app), or name a model folder"
        )
    return found


def check_config(folder: Path) -> dict[str, Any]:
    """``folder``'s config if it is a BERT cross-encoder with one score; :class:`RerankError` else."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RerankError(f"cannot read {folder / 'config.json'}: {exc}") from None
    if not isinstance(config, dict):
        raise RerankError(f"{folder / 'config.json'} is not a JSON object")
    archs = config.get("architectures") or []
    labels = len(config.get("id2label") or {}) or int(config.get("num_labels", 1) or 1)
    if config.get("model_type") != "bert" or not any(a in _ARCHITECTURES for a in archs) or labels != 1:
        raise RerankError(
            f"{folder} is not a BERT cross-encoder with one relevance score (model_type 'bert', "
            f"BertForSequenceClassification, one label); it has {config.get('model_type')!r}, {archs}, "
            f"{labels} label(s)"
        )
    return config


class CrossEncoder:
    """A BERT cross-encoder from a model folder: ``config.json``, ``model.safetensors`` and
    ``tokenizer.json`` (or ``vocab.txt``). :meth:`scores` are its raw logits (higher: more relevant)."""

    def __init__(self, folder: str | os.PathLike[str], *, passage_tokens: int = PASSAGE_TOKENS) -> None:
        from vrag_desktop.core.embedders.bert_numpy import BertWeights

        self.path = Path(folder)
        config = check_config(self.path)
        weights = self.path / "model.safetensors"
        if not weights.is_file():
            raise RerankError(
                f"{self.path} has no model.safetensors (the reranker reads safetensors weights)"
            )
        self._tok = _tokenizer(self.path)
        ids = [self._tok.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]")]
        if ids[0] is None or ids[1] is None:
            raise RerankError(f"{self.path}'s tokenizer has no [CLS]/[SEP] token: not a BERT tokenizer")
        self._cls, self._sep, self._pad = ids[0], ids[1], ids[2] or 0
        try:
            bert = BertWeights.load(weights, config)
            # half-precision weights run in float32: NumPy has no fast float16 matrix product
            self._bert = bert.sharing({k: _float32(v) for k, v in bert.tensors.items()})
            self._check_shapes(config)
        except RerankError:
            raise
        except Exception as exc:
            raise RerankError(f"cannot load the reranker's weights {weights}: {exc}") from None
        limit = int(config.get("max_position_embeddings", 512))
        self.passage_tokens = max(1, min(passage_tokens, limit - QUERY_TOKENS - 3))
        self._numpy_tokens = 0
        self._torch_model: Any = None
        self._torch: Any = None
        self._lock = threading.Lock()

    def _check_shapes(self, config: dict[str, Any]) -> None:
        """Fail at load, not at the first query, when a tensor is missing or misshapen."""
        w, hidden = self._bert.tensors, int(config["hidden_size"])
        need = {
            "embeddings.word_embeddings.weight": (self._tok.get_vocab_size(), hidden),
            "embeddings.token_type_embeddings.weight": (int(config.get("type_vocab_size", 2)), hidden),
            "pooler.dense.weight": (hidden, hidden),
            "classifier.weight": (1, hidden),
            f"encoder.layer.{self._bert.layers - 1}.output.dense.bias": (hidden,),
        }
        for name, shape in need.items():
            if name not in w:
                raise RerankError(f"{self.path}'s weights lack {name}: not a complete cross-encoder")
            got = tuple(w[name].shape)
            vocab_ok = name.startswith("embeddings.") and got[1:] == shape[1:] and got[0] >= shape[0]
            if got != shape and not vocab_ok:
                raise RerankError(f"{self.path}'s {name} has shape {got}, expected {shape}")

    # ---- inputs
    def pairs(self, query: str, passages: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        """Token ids and segment ids of ``[CLS] query [SEP] passage [SEP]`` per passage, each part
        cut to its budget (as transformers' ``truncation="only_second"`` cuts the passage)."""
        q = self._tok.encode(query, add_special_tokens=False).ids[:QUERY_TOKENS]
        cut = self.passage_tokens * CHARS_PER_TOKEN
        encoded = self._tok.encode_batch([p[:cut] for p in passages], add_special_tokens=False)
        out = []
        for enc in encoded:
            p = enc.ids[: self.passage_tokens]
            out.append(([self._cls, *q, self._sep, *p, self._sep], [0] * (len(q) + 2) + [1] * (len(p) + 1)))
        return out

    # ---- scores
    def scores(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """One relevance logit per passage (float32), in the passages' order."""
        if not passages:
            return np.zeros(0, dtype=np.float32)
        pairs = self.pairs(query, passages)
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]))  # little padding per batch
        out = np.empty(len(pairs), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            idx = order[start : start + BATCH]
            width = max(len(pairs[i][0]) for i in idx)
            ids = np.full((len(idx), width), self._pad, dtype=np.int64)
            types = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for r, i in enumerate(idx):
                n = len(pairs[i][0])
                ids[r, :n], types[r, :n], mask[r, :n] = pairs[i][0], pairs[i][1], 1
            out[idx] = self.forward(ids, mask, types)
        return out

    def forward(
        self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray, *, torch: bool | None = None
    ) -> np.ndarray:
        """Logits of one padded batch: NumPy unless the budget is spent (``torch`` forces a pass)."""
        use_torch = torch if torch is not None else self._numpy_spent(ids.size)
        if not use_torch:
            return self._bert.logits(ids, mask, types, threads=NUMPY_THREADS)[:, 0]
        model = self._load_torch()
        t = self._torch
        with t.inference_mode():
            logits = model(
                input_ids=t.from_numpy(ids),
                attention_mask=t.from_numpy(mask),
                token_type_ids=t.from_numpy(types),
            ).logits
        return np.asarray(logits[:, 0].float().numpy(), dtype=np.float32)

    def _numpy_spent(self, tokens: int) -> bool:
        if self._torch_model is not None or _torch_loaded():
            return True
        self._numpy_tokens += tokens
        return self._numpy_tokens > NUMPY_BUDGET

    def _load_torch(self) -> Any:
        """transformers' BertForSequenceClassification over the same folder, loaded once (CPU)."""
        with self._lock:
            if self._torch_model is None:
                import torch

                from vrag_desktop.core.threadsafe_import import transformers

                tf = transformers()  # not `from transformers import …`: the warm-up may be importing it
                try:
                    model = tf.AutoModelForSequenceClassification.from_pretrained(str(self.path)).eval()
                except Exception as exc:
                    first = next((x.strip() for x in str(exc).splitlines() if x.strip()), type(exc).__name__)
                    raise RerankError(f"cannot load the reranker {self.path} on torch: {first}") from None
                self._torch = torch
                self._torch_model = model
            return self._torch_model


def _torch_loaded() -> bool:
    """Whether this process imported torch already (its import, the NumPy pass's reason, is paid)."""
    return "torch" in sys.modules


def _float32(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) if a.dtype.kind == "f" and a.dtype != np.float32 else a


def _tokenizer(folder: Path) -> Any:
    """The model's fast tokenizer (``tokenizer.json``), else a WordPiece one from ``vocab.txt``."""
    from tokenizers import Tokenizer

    tok: Any
    try:
        if (folder / "tokenizer.json").is_file():
            tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        elif (folder / "vocab.txt").is_file():
            from tokenizers.implementations import BertWordPieceTokenizer

            lower = True
            cfg = folder / "tokenizer_config.json"
            if cfg.is_file():
                lower = bool(json.loads(cfg.read_text(encoding="utf-8")).get("do_lower_case", True))
            tok = BertWordPieceTokenizer(str(folder / "vocab.txt"), lowercase=lower)
        else:
            raise RerankError(f"{folder} has no tokenizer.json or vocab.txt")
    except RerankError:
        raise
    except Exception as exc:
        raise RerankError(f"cannot read the reranker's tokenizer in {folder}: {exc}") from None
    tok.no_truncation()
    tok.no_padding()
    return tok


class Reranking:
    """The engine's reranking stage: the model it was asked for, loaded once, or why it is not used.
    Never raises: a failure leaves :attr:`model` None and :attr:`problem` saying so (logged once)."""

    def __init__(self, spec: str, data_dir: str | os.PathLike[str] | None, top: int = RERANK_TOP) -> None:
        self.spec, self.top = spec, top
        self.model: CrossEncoder | None = None
        self.problem: str | None = None
        try:
            self.model = CrossEncoder(model_folder(spec, data_dir))
        except Exception as exc:  # a broken model must not stop the search
            self._give_up(exc)

    @property
    def active(self) -> bool:
        return self.model is not None

    def depth(self, k: int) -> int:
        """How many fused candidates a search of ``k`` hits needs."""
        return max(k, self.top) if self.model is not None else k

    def apply(self, query: str, hits: list[Hit]) -> list[Hit]:
        """``hits`` (fused order) with the first :attr:`top` that have text reordered by the model's
        score, in the slots they held; hits without text (a scanned page without OCR, a picture)
        keep their places, since the model cannot judge them, and the rest follow unchanged."""
        if self.model is None:
            return hits
        head = hits[: self.top]
        slots = [i for i, h in enumerate(head) if h.text.strip()]
        if not slots:
            return hits
        try:
            scores = self.model.scores(query, [head[i].text for i in slots])
        except Exception as exc:  # e.g. weights that load but do not run
            self._give_up(exc)
            return hits
        ranked = sorted(range(len(slots)), key=lambda j: -float(scores[j]))  # stable: ties keep fused order
        out = list(hits)
        for slot, j in zip(slots, ranked, strict=True):
            s = float(scores[j])
            out[slot] = replace(head[slots[j]], score=s, rerank_score=s)
        return out

    def _give_up(self, exc: BaseException) -> None:
        self.model = None
        text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")  # one line
        detail = text if isinstance(exc, RerankError) else f"{type(exc).__name__}: {text}"
        self.problem = f"the reranker {self.spec!r} is not used ({detail}); hits are in the fused order"
        with _WARNED_LOCK:
            first = self.problem not in _WARNED
            _WARNED.add(self.problem)
        if first:
            log.warning("%s", self.problem)
