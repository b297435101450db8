"""Kill a real `vrag-desktop index` process with SIGKILL at arbitrary moments, several times; the
final index must hold every item exactly once (no loss, no duplicate vectors)."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from conftest import cli

from vrag_desktop.core.corpus.library import Library


def _committed_items(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(con.execute("SELECT COUNT(*) FROM items").fetchone()[0])
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0


def test_sigkill_mid_build_then_resume(tmp_path: Path, make_pdf) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(1234)
    docs = tmp_path / "docs"
    expected: dict[str, int] = {}
    topics = ["glacier ice cores", "sourdough fermentation", "tidal energy turbines", "medieval bookbinding"]
    for d, topic in enumerate(topics):
        n = 36  # commits come a batch (32 items) at a time: enough for three kills mid-build
        make_pdf(
            f"doc{d}.pdf",
            [f"Chapter {p + 1} on {topic}. " + f"Detail {p} about {topic}. " * 20 for p in range(n)],
            folder=docs,
        )
        expected[f"doc{d}.pdf"] = n
    (docs / "note.txt").write_text("A short note about the harbour lighthouse keeper.")
    expected["note.txt"] = 1
    total = sum(expected.values())

    data = tmp_path / "data"
    db = data / "corpora" / "k" / "manifest.sqlite"
    env = {
        **os.environ,
        "VRAG_DESKTOP_DATA_DIR": str(data),
        "VRAG_DESKTOP_CHECKPOINT_ITEMS": "4",
        "VRAG_DESKTOP_CHECKPOINT_SECONDS": "0.5",
    }
    cmd = [sys.executable, "-m", "vrag_desktop", "index", str(docs), "--corpus", "k", "--quiet"]
    progress_at_kill = []
    # Kill until three kills have landed mid-build; a fast machine may finish early, so allow more tries.
    for _attempt in range(8):
        if len([n for n in progress_at_kill if 0 < n < total]) >= 3:
            break
        before = _committed_items(db)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # Wait until this run has committed something new, then kill at a random instant after that
        # (inside a batch, during a segment write, or between segment and manifest commit).
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and _committed_items(db) <= before:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.3))
        if proc.poll() is not None:
            break  # finished before we could kill it
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        progress_at_kill.append(_committed_items(db))
    # Several kills really landed mid-build (otherwise this test would prove nothing).
    mid = [n for n in progress_at_kill if 0 < n < total]
    assert len(mid) >= 3, progress_at_kill

    final = cli(
        "index",
        str(docs),
        "--corpus",
        "k",
        "--quiet",
        data_dir=data,
        env={"VRAG_DESKTOP_CHECKPOINT_ITEMS": "6"},
    )
    assert final.returncode == 0, final.stderr

    corpus = Library(data).open("k")
    try:
        m = corpus.manifest
        items = m.items()
        per_file: dict[str, list[int]] = {}
        for it in items:
            src = m.source(it.source_id)
            assert src is not None
            per_file.setdefault(Path(src.path).name, []).append(it.ordinal)
        # every page exactly once
        assert {f: sorted(o) for f, o in per_file.items()} == {
            f: list(range(1, n + 1)) for f, n in expected.items()
        }
        assert all(it.status == "embedded" for it in items)
        # every vector exactly once, and index == manifest
        store_ids = corpus.store().ids().tolist()
        assert len(store_ids) == len(set(store_ids)), "duplicate vectors in the index"
        assert sorted(store_ids) == sorted(m.vector_ids())
        with_vectors = {r[0] for r in m._db.execute("SELECT DISTINCT item_id FROM vectors")}
        assert with_vectors == {it.id for it in items}
        assert corpus.stats()["pending_files"] == 0
    finally:
        corpus.close()

    # And the resumed index answers questions.
    hit = cli("search", "sourdough fermentation chapter 7", "-k", "1", "--json", data_dir=data, check=True)
    assert '"doc1.pdf' in hit.stdout or "doc1.pdf" in hit.stdout
