"""A short soak (issue 27's reliability suite): indexing, searching and serving at once, with files
added, changed, renamed and deleted between rounds and one indexer killed with SIGKILL mid-build —
then nothing lost, nothing duplicated, nothing stale.

Bounded: a few rounds, about a minute and a half on two cores. Every file holds one made-up word of
its own, so "found" is exact (the one file holding that word is among the hits; BM25 puts it there)
and a stale or lost file cannot hide.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from conftest import cli, serve_search

ROUNDS = 4


def _word(n: int) -> str:
    return f"zorblax{n:04d}quint"


def _write(folder: Path, n: int) -> Path:
    p = folder / f"note-{n:04d}.txt"
    p.write_text(f"Field note {n}: the token {_word(n)} marks this entry. " + "Filler sentence. " * 20)
    return p


@contextmanager
def _stopping(stop: threading.Event) -> Iterator[None]:
    """The readers stop however the block ends (a failed assertion must not leave them spinning)."""
    try:
        yield
    finally:
        stop.set()


@pytest.mark.timeout(600)
def test_index_search_and_serve_at_once_lose_nothing(tmp_path: Path) -> None:
    data, folder = tmp_path / "data", tmp_path / "notes"
    folder.mkdir()
    rng = random.Random(7)
    live: dict[int, Path] = {n: _write(folder, n) for n in range(12)}
    gone: set[int] = set()
    cli("index", str(folder), "--corpus", "soak", "--quiet", data_dir=data, check=True)
    env = {**os.environ, "VRAG_DESKTOP_DATA_DIR": str(data)}
    errors: list[str] = []
    stop = threading.Event()
    asked = [0]

    def reader(url: str) -> None:
        """Searches all the time; every answer must be a 200 with well-formed results."""
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                n = rng.randrange(0, 12 + ROUNDS * 3)
                try:
                    r = client.post(f"{url}/search", json={"queries": [_word(n)], "top_k": 3})
                    if r.status_code != 200:
                        errors.append(f"{r.status_code}: {r.text[:200]}")
                    else:
                        assert isinstance(r.json()["results"][0]["data"], list)
                        asked[0] += 1
                except (httpx.HTTPError, AssertionError, KeyError, ValueError) as exc:
                    errors.append(repr(exc))

    with serve_search(data) as url, _stopping(stop):
        readers = [threading.Thread(target=reader, args=(url,), daemon=True) for _ in range(2)]
        for t in readers:
            t.start()
        next_n = 12
        for round_no in range(ROUNDS):
            for _ in range(3):  # new files
                live[next_n] = _write(folder, next_n)
                next_n += 1
            victim = rng.choice(sorted(live))  # a deletion
            live.pop(victim).unlink()
            gone.add(victim)
            moved = rng.choice(sorted(live))  # a rename
            target = folder / f"renamed-{moved:04d}.txt"
            live[moved].rename(target)
            live[moved] = target
            changed = rng.choice(sorted(live))  # an edit: the same word, new text around it
            live[changed].write_text(
                f"Revised note: {_word(changed)} still marks it. " + "Other words. " * 30
            )
            if round_no == 1:  # an indexer killed with SIGKILL mid-build, then resumed by the next
                proc = subprocess.Popen(
                    [sys.executable, "-m", "vrag_desktop", "corpus", "rescan", "soak", "--quiet"],
                    env={**env, "VRAG_DESKTOP_CHECKPOINT_ITEMS": "1"},
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(4.0)
                proc.send_signal(signal.SIGKILL)
                proc.wait(30)
            done = cli("corpus", "rescan", "soak", "--quiet", data_dir=data)
            assert done.returncode == 0, done.stderr
        stop.set()
        for t in readers:
            t.join(60)
        assert not errors, errors[:5]
        assert asked[0] > 20, f"only {asked[0]} searches answered during the soak"
        # Nothing lost, nothing stale: every live file is found by its word, under its current name;
        # no deleted one is found; the index and the manifest agree exactly.
        words = [_word(n) for n in sorted(live)] + [_word(n) for n in sorted(gone)]
        r = httpx.post(f"{url}/search", json={"queries": words, "top_k": 5}, timeout=60)
        assert r.status_code == 200, r.text
        results = r.json()["results"]
        for n, res in zip(sorted(live), results, strict=False):  # BM25 finds the one file with it
            found = [d["source"] for d in res["data"] if _word(n) in d["content"]]
            assert found == [str(live[n])], (n, found, [d["source"] for d in res["data"]])
        for n, res in zip(sorted(gone), results[len(live) :], strict=True):
            assert all(_word(n) not in d["content"] for d in res["data"]), n
        served_vectors = httpx.get(f"{url}/health").json()["vectors"]
    checked = cli("corpus", "check", "soak", data_dir=data)
    assert checked.returncode == 0 and "no damage found" in checked.stdout, checked.stdout
    from vrag_desktop.core.corpus.library import Library

    corpus = Library(data).open("soak", read_only=True)
    try:
        assert sorted(corpus.store().ids().tolist()) == sorted(corpus.manifest.vector_ids())
        assert served_vectors == len(corpus.manifest.vector_ids())
        assert {s.path for s in corpus.manifest.sources()} == {str(p) for p in live.values()}
        assert {s.status for s in corpus.manifest.sources()} == {"indexed"}
    finally:
        corpus.close()
