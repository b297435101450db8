"""One search default (issue 33, item 3): ``vrag-desktop search``, ``serve-search``, ``eval retrieval``
and the agents rank the same query the same way, the default of core/search/fusion.py — on a corpus
where dense and hybrid rankings differ, so an entry point searching in another mode would show; and,
with a reranker set (item 2), all of them rank by it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from conftest import index_texts, serve_search

from vrag_desktop.cli.main import main
from vrag_desktop.core.eval.metrics import page_key
from vrag_desktop.core.search import SearchEngine
from vrag_desktop.core.search.fusion import DEFAULT_HYBRID

QUERY = "How much bunting was ordered for the capital ratio party?"
DOCS = {
    "capital.txt": "Total capital ratio 18.5% at March 31, 2022, up from 18.1%.",
    "about.txt": "How the bank manages its capital, and why capital ratios matter to a bank.",
    "ratios.txt": "Capital adequacy: the ratio of capital to risk-weighted assets, explained.",
    "memo.txt": "Memo 2022: staff party on March 31, 18.5 metres of bunting were ordered.",
    "weather.txt": "The weather in spring was mild; rain fell on 18 days.",
}


def _ranking(hits: list[tuple[str, int | None]]) -> list[str]:
    return [page_key(Path(src).name, page) for src, page in hits]


def _index(library, minilm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    index_texts(library, "c", tmp_path / "docs", DOCS, minilm)


def _entry_points(minilm, data_dir: Path, tmp_path: Path, capsys, k: int) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    """The ranking of QUERY by each entry point, each building its search as it does for a person."""
    from vrag_desktop.core.run.assemble import SearchSource

    # the agents: the searcher a run assembles
    searcher = SearchSource(data_dir=data_dir, corpora=("c",), reuse=minilm).searcher()
    try:
        agents = _ranking([(h.source, h.page) for h in searcher.search(QUERY, k)])
    finally:
        searcher.engine.close()  # type: ignore[attr-defined]

    # vrag-desktop search --json
    assert main(["search", QUERY, "-k", str(k), "--corpus", "c", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    cli = _ranking([(h["source"], h.get("page")) for h in out])

    # vrag-desktop eval retrieval: the ranking it scored
    dataset = tmp_path / "q.json"
    item = {
        "uid": "q1",
        "query": QUERY,
        "reference_answer": "18.5%",
        "meta_info": {"file_name": "capital.txt"},
    }
    dataset.write_text(json.dumps({"examples": [item]}))
    folder = tmp_path / "eval"
    args = [
        "eval",
        "retrieval",
        "--dataset",
        str(dataset),
        "--corpus",
        "c",
        "-k",
        str(k),
        "--out",
        str(folder),
    ]
    assert main([*args, "-q"]) == 0
    capsys.readouterr()
    row = json.loads((folder / "results.jsonl").read_text().splitlines()[-1])
    evaluation = row["retrieved"]  # page keys: the file's stem for a text file

    # vrag-desktop serve-search over real HTTP
    with serve_search(data_dir, "--corpus", "c", wait=120) as url:
        body = httpx.post(f"{url}/search", json={"queries": [QUERY], "top_k": k}, timeout=60).json()
    server = _ranking([(d["source"], d.get("page")) for d in body["results"][0]["data"]])
    return {"agents": agents, "cli": cli, "server": server, "evaluation": evaluation}


def test_the_cli_the_server_evaluations_and_agents_rank_alike(
    library, minilm, data_dir: Path, tmp_path, capsys
) -> None:  # type: ignore[no-untyped-def]
    _index(library, minilm, tmp_path)
    k = len(DOCS)
    engines = {mode: SearchEngine(library, ["c"], embedder=minilm, hybrid=mode) for mode in (True, False)}
    try:
        by_mode = {m: _ranking([(h.source, h.page) for h in e.search(QUERY, k)]) for m, e in engines.items()}
    finally:
        for e in engines.values():
            e.close()
    assert by_mode[True] != by_mode[False]  # the test can tell the modes apart
    expected = by_mode[DEFAULT_HYBRID]
    rankings = _entry_points(minilm, data_dir, tmp_path, capsys, k)
    assert rankings == dict.fromkeys(rankings, expected)


def test_with_a_reranker_set_they_all_rank_by_it(library, minilm, data_dir: Path, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The reranker setting (config/search.json) is read where every entry point builds its engine."""
    from tiny_cross_encoder import make_cross_encoder

    from vrag_desktop.core.search.settings import SearchSettings, save_search_settings

    _index(library, minilm, tmp_path)
    model = make_cross_encoder(tmp_path / "reranker", [QUERY, *DOCS.values()], seed=3)
    k = len(DOCS)
    fused_engine = SearchEngine(library, ["c"], embedder=minilm, rerank="")
    reranked_engine = SearchEngine(library, ["c"], embedder=minilm, rerank=str(model))
    try:
        fused = _ranking([(h.source, h.page) for h in fused_engine.search(QUERY, k)])
        expected = _ranking([(h.source, h.page) for h in reranked_engine.search(QUERY, k)])
    finally:
        fused_engine.close()
        reranked_engine.close()
    assert expected != fused  # the test can tell reranked from fused
    save_search_settings(data_dir, SearchSettings(reranker=str(model)))
    rankings = _entry_points(minilm, data_dir, tmp_path, capsys, k)
    assert rankings == dict.fromkeys(rankings, expected)
    fingerprint = json.loads((tmp_path / "eval" / "eval.json").read_text())["fingerprint"]
    assert fingerprint["reranker"] == str(model)  # a folder of another ranking is not resumed into
