"""The offline embedder's two forward passes (NumPy for small inputs, transformers on torch for bulk)
give the same vectors as transformers' own tokenizer and model did before, and a search's process
never imports torch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from vrag_desktop.core.embedders import base
from vrag_desktop.core.embedders.minilm import MAX_TOKENS, NUMPY_TOKENS, MiniLMEmbedder, _model_dir

TEXTS = [
    "What was the annual revenue in 2024?",
    "hi",
    "Ünïcödé, 中文 and accents: é à ø — with [brackets] and  double  spaces",
    "word " * 600,  # past the token limit: truncated like transformers' truncation=True
    "",
]


def _reference(texts: list[str]) -> np.ndarray:
    """What the embedder computed before it had a NumPy pass: transformers end to end."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = str(_model_dir())
    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()
    enc = tok(texts, truncation=True, max_length=MAX_TOKENS, padding=True, return_tensors="pt")
    with torch.inference_mode():
        hidden = model(**enc).last_hidden_state
        m = enc["attention_mask"].unsqueeze(-1).float()
        return base.l2_normalize(((hidden * m).sum(1) / m.sum(1)).numpy())


@pytest.fixture(scope="module")
def fresh() -> MiniLMEmbedder:
    return MiniLMEmbedder(device="cpu")


def test_queries_match_transformers_without_loading_torch(fresh: MiniLMEmbedder) -> None:
    got = np.concatenate([fresh.embed_queries([t]) for t in TEXTS])  # a search embeds one at a time
    assert fresh._torch_model is None  # small: the NumPy pass ran
    assert np.abs(got - _reference(TEXTS)).max() < 2e-6


def test_bulk_items_take_the_torch_pass_and_agree_with_the_numpy_pass(fresh: MiniLMEmbedder) -> None:
    long_text = " ".join(f"sentence {i} about robots, revenue and research." for i in range(400))
    items = [base.EmbedInput("text", t) for t in [long_text, *TEXTS]]
    windows = sum(len(fresh.windows(i.text or "")) for i in items)
    assert windows * MAX_TOKENS > NUMPY_TOKENS
    bulk = fresh.embed_items(items)
    assert fresh._torch_model is not None
    one_by_one = [fresh.embed_items([i])[0] for i in items[1:]]  # each small: NumPy
    for a, b in zip(bulk[1:], one_by_one, strict=True):
        assert a.shape == b.shape and np.abs(a - b).max() < 2e-6
    assert bulk[0].shape[0] == len(fresh.windows(long_text)) > 1
    # the long item's first window through NumPy equals its torch vector
    first = fresh._embed_windows(fresh.windows(long_text)[:1])
    assert np.abs(first[0] - bulk[0][0]).max() < 2e-6


def test_a_query_process_never_imports_torch_or_transformers() -> None:
    code = (
        "import sys; from vrag_desktop.core.embedders.minilm import MiniLMEmbedder;"
        "v = MiniLMEmbedder().embed_queries(['annual revenue']);"
        "assert v.shape == (1, 384), v.shape;"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_many_small_batches_move_to_torch_after_the_budget() -> None:
    """An indexing job embeds batch after batch: NumPy (~5× slower per token) only until its budget."""
    from vrag_desktop.core.embedders.minilm import NUMPY_BUDGET

    emb = MiniLMEmbedder(device="cpu")
    item = base.EmbedInput("text", "A short note about the quarterly revenue of the robotics division. " * 8)
    width = len(emb.windows(item.text or "")[0])
    first = emb.embed_items([item])[0]
    assert emb._torch_model is None
    for _ in range(NUMPY_BUDGET // width):
        emb.embed_items([item])
    assert emb._torch_model is not None  # the budget ran out: torch took over
    assert np.abs(emb.embed_items([item])[0] - first).max() < 2e-6
