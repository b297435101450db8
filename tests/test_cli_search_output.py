"""``vrag-desktop search`` output (issue 31, item 5): the score printed is the score that ranks (the
fused vote in hybrid mode, the cosine beside it only labelled), a page in two corpora is printed once
with its other location, and a closed pipe (``… | head``) ends the command quietly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_search_copies import two_corpora  # noqa: F401 - the fixture

from vrag_desktop.cli.main import EXIT_PIPE, main
from vrag_desktop.core.search import SearchEngine

LINE = re.compile(r"^\s*(\d+)\. (\d\.\d+)  (.*)$")


def _ranked(out: str) -> list[tuple[float, str]]:
    return [(float(m[2]), m[3]) for m in map(LINE.match, out.splitlines()) if m]


def test_the_printed_scores_are_the_ranking_and_copies_print_once(two_corpora, minilm, capsys) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    query = "Revenue grew to 4.2 billion dollars in 2024"
    assert main(["search", query, "-k", "5"]) == 0
    out = capsys.readouterr().out
    ranked = _ranked(out)
    assert len(ranked) == 5, out
    scores = [s for s, _ in ranked]
    assert scores == sorted(scores, reverse=True), out  # never 0.382 above 0.393
    engine = SearchEngine(two_corpora, None, embedder=minilm)
    try:
        hits = engine.search(query, 5)
    finally:
        engine.close()
    assert [f"{s:.4f}" for s in scores] == [f"{h.score:.4f}" for h in hits]  # the fused vote, printed
    for (_, rest), h in zip(ranked, hits, strict=True):
        assert f"[{h.corpus}]" in rest  # two corpora searched: each line says which
        assert h.dense_score is None or f"(cosine {h.dense_score:.3f})" in rest  # labelled, never bare
    # the report's page 2 is in both corpora: one line, and the other location under it
    lines = [rest for _, rest in ranked if "page 2" in rest and "northwind" in rest]
    assert len(lines) == 1, out
    assert re.search(r"also in '(mine|sample)' \(.*(northwind copy|northwind_annual_report_2024)\.pdf\)", out)


def test_dense_search_prints_the_cosine_it_ranks_by(two_corpora, capsys) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    assert main(["search", "governance of Northwind", "-k", "3", "--dense", "--corpus", "sample"]) == 0
    out = capsys.readouterr().out
    ranked = _ranked(out)
    assert len(ranked) == 3 and "cosine" not in out and "[sample]" not in out
    assert all(len(f"{s}".split(".")[1]) <= 3 for s, _ in ranked)
    assert [s for s, _ in ranked] == sorted((s for s, _ in ranked), reverse=True)


@pytest.mark.parametrize("args", [["search", "Northwind revenue", "-k", "20"], ["corpus", "list"]])
def test_a_closed_pipe_ends_the_command_quietly(two_corpora, args: list[str]) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """``vrag-desktop … | head -0``: the reader is gone before anything is written."""
    read, write = os.pipe()
    os.close(read)  # nobody will read: every write fails with EPIPE
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "vrag_desktop", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            env={**os.environ, "VRAG_DESKTOP_DATA_DIR": str(two_corpora.data_dir)},
        )
    finally:
        os.close(write)
    assert proc.returncode == EXIT_PIPE, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == "", proc.stderr


def test_the_pipe_exit_status_is_sigpipes() -> None:
    assert EXIT_PIPE == 141 and Path(os.devnull).exists()


def test_ask_into_a_closed_pipe_stops_quietly_and_saves_the_run(
    library, minilm, make_pdf, data_dir: Path
) -> None:  # type: ignore[no-untyped-def]
    """``vrag-desktop ask … | head -0``: no traceback, and the run is kept as stopped, not left running."""
    import json

    from scripted_openai import ScriptedOpenAI
    from test_api_and_runs import SCRIPT, _corpus

    _corpus(library, minilm, make_pdf)
    read, write = os.pipe()
    os.close(read)
    try:
        with ScriptedOpenAI(SCRIPT, api_key="k") as srv:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "vrag_desktop",
                    "ask",
                    "How heavy?",
                    "--base-url",
                    srv.base_url,
                    "--model",
                    "served",
                    "--corpus",
                    "c",
                ],
                stdout=write,
                stderr=subprocess.PIPE,
                text=True,
                timeout=300,
                env={**os.environ, "VRAG_DESKTOP_DATA_DIR": str(data_dir), "VRAG_DESKTOP_API_KEY": "k"},
            )
    finally:
        os.close(write)
    assert proc.returncode == EXIT_PIPE and "Traceback" not in proc.stderr, proc.stderr
    (run,) = [json.loads(p.read_text()) for p in (data_dir / "runs").glob("*/run.json")]
    assert run["status"] == "cancelled", run["status"]
