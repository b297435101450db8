"""The reranking stage (issue 33, item 2): a BERT cross-encoder reorders the fused top candidates.

Its NumPy pass is held to transformers' ``BertForSequenceClassification`` on a tiny random model of
the real layout; the engine's order is checked against transformers' own scores for the same pairs;
and a reranker that is missing or broken never stops a search: fused hits, said once."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import index_texts
from models_support import online
from test_one_search_default import DOCS as ONE_SEARCH_DOCS
from test_one_search_default import QUERY
from tiny_cross_encoder import make_cross_encoder

from vrag_desktop.cli.main import main
from vrag_desktop.core.search import SearchEngine
from vrag_desktop.core.search.hit import Hit
from vrag_desktop.core.search.rerank import PASSAGE_TOKENS, CrossEncoder, Reranking
from vrag_desktop.core.search.settings import SearchSettings, save_search_settings, settings_path

__all__ = ["online"]  # the fixture, used by name

# the one-search-default test's look-alike pages, and one more that a reranker can move
DOCS = {
    **ONE_SEARCH_DOCS,
    "party.txt": "The party committee ordered food, drinks and bunting for the garden.",
}
LONG = " ".join(f"the bank ordered {i} metres of bunting for party number {i}." for i in range(80))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-ce")
    return make_cross_encoder(folder, [QUERY, LONG, *DOCS.values()], seed=3)


def _transformers_scores(folder: Path, query: str, passages: list[str], budget: int) -> np.ndarray:
    """transformers end to end: its tokenizer cutting the passage (only_second), its model's logits."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    q = len(tok(query, add_special_tokens=False)["input_ids"])
    enc = tok(
        [query] * len(passages),
        passages,
        truncation="only_second",
        max_length=q + budget + 3,
        padding=True,
        return_tensors="pt",
    )
    with torch.inference_mode():
        return np.asarray(model(**enc).logits[:, 0].numpy())


def _index(library: Any, minilm: Any, tmp_path: Path, docs: dict[str, str] = DOCS) -> None:
    index_texts(library, "c", tmp_path / "docs", docs, minilm)


def _names(hits: list[Hit]) -> list[str]:
    return [Path(h.source).name for h in hits]


# ---------------------------------------------------------------- the model


def test_the_numpy_pass_and_torch_give_transformers_scores(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vrag_desktop.core.search import rerank

    monkeypatch.setattr(rerank, "_torch_loaded", lambda: False)  # as in a search's process
    ce = CrossEncoder(model_dir, passage_tokens=24)  # the long passage is cut
    passages = [*DOCS.values(), LONG, ""]
    want = _transformers_scores(model_dir, QUERY, passages, 24)
    got = ce.scores(QUERY, passages)
    assert ce._torch_model is None  # the NumPy pass ran
    assert np.abs(got - want).max() < 1e-5
    assert np.ptp(want) > 0.1  # scores far apart: agreement is not float noise
    pairs = ce.pairs(QUERY, passages)
    width = max(len(p[0]) for p in pairs)
    ids = np.zeros((len(pairs), width), dtype=np.int64)
    types, mask = np.zeros_like(ids), np.zeros_like(ids)
    for r, (i, t) in enumerate(pairs):
        ids[r, : len(i)], types[r, : len(t)], mask[r, : len(i)] = i, t, 1
    on_torch = ce.forward(ids, mask, types, torch=True)
    assert np.abs(on_torch - want).max() < 1e-5
    assert np.abs(ce.forward(ids, mask, types, torch=False) - on_torch).max() < 1e-5


def test_past_its_budget_a_process_moves_to_torch_with_the_same_scores(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vrag_desktop.core.search import rerank

    passages = list(DOCS.values())
    monkeypatch.setattr(rerank, "_torch_loaded", lambda: False)  # a process that never imported torch
    ce = CrossEncoder(model_dir)
    padded = len(passages) * max(len(ids) for ids, _ in ce.pairs(QUERY, passages))  # one batch's tokens
    monkeypatch.setattr(rerank, "NUMPY_BUDGET", 2 * padded)
    first = [ce.scores(QUERY, passages) for _ in range(2)]  # within the budget
    assert ce._torch_model is None
    later = ce.scores(QUERY, passages)  # past it
    assert ce._torch_model is not None
    assert np.abs(later - first[0]).max() < 1e-5 and np.array_equal(first[0], first[1])


def test_a_model_with_only_a_vocab_txt_scores_the_same(model_dir: Path, tmp_path: Path) -> None:
    """Some cross-encoder repositories ship ``vocab.txt`` and no ``tokenizer.json``."""
    import shutil

    from tokenizers import Tokenizer

    folder = tmp_path / "vocab-only"
    shutil.copytree(model_dir, folder)
    vocab = Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab()
    (folder / "tokenizer.json").unlink()
    (folder / "vocab.txt").write_text("".join(f"{t}\n" for t, _ in sorted(vocab.items(), key=lambda x: x[1])))
    passages = [*DOCS.values(), LONG]
    assert CrossEncoder(folder).pairs(QUERY, passages) == CrossEncoder(model_dir).pairs(QUERY, passages)


def test_half_precision_weights_run_in_float32(model_dir: Path, tmp_path: Path) -> None:
    import shutil

    from safetensors.numpy import load_file, save_file

    folder = tmp_path / "fp16"
    shutil.copytree(model_dir, folder)
    tensors = load_file(str(folder / "model.safetensors"))
    save_file(
        {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in tensors.items()},
        str(folder / "model.safetensors"),
    )
    half = CrossEncoder(folder)
    assert all(v.dtype != np.float16 for v in half._bert.tensors.values())
    want = CrossEncoder(model_dir).scores(QUERY, list(DOCS.values()))
    got = half.scores(QUERY, list(DOCS.values()))
    assert np.abs(got - want).max() < 0.05 * np.ptp(want)  # the weights were rounded to 11 bits


def test_scoring_a_query_never_imports_torch_or_transformers(model_dir: Path) -> None:
    code = (
        "import sys; from vrag_desktop.core.search.rerank import CrossEncoder;"
        f"s = CrossEncoder({str(model_dir)!r}).scores('bunting', ['a party', 'capital ratio']);"
        "assert s.shape == (2,), s.shape;"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_cold_search_loads_the_reranker_only_when_one_is_set_and_never_torch(
    library: Any, minilm: Any, data_dir: Path, model_dir: Path, tmp_path: Path
) -> None:
    """``vrag-desktop search`` without a reranker pays nothing for the feature; with one, no torch."""
    _index(library, minilm, tmp_path)
    code = (
        "import sys; from vrag_desktop.cli.main import main;"
        f"assert main(['search', {QUERY!r}, '-k', '3', '--corpus', 'c']) == 0;"
        "print('MODULES', sorted(m for m in ('vrag_desktop.core.search.rerank', 'torch', 'transformers')"
        " if m in sys.modules))"
    )
    env = {**os.environ, "VRAG_DESKTOP_DATA_DIR": str(data_dir)}

    def loaded() -> str:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return next(line for line in out.stdout.splitlines() if line.startswith("MODULES"))

    assert loaded() == "MODULES []"
    save_search_settings(data_dir, SearchSettings(reranker=str(model_dir)))
    assert loaded() == "MODULES ['vrag_desktop.core.search.rerank']"


# ---------------------------------------------------------------- the stage


def test_the_engine_reorders_the_fused_top_by_the_models_scores(
    library: Any, minilm: Any, model_dir: Path, tmp_path: Path
) -> None:
    _index(library, minilm, tmp_path)
    k = len(DOCS)
    fused_engine = SearchEngine(library, ["c"], embedder=minilm, rerank="")
    engine = SearchEngine(library, ["c"], embedder=minilm, rerank=str(model_dir))
    try:
        fused = fused_engine.search(QUERY, k)
        reranked = engine.search(QUERY, k)
        assert engine.reranker == str(model_dir) and fused_engine.reranker is None
        assert not engine.problems
        # the three best by the fused vote only, then the rest: the tail keeps its fused order
        engine._reranking.top = 3  # type: ignore[union-attr]
        top3 = engine.search(QUERY, k)
    finally:
        fused_engine.close()
        engine.close()
    scores = _transformers_scores(model_dir, QUERY, [h.text for h in fused], PASSAGE_TOKENS)
    expected = [fused[i] for i in np.argsort(-scores, kind="stable")]
    assert _names(reranked) == _names(expected)
    assert _names(reranked) != _names(fused)  # the test can tell reranked from fused
    assert all(h.reranked and h.score == h.rerank_score and not h.fused for h in reranked)
    assert [h.score for h in reranked] == sorted((h.score for h in reranked), reverse=True)
    assert "reranker" in reranked[0].score_note and reranked[0].cosine_text.startswith("cosine")
    head = _transformers_scores(model_dir, QUERY, [h.text for h in fused[:3]], PASSAGE_TOKENS)
    assert _names(top3[:3]) == _names([fused[i] for i in np.argsort(-head, kind="stable")])
    assert _names(top3[3:]) == _names(fused[3:]) and not any(h.reranked for h in top3[3:])


def test_hits_without_text_keep_their_places(model_dir: Path) -> None:
    """A scanned page without OCR or a picture cannot be judged by a text model: its slot is kept."""
    texts = list(DOCS.values())
    hits = [
        Hit(score=1.0 - i / 10, name=f"h{i}", source=f"/d/{i}", modality="text", text=t)
        for i, t in enumerate(texts)
    ]
    hits.insert(1, Hit(score=0.95, name="scan", source="/d/scan.pdf", modality="page", text="  "))
    stage = Reranking(str(model_dir), None)
    out = stage.apply(QUERY, hits)
    assert out[1] is hits[1] and not out[1].reranked
    scores = _transformers_scores(model_dir, QUERY, texts, PASSAGE_TOKENS)
    assert [h.name for h in out[:1] + out[2:]] == [f"h{i}" for i in np.argsort(-scores, kind="stable")]


# ---------------------------------------------------------------- bad input


def _broken(kind: str, model_dir: Path, tmp_path: Path) -> tuple[str, str]:
    """(reranker spec, words its problem must hold) for each way a reranker can be unusable."""
    import shutil

    if kind == "not downloaded":
        return "cross-encoder/not-here", "not downloaded"
    folder = tmp_path / re.sub(r"\W+", "-", kind)
    shutil.copytree(model_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    if kind == "config not JSON":
        (folder / "config.json").write_text("{not json")
        return str(folder), "cannot read"
    if kind == "not a cross-encoder":
        (folder / "config.json").write_text(json.dumps({**config, "architectures": ["BertModel"]}))
        return str(folder), "not a BERT cross-encoder"
    if kind == "no weights":
        (folder / "model.safetensors").unlink()
        return str(folder), "no model.safetensors"
    if kind == "weights cut short":
        data = (folder / "model.safetensors").read_bytes()
        (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
        return str(folder), "cannot load the reranker's weights"
    if kind == "no tokenizer":
        (folder / "tokenizer.json").unlink()
        return str(folder), "no tokenizer.json or vocab.txt"
    assert kind.startswith("weights that do not run")  # loads, fails in the first forward pass
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    name = "bert.encoder.layer.0.intermediate.dense.weight"
    tensors[name] = tensors[name][:, :5].copy()
    save_file(tensors, str(folder / "model.safetensors"))
    return str(folder), "cannot load the reranker" if kind.endswith("(torch)") else "ValueError"


BROKEN = [
    "not downloaded",
    "config not JSON",
    "not a cross-encoder",
    "no weights",
    "weights cut short",
    "no tokenizer",
    "weights that do not run",
    "weights that do not run (torch)",
]


@pytest.mark.parametrize("kind", BROKEN)
def test_an_unusable_reranker_leaves_the_fused_ranking_and_says_so_once(
    kind: str,
    library: Any,
    minilm: Any,
    model_dir: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from vrag_desktop.core.search import rerank

    on_torch = kind.endswith("(torch)")  # a process that has torch (the app after indexing)
    monkeypatch.setattr(rerank, "_torch_loaded", lambda: on_torch)  # else NumPy, as in a search's process
    _index(library, minilm, tmp_path)
    spec, words = _broken(kind, model_dir, tmp_path)
    fused_engine = SearchEngine(library, ["c"], embedder=minilm, rerank="")
    fused = _names(fused_engine.search(QUERY, 3))
    fused_engine.close()
    with caplog.at_level(logging.WARNING, logger="vrag_desktop.core.search.rerank"):
        for _ in range(2):  # a second engine (the app's next run) does not warn again
            engine = SearchEngine(library, ["c"], embedder=minilm, rerank=spec)
            try:
                for _ in range(3):
                    assert _names(engine.search(QUERY, 3)) == fused
                assert engine.reranker is None
                problems = [p for p in engine.problems if "reranker" in p]
                assert len(problems) == 1 and words in problems[0] and "fused order" in problems[0]
                assert "\n" not in problems[0]
            finally:
                engine.close()
    warned = [r for r in caplog.records if r.name == "vrag_desktop.core.search.rerank"]
    assert len(warned) == 1 and words in warned[0].getMessage()


def test_the_cli_says_once_that_the_reranker_is_missing_and_answers(
    library: Any, minilm: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _index(library, minilm, tmp_path)
    assert (
        main(["search", QUERY, "-k", "3", "--corpus", "c", "--json", "--rerank", "nobody/no-such-model"]) == 0
    )
    out = capsys.readouterr()
    assert len(json.loads(out.out)) == 3
    lines = [line for line in out.err.splitlines() if "reranker" in line]
    assert len(lines) == 1 and "not downloaded" in lines[0] and "vrag-desktop models pull" in lines[0]


def test_a_damaged_search_setting_is_said_and_left_as_it_is(
    library: Any, minilm: Any, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _index(library, minilm, tmp_path)
    path = settings_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    for bad in ('{"reranker": ', '{"reranker": 7}', '{"reranker": "x", "rerank_top": 0}', "[]"):
        path.write_text(bad)
        assert main(["search", QUERY, "-k", "2", "--corpus", "c"]) == 0
        err = capsys.readouterr().err
        assert "search.json" in err and "without a reranker" in err
        assert path.read_text() == bad  # a reader never writes


def test_the_setting_is_checked_when_set_and_no_rerank_overrides_it(
    library: Any,
    minilm: Any,
    data_dir: Path,
    model_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _index(library, minilm, tmp_path)
    assert main(["models", "settings", "--reranker", "nobody/no-such-model"]) != 0
    assert "not downloaded" in capsys.readouterr().err and not settings_path(data_dir).exists()
    assert main(["models", "settings", "--reranker", str(model_dir)]) == 0
    assert f"reranker: {model_dir} (top 50)" in capsys.readouterr().out
    assert main(["search", QUERY, "-k", "3", "--corpus", "c", "--json"]) == 0
    assert all(h["rerank_score"] is not None for h in json.loads(capsys.readouterr().out))
    assert main(["search", QUERY, "-k", "3", "--corpus", "c", "--json", "--no-rerank"]) == 0
    assert all(h["rerank_score"] is None for h in json.loads(capsys.readouterr().out))
    save_search_settings(data_dir, SearchSettings(reranker=str(tmp_path / "gone")))  # removed since
    assert main(["search", QUERY, "-k", "3", "--corpus", "c", "--no-rerank"]) == 0
    assert "reranker" not in capsys.readouterr().err  # not asked for: not loaded, not warned about
    assert main(["models", "settings", "--no-reranker"]) == 0
    assert "reranker: off (default)" in capsys.readouterr().out


# ---------------------------------------------------------------- model management


def test_catalogue_lists_rerankers_with_their_architecture() -> None:
    from vrag_desktop.core.models import Machine, catalogue, fits
    from vrag_desktop.core.models.catalogue_data import bert_params
    from vrag_desktop.core.runtime.gpu import GiB, GPUReport

    rerankers = {e.id: e for e in catalogue() if e.kind == "reranker"}
    assert set(rerankers) >= {
        "cross-encoder/ms-marco-MiniLM-L-6-v2",
        "cross-encoder/ms-marco-TinyBERT-L-2-v2",
    }
    minilm = rerankers["cross-encoder/ms-marco-MiniLM-L-6-v2"]
    assert abs(minilm.params - 22.7e6) / 22.7e6 < 0.02  # the published size of MiniLM-L6 (BERT, 384 wide)
    machine = Machine(GPUReport((), error="none"), 8 * GiB, 8 * GiB, 10**12, Path("/m"))
    for entry in rerankers.values():
        assert entry.licence and entry.config is not None and entry.params == bert_params(entry.config)
        fit = fits(entry, machine)
        assert fit.device == "cpu" and fit.verdict.value == "fits"


def test_a_reranker_downloaded_through_the_hub_is_checked_and_used(
    online: Any, model_dir: Path, tmp_path: Path
) -> None:
    from fake_hub import sha256
    from models_support import drain as drain_pull

    from vrag_desktop.core.models import ModelSettings, list_models, pull
    from vrag_desktop.core.paths import DataLayout

    repo_id = "cross-encoder/tiny-test-reranker"
    files = {p.name: p.read_bytes() for p in model_dir.iterdir() if p.is_file()}
    online.repo(repo_id).commit(files)
    layout = DataLayout(tmp_path / "data")
    _, result = drain_pull(pull(layout, repo_id, settings=ModelSettings(endpoint=online.url)))
    assert result.model is not None
    marker = json.loads((result.model.path / ".vrag-model.json").read_text())
    assert marker["files"]["model.safetensors"]["sha256"] == sha256(files["model.safetensors"])
    stage = Reranking(repo_id, layout.root)
    assert stage.active and stage.problem is None
    assert stage.model is not None and stage.model.path == result.model.path
    rows = {r.id: r for r in list_models(layout)}
    assert rows[repo_id].kind == "reranker" and rows[repo_id].state == "downloaded"
