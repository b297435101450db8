"""Where the trainer environment's packages come from (a checkout, the frozen app's wheels, an
installed wheel) and which shape it takes (layered, standalone, full): the pure parts of
:mod:`vrag_desktop.core.runtime.trainer_env` and :mod:`~vrag_desktop.core.runtime.trainer_env_plan`,
tested without pip. The real installs from the bundle's wheels are in tests/test_frozen_app.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vrag_desktop.core.runtime import trainer_env
from vrag_desktop.core.runtime.trainer_env import (
    EnvCreateError,
    TrainerSources,
    create_trainer_env,
    default_mode,
    find_trainer_sources,
)
from vrag_desktop.core.runtime.trainer_env_plan import (
    CPU_TORCH,
    CPU_TORCH_BUILD,
    CPU_TORCH_INDEX,
    FULL_PACKAGES,
    LAYERED_PACKAGES,
    trainer_env_steps,
)


def _wheels(folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True)
    app = folder / "vrag_desktop-0.1.0-py3-none-any.whl"
    trainer = folder / "vrag_desktop_trainer-0.1.0-py3-none-any.whl"
    app.touch()
    trainer.touch()
    return app, trainer


def test_default_mode() -> None:
    assert default_mode(True, frozen=False) == default_mode(True, frozen=True) == "full"
    assert default_mode(False, frozen=False) == "layered"
    assert default_mode(False, frozen=True) == "standalone"  # nothing to layer on
    assert default_mode(False) == "layered"  # these tests run from source


def test_sources_from_a_checkout(tmp_path: Path) -> None:
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "pyproject.toml").touch()
    found = find_trainer_sources(root=tmp_path, bundle_dir=None, installed_dir=None, version="0.1.0")
    assert found == TrainerSources("checkout", str(tmp_path / "trainer"), str(tmp_path), editable=False)
    (tmp_path / ".git").mkdir()
    found = find_trainer_sources(root=tmp_path, bundle_dir=tmp_path / "b", installed_dir=None, version="0")
    assert found.kind == "checkout" and found.editable  # a checkout wins over anything else
    # this test run's own checkout
    assert trainer_env.trainer_sources().kind == "checkout"


def test_sources_from_the_frozen_bundle(tmp_path: Path) -> None:
    app, trainer = _wheels(tmp_path / "meipass" / "wheels")
    found = find_trainer_sources(root=None, bundle_dir=tmp_path / "meipass", installed_dir=None, version="0")
    assert found == TrainerSources("bundle", str(trainer), str(app))
    trainer.unlink()
    with pytest.raises(
        EnvCreateError, match=r"no wheels of the app and the trainer in .*scripts/build-app.sh"
    ):
        find_trainer_sources(root=None, bundle_dir=tmp_path / "meipass", installed_dir=None, version="0")


def test_sources_from_an_installed_wheel(tmp_path: Path) -> None:
    bundled = tmp_path / "_bundled"
    with pytest.raises(EnvCreateError, match=r"ships no trainer wheel[\s\S]*from a checkout"):
        find_trainer_sources(root=None, bundle_dir=None, installed_dir=bundled, version="0.1.0")
    _app, trainer = _wheels(bundled)
    found = find_trainer_sources(
        root=tmp_path / "no-checkout", bundle_dir=None, installed_dir=bundled, version="0.1.0"
    )
    packed = tmp_path / "wheels" / "vrag_desktop-0.1.0-py3-none-any.whl"  # packed from the installed files
    assert found == TrainerSources("installed", str(trainer), str(packed), packed=True)


def test_standalone_steps_from_the_bundle_wheels(tmp_path: Path) -> None:
    app, trainer = _wheels(tmp_path / "wheels")
    env = tmp_path / "tenv"
    py = str(env / "bin" / "python")
    steps = trainer_env_steps(
        env,
        mode="standalone",
        base="/usr/bin/python3",
        trainer_source=trainer,
        app_source=app,
        editable=False,
        pip_args=("--retries", "0"),
    )
    assert [s.argv[:3] for s in steps[1:4]] == [(py, "-m", "pip")] * 3
    assert steps[0].argv == ("/usr/bin/python3", "-m", "venv", str(env))
    torch = steps[1].argv
    # PyTorch's CPU index beside the person's own (never --index-url over it), the CPU build by label
    assert torch[-3:] == (CPU_TORCH_BUILD, "--extra-index-url", CPU_TORCH_INDEX) and "--retries" in torch
    install = steps[2].argv
    assert CPU_TORCH in install and "-e" not in install
    assert all(p in install for p in LAYERED_PACKAGES) and "vllm==0.31.0" not in install
    assert steps[3].argv[-2:] == ("--no-deps", str(app))  # its headless requirements come with step 2
    assert steps[4].argv[-2:] == ("--no-deps", str(trainer))
    assert (
        "import trl, accelerate, vrag_trainer" in steps[5].argv[2]
        and "import torch, vllm" not in steps[5].argv[2]
    )
    assert len(steps) == 6 and not any("pth" in a for s in steps for a in s.argv)
    other = trainer_env_steps(
        env,
        mode="standalone",
        base="p",
        trainer_source=trainer,
        app_source=app,
        torch_index="http://mirror/cpu",
    )
    assert other[1].argv[-2:] == ("--index-url", "http://mirror/cpu")
    own = trainer_env_steps(  # they set their own index: nothing added to it
        env, mode="standalone", base="p", trainer_source=trainer, app_source=app, torch_index=None
    )
    assert own[1].argv[-1] == CPU_TORCH_BUILD and not any("index" in a for a in own[1].argv)
    with pytest.raises(EnvCreateError, match="needs the app package"):
        trainer_env_steps(env, mode="standalone", base="p", trainer_source=trainer)


def test_full_steps_from_the_bundle_wheels_and_from_an_installed_app(tmp_path: Path) -> None:
    app, trainer = _wheels(tmp_path / "wheels")
    steps = trainer_env_steps(
        tmp_path / "e", mode="full", base="py", trainer_source=trainer, app_source=app, editable=False
    )
    assert all(p in steps[1].argv for p in FULL_PACKAGES) and steps[2].argv[-2:] == ("--no-deps", str(app))
    assert steps[3].argv[-2:] == ("--no-deps", str(trainer)) and len(steps) == 5
    packed = tmp_path / "wheels" / "vrag_desktop-0.1.0-py3-none-any.whl"
    installed = trainer_env_steps(
        tmp_path / "e",
        mode="full",
        base="py",
        trainer_source=trainer,
        app_source=packed,
        pack_app_with="app-py",
    )
    assert installed[1].argv == (
        "app-py", "-m", "vrag_desktop.core.runtime.app_package", "vrag-desktop", str(packed.parent)
    )  # fmt: skip
    assert installed[3].argv[-2:] == ("--no-deps", str(packed))
    assert installed[4].argv[-2:] == ("--no-deps", str(trainer))  # a wheel is never "-e"
    with pytest.raises(EnvCreateError, match="names a package instead of a local wheel"):
        trainer_env_steps(
            tmp_path / "e", mode="full", base="py", trainer_source=trainer, app_source="vrag-desktop==0.1.0"
        )


def test_layered_steps_for_an_installed_app(tmp_path: Path) -> None:
    _app, trainer = _wheels(tmp_path / "_bundled")
    steps = trainer_env_steps(
        tmp_path / "e", mode="layered", base="py", trainer_source=trainer, site_dirs=["/site"]
    )
    assert steps[2].argv[-len(LAYERED_PACKAGES) :] == LAYERED_PACKAGES and steps[3].argv[-2:] == (
        "--no-deps",
        str(trainer),
    )


def test_bad_modes_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EnvCreateError, match="Unknown trainer environment mode 'gpu'"):
        trainer_env_steps(tmp_path / "e", mode="gpu", base="p", trainer_source="t")  # type: ignore[arg-type]
    with pytest.raises(EnvCreateError, match="Unknown trainer environment mode"):
        next(create_trainer_env(tmp_path / "e", mode="cpu"))  # type: ignore[arg-type]
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    with pytest.raises(EnvCreateError, match="cannot make a layered trainer environment"):
        next(create_trainer_env(tmp_path / "e", mode="layered"))
    assert not (tmp_path / "e").exists()  # refused before anything was made


def test_the_cli_refuses_a_layered_env_in_the_frozen_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from vrag_desktop.cli.main import main

    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setenv("LD_LIBRARY_PATH", "/somewhere")  # what the frozen CLI resets: keep the test's
    rc = main(["--data-dir", str(tmp_path / "d"), "train", "env", "--path", str(tmp_path / "e"), "--layered"])
    assert rc == 1 and "cannot make a layered trainer environment" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()
