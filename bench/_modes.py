"""Benches that time GUI-thread work twice: quietly, and with a pure-Python thread spinning beside it
(the worst case of GIL contention: it never lets the GIL go before the switch interval). Each mode
runs in a fresh process, since a spinning thread cannot be undone; ``--tree`` points the child at
another source tree, so a baseline and this tree are measured on one machine in one go."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODES = ("quiet", "contended")


def add_mode_args(ap: argparse.ArgumentParser) -> None:
    """``--tree``, ``--json`` and the hidden ``--one MODE`` a child process is started with."""
    ap.add_argument("--tree", type=Path, default=ROOT, help="the source tree to measure (default: this one)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)


def use_tree(args: argparse.Namespace) -> Path:
    """Put ``args.tree`` first on ``sys.path`` (before anything of the app is imported)."""
    tree: Path = args.tree.resolve()
    sys.path.insert(0, str(tree))
    return tree


def spin(stop: threading.Event | None = None) -> None:
    """Start a pure-Python thread that runs until ``stop`` is set (or the process ends)."""

    def run() -> None:
        while stop is None or not stop.is_set():
            sum(range(200))

    threading.Thread(target=run, daemon=True).start()


def run_modes(script: str, tree: Path, argv: list[str]) -> dict[str, Any]:
    """Run ``script --tree TREE *argv --one MODE`` for each mode; its last stdout line is its JSON."""
    out: dict[str, Any] = {"tree": str(tree)}
    for mode in MODES:
        cmd = [sys.executable, script, "--tree", str(tree), *argv, "--one", mode]
        done = subprocess.run(cmd, check=True, capture_output=True, text=True)
        out[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    return out
