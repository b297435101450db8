"""How the frozen app (PyInstaller: ``sys.frozen``, ``sys.executable`` is the app itself) starts
processes, checked without building it (tests/test_frozen_app.py runs the real bundle):

- the indexing helper re-runs the app's executable with ``--vrag-derive-child``, which
  ``vrag-desktop``'s main dispatches before parsing commands;
- engines never run under the app's executable: vLLM needs a chosen environment, and a new
  environment needs a Python found on the machine (a clear message when there is none);
- programs it starts get the machine's library path, not the bundle's.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

from vrag_desktop.core.corpus import derive_process
from vrag_desktop.core.runtime import base_python, venv, vllm

cli_main = importlib.import_module("vrag_desktop.cli.main")  # the package's `main` is the function


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> str:
    exe = "/opt/VRAG Désktop/VRAG Desktop"
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", exe)
    return exe


def test_derive_child_reruns_the_app(frozen: str) -> None:
    assert derive_process._child_command() == [frozen, derive_process.CHILD_FLAG]


def test_main_dispatches_the_child_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(derive_process, "child_entry", seen.append)
    assert cli_main.main([derive_process.CHILD_FLAG, "7", "10"]) == 0
    assert seen == [["7", "10"]]


def test_vllm_needs_a_chosen_environment(frozen: str) -> None:
    with pytest.raises(vllm.VLLMLaunchError, match="Python environment that has vLLM"):
        vllm.resolve_python(None)


def test_new_environments_need_a_python_on_the_machine(
    frozen: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never the app's own executable: a Python on PATH (tests/test_base_python.py has the rest)."""
    monkeypatch.delenv("VRAG_BASE_PYTHON", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        venv.EnvCreateError, match=r"No Python 3\.10–3\.13 with venv was found to create the trainer"
    ):
        base_python.find_base_python(purpose="the trainer environment")
    (tmp_path / "python3").symlink_to(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    assert base_python.find_base_python().path == str(tmp_path / "python3")


def test_children_get_the_machines_library_path(frozen: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/VRAG Désktop/_internal")
    monkeypatch.setenv("LD_LIBRARY_PATH_ORIG", "/usr/local/lib")
    cli_main._frozen_environment()
    assert os.environ["LD_LIBRARY_PATH"] == "/usr/local/lib" and "LD_LIBRARY_PATH_ORIG" not in os.environ
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/VRAG Désktop/_internal")
    cli_main._frozen_environment()  # none before: unset
    assert "LD_LIBRARY_PATH" not in os.environ
