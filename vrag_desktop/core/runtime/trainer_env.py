"""Create the trainer's own virtualenv (TRL, accelerate, vLLM on a GPU), as a cancellable generator.

Why its own environment: TRL 1.16's vLLM support caps ``vllm<=0.31``, which pins a CUDA torch and
``transformers<5.18``, while the app runs newer ones; the trainer is therefore a child process with
its own interpreter (see :mod:`vrag_desktop.core.training.launch`). Three shapes
(:func:`default_mode` picks one):

- **layered** (CPU, development, tests): a small venv that sees the app's environment through a
  ``.pth`` file, so torch, transformers and ``vrag_desktop`` are the app's; only TRL, accelerate,
  TensorBoard and the trainer package are installed in it (about 20 s; pip does not touch the app's
  environment, whose packages it sees as already installed).
- **standalone** (CPU, the frozen app: it has no site-packages to layer on): its own venv with the
  CPU torch (from PyTorch's CPU index), the app package with its dependencies, TRL, accelerate,
  TensorBoard and the trainer package.
- **full** (GPU): everything in its own venv: CUDA torch, a vLLM TRL accepts, TRL, accelerate,
  optionally DeepSpeed, TensorBoard, the app package and the trainer package.

Where the app and trainer packages come from (:func:`find_trainer_sources`): a checkout (``trainer/``
and the checkout itself), else the frozen app's own wheels (``<bundle>/_internal/wheels``, made by
scripts/build-app.sh), else, for an installed wheel, the trainer wheel in ``vrag_desktop/_bundled/``
and a wheel of the app packed from its installed files (:mod:`.app_package`). Never a package index:
nobody holds our names there. A standalone or full env installs the app with ``--no-deps`` and its
headless requirements (:func:`.app_package.headless_requirements`: no Qt, no OCR).

What each shape installs and the commands that do it are a pure function of the inputs
(:mod:`.trainer_env_plan`), tested without pip; running them is :mod:`.venv`'s.
``python -m vrag_desktop.core.runtime.trainer_env PATH`` makes one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import sysconfig
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from vrag_desktop.core.progress import Cancelled, CancelToken
from vrag_desktop.core.runtime.app_package import (
    APP_DIST,
    app_requirements,
    headless_requirements,
    packed_wheel_name,
)
from vrag_desktop.core.runtime.base_python import ensure_base_python
from vrag_desktop.core.runtime.lockfile import env_lock, user_index_settings
from vrag_desktop.core.runtime.proctree import signals_interrupt
from vrag_desktop.core.runtime.trainer_env_plan import (
    CPU_TORCH_INDEX,
    MODES,
    VERSIONS,
    Mode,
    mode_packages,
    trainer_env_steps,
)
from vrag_desktop.core.runtime.venv import (
    EnvCreateError,
    Step,
    build_venv,
    marker_ready,
    venv_python,
    venv_uv,
)

__all__ = [
    "LOCKS",
    "MARKER",
    "PYTHON_ENV",
    "EnvCreateError",
    "TrainerSources",
    "app_site_dirs",
    "create_trainer_env",
    "default_mode",
    "find_trainer_python",
    "find_trainer_sources",
    "repo_root",
    "trainer_env_info",
    "trainer_env_ready",
    "trainer_sources",
]

MARKER = ".vrag-trainer-env.json"
PYTHON_ENV = "VRAG_TRAINER_PYTHON"  # an existing interpreter to run the trainer with
TORCH_INDEX_ENV = "VRAG_TORCH_INDEX_URL"
#: The hashed locks (vrag_desktop/locks/, scripts/lock.sh) of each mode; DeepSpeed has none.
LOCKS: dict[Mode, str] = {
    "layered": "trainer-layered",
    "standalone": "trainer-standalone",
    "full": "trainer-full",
}
#: Where an installed app's wheel carries the trainer's wheel (setup.py puts it there).
BUNDLED_DIR = Path(__file__).resolve().parents[2] / "_bundled"
APP_WHEEL = "vrag_desktop-"
TRAINER_WHEEL = "vrag_desktop_trainer-"


def repo_root() -> Path | None:
    """The checkout this app runs from (None in an installed wheel or a frozen app)."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "pyproject.toml").is_file() and (root / "vrag_desktop").is_dir() else None


def _frozen() -> bool:
    return bool(getattr(sys, "frozen", False))


def default_mode(gpu: bool, *, frozen: bool | None = None) -> Mode:
    """``full`` with a GPU; without one ``layered`` (on the app's own packages), except in the
    frozen app, which has no site-packages to layer on: ``standalone``."""
    if gpu:
        return "full"
    return "standalone" if (_frozen() if frozen is None else frozen) else "layered"


@dataclass(frozen=True)
class TrainerSources:
    """What a trainer env installs the two packages from. ``kind``: ``checkout`` (``trainer`` and
    ``app`` are folders), ``bundle`` (the frozen app's wheels) or ``installed`` (a trainer wheel
    shipped in the installed package; ``app`` is the wheel :mod:`.app_package` packs from the
    installed files, ``packed``, made by the first step)."""

    kind: Literal["checkout", "bundle", "installed"]
    trainer: str
    app: str
    editable: bool = False
    packed: bool = False


def _one_wheel(folder: Path, prefix: str) -> Path | None:
    found = sorted(folder.glob(f"{prefix}*.whl")) if folder.is_dir() else []
    return found[-1] if found else None


def find_trainer_sources(
    *,
    root: Path | None,
    bundle_dir: Path | None,
    installed_dir: Path | None,
    version: str,
    pack_dir: Path | None = None,
) -> TrainerSources:
    """The sources to install (pure: the caller says where to look): ``root`` a checkout,
    ``bundle_dir`` the frozen app's ``_MEIPASS`` (its ``wheels/``), ``installed_dir`` the installed
    package's ``_bundled/``; ``pack_dir`` where an installed app's own wheel is packed (default:
    ``installed_dir``'s sibling ``wheels``). Raises :class:`EnvCreateError` saying what is missing."""
    if root is not None and (root / "trainer" / "pyproject.toml").is_file():
        return TrainerSources("checkout", str(root / "trainer"), str(root), editable=(root / ".git").exists())
    if bundle_dir is not None:
        wheels = bundle_dir / "wheels"
        app, trainer = _one_wheel(wheels, APP_WHEEL), _one_wheel(wheels, TRAINER_WHEEL)
        if app is None or trainer is None:
            raise EnvCreateError(
                f"This app's bundle has no wheels of the app and the trainer in {wheels}: it was not "
                "built by scripts/build-app.sh. Rebuild it, or point VRAG_TRAINER_PYTHON at an "
                "existing trainer environment."
            )
        return TrainerSources("bundle", str(trainer), str(app))
    trainer = _one_wheel(installed_dir, TRAINER_WHEEL) if installed_dir is not None else None
    if trainer is None:
        raise EnvCreateError(
            "The trainer package is not here: this installed app ships no trainer wheel "
            f"({installed_dir}/{TRAINER_WHEEL}*.whl). Create the trainer environment from a checkout "
            "of VRAG Desktop or from the double-click app, or point VRAG_TRAINER_PYTHON at one."
        )
    assert installed_dir is not None  # (a trainer wheel was found in it)
    packed = (pack_dir or installed_dir.parent / "wheels") / packed_wheel_name(APP_DIST, version)
    return TrainerSources("installed", str(trainer), str(packed), packed=True)


def trainer_sources(pack_dir: Path | None = None) -> TrainerSources:
    """:func:`find_trainer_sources` for this app: its checkout, its bundle, or its installed package
    (whose own wheel is packed into ``pack_dir``)."""
    from vrag_desktop._version import __version__

    meipass = getattr(sys, "_MEIPASS", None)
    return find_trainer_sources(
        root=repo_root(),
        bundle_dir=Path(meipass) if _frozen() and meipass else None,
        installed_dir=BUNDLED_DIR,
        version=__version__,
        pack_dir=pack_dir,
    )


def app_site_dirs() -> list[str]:
    """The running interpreter's package directories, which a layered env borrows."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(paths[k] for k in ("purelib", "platlib")))


def trainer_env_ready(path: str | os.PathLike[str]) -> bool:
    """True if a previous :func:`create_trainer_env` finished here."""
    return marker_ready(path, MARKER)


def trainer_env_info(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The marker's record (mode, packages, versions), or None if the env is not ready."""
    if not trainer_env_ready(path):
        return None
    try:
        data = json.loads((Path(path).expanduser() / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def find_trainer_python(default_env: str | os.PathLike[str] | None = None) -> Path | None:
    """The interpreter to run the trainer with: ``$VRAG_TRAINER_PYTHON``, else a ready env at
    ``default_env`` (``<data>/runtime/trainer-env``), else a checkout's ``.venv-trainer`` (what
    scripts/setup.sh makes). None: no trainer environment yet."""
    override = os.environ.get(PYTHON_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    candidates = [Path(default_env).expanduser()] if default_env else []
    root = repo_root()
    if root is not None:
        candidates.append(root / ".venv-trainer")
    for env in candidates:
        if trainer_env_ready(env):
            return venv_python(env)
    return None


def create_trainer_env(
    path: str | os.PathLike[str],
    *,
    mode: Mode,
    deepspeed: bool = False,
    pip_args: Sequence[str] = (),
    cancel: CancelToken | None = None,
    step_timeout: float = 3600.0,
    force: bool = False,
    base: str | None = None,
) -> Generator[str, None, Path]:
    """Create the trainer's env at ``path`` in ``mode`` (see the module docstring;
    :func:`default_mode` picks one). Yields progress lines; returns the interpreter. Cancel with
    ``cancel`` or by closing the generator (pip is killed). Raises :class:`EnvCreateError`,
    ``Cancelled`` or ``TimeoutError``."""
    env = Path(path).expanduser().absolute()
    steps: list[Step] = []
    layered = mode == "layered"
    sources: TrainerSources | None = None
    if force or not trainer_env_ready(env):
        if mode not in MODES:
            raise EnvCreateError(f"Unknown trainer environment mode {mode!r} (one of {', '.join(MODES)}).")
        if layered and _frozen():
            raise EnvCreateError(
                "The double-click app cannot make a layered trainer environment (it has no Python "
                "packages to layer on): make a standalone one (CPU) or a full one (GPU)."
            )
        sources = trainer_sources(pack_dir=env / "wheels")
        base = base or (yield from ensure_base_python("the trainer environment", env, cancel=cancel))
        lock = None if deepspeed else env_lock(LOCKS[mode], base)
        yield (
            f"Installing the versions locked in {lock.path.name} (hashes checked)"
            if lock
            else "No lock for this Python: installing from the packages' version ranges"
        )
        steps = trainer_env_steps(
            env,
            mode=mode,
            base=base,
            lock=lock.path if lock else None,
            uv=venv_uv(),
            trainer_source=sources.trainer,
            app_source=sources.app,
            site_dirs=app_site_dirs(),
            editable=sources.editable,
            deepspeed=deepspeed,
            pip_args=pip_args,
            step_timeout=step_timeout,
            torch_index=os.environ.get(TORCH_INDEX_ENV, "").strip()
            or (None if user_index_settings() else CPU_TORCH_INDEX),
            app_requirements=()
            if layered
            else headless_requirements(
                app_requirements(Path(sources.app) if sources.kind == "checkout" else None)
            ),
            pack_app_with=sys.executable if sources.packed and not layered else None,
        )

    def record() -> dict[str, Any]:
        try:
            versions = json.loads((env / VERSIONS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            versions = {}
        out: dict[str, Any] = {"mode": mode, "versions": versions, "deepspeed": deepspeed}
        out["packages"] = list(mode_packages(mode, deepspeed))
        if sources is not None:
            out["sources"] = sources.kind
        if layered:
            out["layered_on"] = app_site_dirs()
        return out

    return (
        yield from build_venv(
            env,
            steps,
            marker=MARKER,
            record=record,
            label="Trainer environment",
            cancel=cancel,
            force=force,
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m vrag_desktop.core.runtime.trainer_env [--layered|--standalone|--full] PATH``
    (scripts/setup.sh)."""
    p = argparse.ArgumentParser(prog="python -m vrag_desktop.core.runtime.trainer_env")
    p.add_argument("path")
    mode = p.add_mutually_exclusive_group()
    for name in MODES:
        mode.add_argument(f"--{name}", dest="mode", action="store_const", const=name)
    p.add_argument("--deepspeed", action="store_true")
    p.add_argument("--force", action="store_true")
    args = p.parse_args(argv)
    gen = create_trainer_env(
        args.path, mode=args.mode or "layered", deepspeed=args.deepspeed, force=args.force
    )
    try:
        with signals_interrupt():  # SIGTERM/SIGHUP as Ctrl-C: the running pip is stopped with us
            for line in gen:
                print(line, flush=True)
    except KeyboardInterrupt:
        print("Interrupted: the environment is incomplete.", file=sys.stderr)
        return 130
    except (EnvCreateError, Cancelled, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        gen.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
