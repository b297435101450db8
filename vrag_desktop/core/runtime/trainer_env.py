"""Create the trainer's own virtualenv (TRL, accelerate, vLLM on a GPU), as a cancellable generator.

Why its own environment: TRL 1.16's vLLM support caps ``vllm<=0.31``, which pins a CUDA torch and
``transformers<5.18``, while the app runs newer ones; the trainer is therefore a child process with
its own interpreter (see :mod:`vrag_desktop.core.training.launch`). Two shapes:

- **layered** (CPU, development, tests): a small venv that sees the app's environment through a
  ``.pth`` file, so torch, transformers and ``vrag_desktop`` are the app's; only TRL, accelerate,
  TensorBoard and the trainer package are installed in it (about 20 s; pip does not touch the app's
  environment, whose packages it sees as already installed).
- **full** (GPU): everything in its own venv: CUDA torch, a vLLM TRL accepts, TRL, accelerate,
  optionally DeepSpeed, TensorBoard, the app package and the trainer package.

The commands are a pure function of the inputs (:func:`trainer_env_steps`), tested without pip;
running them is :mod:`.venv`'s. ``python -m vrag_desktop.core.runtime.trainer_env PATH`` makes one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import sysconfig
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

from vrag_desktop.core.progress import Cancelled, CancelToken
from vrag_desktop.core.runtime.venv import (
    EnvCreateError,
    Step,
    base_python,
    build_venv,
    marker_ready,
    venv_python,
)

__all__ = [
    "FULL_PACKAGES",
    "LAYERED_PACKAGES",
    "MARKER",
    "PYTHON_ENV",
    "EnvCreateError",
    "app_site_dirs",
    "create_trainer_env",
    "find_trainer_python",
    "repo_root",
    "trainer_env_info",
    "trainer_env_ready",
    "trainer_env_steps",
]

MARKER = ".vrag-trainer-env.json"
VERSIONS = ".vrag-trainer-versions.json"  # written by the import check, copied into the marker
PYTHON_ENV = "VRAG_TRAINER_PYTHON"  # an existing interpreter to run the trainer with
PTH_NAME = "_vrag_app.pth"
#: What a layered env adds to the app's packages.
LAYERED_PACKAGES = ("trl==1.16.0", "accelerate>=1.10.1", "tensorboard")
#: A full (GPU) env. TRL 1.16's [vllm] extra accepts vllm 0.22–0.31; vllm 0.31.0 pins torch 2.13.0
#: (the app's version, a CUDA build from PyPI), torchvision 0.28.0 and transformers >=5.10.4,<5.18.
FULL_PACKAGES = (
    "torch==2.13.0",
    "torchvision==0.28.0",
    "vllm==0.31.0",
    "transformers>=5.10.4,<5.18",
    "trl==1.16.0",
    "accelerate>=1.10.1",
    "tensorboard",
)
DEEPSPEED = "deepspeed>=0.18.6"
_VERSIONED = (
    "torch",
    "transformers",
    "trl",
    "accelerate",
    "tensorboard",
    "vllm",
    "deepspeed",
    "vrag-desktop",
    "vrag-desktop-trainer",
)
# The import check; argv[1] is where it writes the installed versions (for the marker).
_VERIFY = """\
import importlib.metadata as m, json, sys
import trl, accelerate, vrag_trainer, vrag_desktop.core.training
{extra}
v = {{}}
for n in {names!r}:
    try:
        v[n] = m.version(n)
    except m.PackageNotFoundError:
        pass
open(sys.argv[1], "w").write(json.dumps(v))
print("imports OK:", ", ".join(f"{{k}} {{x}}" for k, x in v.items()))
"""
# Run by the new venv's interpreter: puts the .pth in its own purelib. addsitedir (not a bare path
# line) so the app's own .pth files run too: an editable vrag_desktop is an import hook in one.
_WRITE_PTH = """\
import sys, sysconfig, pathlib
lines = [f"import site; site.addsitedir({d!r})" for d in sys.argv[2:]]
target = pathlib.Path(sysconfig.get_paths()["purelib"]) / sys.argv[1]
target.write_text("\\n".join(lines) + "\\n")
print("layered on", ", ".join(sys.argv[2:]), "via", target)
"""


def repo_root() -> Path | None:
    """The checkout this app runs from (None in an installed wheel or a frozen app)."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "pyproject.toml").is_file() and (root / "vrag_desktop").is_dir() else None


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


def _source_arg(path: Path, editable: bool) -> tuple[str, ...]:
    return ("-e", str(path)) if editable else (str(path),)


def trainer_env_steps(
    path: str | os.PathLike[str],
    *,
    layered: bool,
    base: str,
    trainer_source: str | os.PathLike[str],
    app_source: str | os.PathLike[str] | None = None,
    site_dirs: Sequence[str] = (),
    editable: bool = True,
    deepspeed: bool = False,
    pip_args: Sequence[str] = (),
    step_timeout: float = 3600.0,
) -> list[Step]:
    """The commands that make a trainer env (pure). ``layered`` needs ``site_dirs`` (the app's
    package directories); a full env installs ``app_source`` (the app's checkout, or a
    requirement such as ``vrag-desktop==0.1.0``) with its dependencies."""
    env = Path(path).expanduser()
    python = str(venv_python(env))
    pip = (python, "-m", "pip", "install", "--progress-bar", "off", *pip_args)
    trainer = Path(trainer_source)
    steps = [Step.new_venv(env, base)]
    if layered:
        if not site_dirs:
            raise EnvCreateError("A layered trainer environment needs the app's package directories.")
        packages: tuple[str, ...] = LAYERED_PACKAGES
        steps += [
            Step(
                "Layering on the app's environment (torch, transformers, vrag_desktop come from it)",
                (python, "-c", _WRITE_PTH, PTH_NAME, *site_dirs),
                "Could not write the .pth file that layers the env on the app's",
                60.0,
            ),
            Step(f"Installing {' '.join(packages)}", (*pip, *packages), "pip install failed", step_timeout),
        ]
        extra = ""
    else:
        packages = FULL_PACKAGES + ((DEEPSPEED,) if deepspeed else ())
        if app_source is None:
            raise EnvCreateError("A full trainer environment needs the app package (its checkout).")
        app = Path(app_source)
        app_arg = _source_arg(app, editable) if app.exists() else (str(app_source),)
        steps.append(
            Step(
                f"Installing {' '.join(packages)} and the app (CUDA torch, vLLM: several GB; minutes)",
                (*pip, *packages, *app_arg),
                "pip install failed",
                step_timeout,
            )
        )
        extra = "import torch, vllm; print('CUDA available:', torch.cuda.is_available())"
    steps += [
        Step(
            "Installing the trainer package",
            (*pip, "--no-deps", *_source_arg(trainer, editable)),
            "Could not install the trainer package",
            600.0,
        ),
        Step.import_check(
            "the trainer", python, _VERIFY.format(extra=extra, names=_VERSIONED), str(env / VERSIONS)
        ),
    ]
    return steps


def create_trainer_env(
    path: str | os.PathLike[str],
    *,
    layered: bool,
    deepspeed: bool = False,
    pip_args: Sequence[str] = (),
    cancel: CancelToken | None = None,
    step_timeout: float = 3600.0,
    force: bool = False,
    base: str | None = None,
) -> Generator[str, None, Path]:
    """Create the trainer's env at ``path`` (see the module docstring). Yields progress lines;
    returns the interpreter. Cancel with ``cancel`` or by closing the generator (pip is killed).
    Raises :class:`EnvCreateError`, ``Cancelled`` or ``TimeoutError``."""
    env = Path(path).expanduser().absolute()
    steps: list[Step] = []
    mode = "layered" if layered else "full"
    if force or not trainer_env_ready(env):
        root = repo_root()
        if root is None or not (root / "trainer" / "pyproject.toml").is_file():
            raise EnvCreateError(
                "The trainer package is not here: create the trainer environment from a checkout of "
                "VRAG Desktop (it installs trainer/ from it)."
            )
        editable = (root / ".git").exists()
        steps = trainer_env_steps(
            env,
            layered=layered,
            base=base or base_python("the trainer environment"),
            trainer_source=root / "trainer",
            app_source=root,
            site_dirs=app_site_dirs(),
            editable=editable,
            deepspeed=deepspeed,
            pip_args=pip_args,
            step_timeout=step_timeout,
        )

    def record() -> dict[str, Any]:
        try:
            versions = json.loads((env / VERSIONS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            versions = {}
        out: dict[str, Any] = {"mode": mode, "versions": versions, "deepspeed": deepspeed}
        out["packages"] = list(LAYERED_PACKAGES if layered else FULL_PACKAGES)
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
    """``python -m vrag_desktop.core.runtime.trainer_env [--layered|--full] PATH`` (scripts/setup.sh)."""
    p = argparse.ArgumentParser(prog="python -m vrag_desktop.core.runtime.trainer_env")
    p.add_argument("path")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--layered", dest="layered", action="store_true", default=True)
    mode.add_argument("--full", dest="layered", action="store_false")
    p.add_argument("--deepspeed", action="store_true")
    p.add_argument("--force", action="store_true")
    args = p.parse_args(argv)
    gen = create_trainer_env(args.path, layered=args.layered, deepspeed=args.deepspeed, force=args.force)
    try:
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
