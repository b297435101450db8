"""`vrag_desktop.core` never imports Qt: the import-linter contract in pyproject.toml, run here so the
test command enforces it, plus proof that the same contract catches a violation."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"


def _lint(cwd: Path, env_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(env_path)}
    return subprocess.run([LINT, "--no-cache"], cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


def test_core_does_not_import_qt() -> None:
    proc = _lint(ROOT, ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "vrag_desktop.core never imports Qt KEPT" in proc.stdout
    assert "vrag_desktop.core never imports the front doors (CLI, Python API) KEPT" in proc.stdout


def test_contract_catches_a_violation(tmp_path: Path) -> None:
    pkg = tmp_path / "vrag_desktop"
    shutil.copytree(ROOT / "vrag_desktop", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "core" / "sneaky.py").write_text(
        textwrap.dedent('''
        """A core module that reaches for a widget, which the contract forbids."""
        from PySide6.QtWidgets import QLabel  # noqa: F401
    ''')
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    proc = _lint(tmp_path, tmp_path)
    assert proc.returncode != 0
    assert "BROKEN" in proc.stdout and "vrag_desktop.core.sneaky" in proc.stdout


def test_importing_core_loads_no_heavy_or_qt_library() -> None:
    code = (
        "import sys, vrag_desktop.cli.main, vrag_desktop.core.search.engine, vrag_desktop.core.corpus.corpus;"
        "heavy = ('torch','transformers','faiss','PySide6','qasync','cv2','pymupdf');"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"
