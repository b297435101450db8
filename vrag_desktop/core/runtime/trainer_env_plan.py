"""What each trainer environment shape installs, and the commands that install it (pure).

Why apart from :mod:`.trainer_env`: the package sets and the step list are a pure function of the
inputs, tested without pip (tests/test_trainer_env_sources.py, tests/test_trainer_env_peft.py) and
read by the verl env (the ``.pth`` that layers an env on the app's packages); finding the sources,
choosing the lock and running the steps stay in :mod:`.trainer_env`. The three shapes (layered,
standalone, full) are described there.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from vrag_desktop.core.runtime.app_package import APP_DIST, names_our_package
from vrag_desktop.core.runtime.lockfile import lock_args
from vrag_desktop.core.runtime.venv import EnvCreateError, Step, venv_python

__all__ = [
    "CPU_TORCH",
    "CPU_TORCH_BUILD",
    "CPU_TORCH_INDEX",
    "DEEPSPEED",
    "FULL_PACKAGES",
    "LAYERED_PACKAGES",
    "MODES",
    "PEFT",
    "PTH_NAME",
    "VERSIONS",
    "Mode",
    "mode_packages",
    "trainer_env_steps",
]

VERSIONS = ".vrag-trainer-versions.json"  # written by the import check, copied into the marker
PTH_NAME = "_vrag_app.pth"
#: LoRA/QLoRA adapters (vrag_trainer/lora.py); pinned to a version built against transformers 5.
PEFT = "peft==0.21.2"
#: What a layered env adds to the app's packages.
LAYERED_PACKAGES = ("trl==1.16.0", "accelerate>=1.10.1", "tensorboard", PEFT)
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
    PEFT,
)
DEEPSPEED = "deepspeed>=0.18.6"
#: A standalone (CPU) env's torch, from PyTorch's CPU index (as scripts/setup.sh does): the app's
#: version without the multi-GB CUDA libraries. ``$VRAG_TORCH_INDEX_URL`` names another index.
CPU_TORCH = "torch==2.13.0"
#: The CPU build by its local version label: whichever index serves it, never a CUDA build.
CPU_TORCH_BUILD = CPU_TORCH + "+cpu"
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
Mode = Literal["layered", "standalone", "full"]
MODES: tuple[Mode, ...] = ("layered", "standalone", "full")
_VERSIONED = (
    "torch",
    "transformers",
    "trl",
    "accelerate",
    "tensorboard",
    "peft",
    "vllm",
    "deepspeed",
    "vrag-desktop",
    "vrag-desktop-trainer",
)
# The import check; argv[1] is where it writes the installed versions (for the marker).
_VERIFY = """\
import importlib.metadata as m, json, sys
import trl, accelerate, vrag_trainer, vrag_desktop.core.training
import peft  # LoRA runs
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


def _source_arg(path: Path, editable: bool) -> tuple[str, ...]:
    return ("-e", str(path)) if editable else (str(path),)


def mode_packages(mode: Mode, deepspeed: bool) -> tuple[str, ...]:
    """The packages a ``mode`` env installs by name when it has no lock (what its marker records)."""
    if mode == "full":
        return FULL_PACKAGES + ((DEEPSPEED,) if deepspeed else ())
    return (CPU_TORCH, *LAYERED_PACKAGES) if mode == "standalone" else LAYERED_PACKAGES


def _torch_index_args(torch_index: str | None) -> tuple[str, ...]:
    if torch_index is None:
        return ()
    return ("--extra-index-url" if torch_index == CPU_TORCH_INDEX else "--index-url", torch_index)


def trainer_env_steps(
    path: str | os.PathLike[str],
    *,
    mode: Mode,
    base: str,
    trainer_source: str | os.PathLike[str],
    app_source: str | os.PathLike[str] | None = None,
    site_dirs: Sequence[str] = (),
    editable: bool = True,
    deepspeed: bool = False,
    pip_args: Sequence[str] = (),
    step_timeout: float = 3600.0,
    torch_index: str | None = CPU_TORCH_INDEX,
    app_requirements: Sequence[str] = (),
    pack_app_with: str | None = None,
    lock: str | os.PathLike[str] | None = None,
    uv: str | None = None,
) -> list[Step]:
    """The commands that make a trainer env (pure). ``layered`` needs ``site_dirs`` (the app's
    package directories); a standalone or full env installs ``app_source`` (the app's checkout or
    its wheel: a path, never a name an index would resolve) without dependencies, and
    ``app_requirements`` (its headless ones) beside the env's packages; a standalone one first
    installs the CPU torch from ``torch_index``. ``pack_app_with``: the interpreter that first packs
    the installed app into the wheel ``app_source`` names. ``trainer_source`` is the trainer's
    folder or wheel (installed without dependencies). ``torch_index``: PyTorch's CPU index is added
    to the person's (``--extra-index-url``), another URL ($VRAG_TORCH_INDEX_URL) replaces it, None
    (they set their own index) adds nothing. ``lock``: a hashed lock of the env's packages, installed
    exactly (``--require-hashes --no-deps``) instead of the package list."""
    if mode not in MODES:
        raise EnvCreateError(f"Unknown trainer environment mode {mode!r} (one of {', '.join(MODES)}).")
    for source in (trainer_source, app_source):
        if source is not None and names_our_package(str(source)):
            raise EnvCreateError(
                f"{source!s} names a package instead of a local wheel or folder: VRAG Desktop's own "
                "packages are installed only from files this installation carries, never from an index."
            )
    env = Path(path).expanduser()
    python = str(venv_python(env))
    pip = (python, "-m", "pip", "install", "--progress-bar", "off", *pip_args)
    trainer = Path(trainer_source)
    editable_trainer = editable and trainer.suffix != ".whl"  # a folder (a checkout's trainer/)
    steps = [Step.new_venv(env, base, uv)]
    extra = ""
    if mode == "layered":
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
            Step(
                f"Installing {' '.join(packages)}" + (f" (locked: {Path(lock).name})" if lock else ""),
                (*pip, *lock_args(lock)) if lock else (*pip, *packages),
                "pip install failed",
                step_timeout,
            ),
        ]
    else:
        packages = mode_packages(mode, deepspeed)
        if app_source is None:
            raise EnvCreateError(
                f"A {mode} trainer environment needs the app package (a checkout or a wheel)."
            )
        app = Path(app_source)
        app_arg = _source_arg(app, editable and app.suffix != ".whl")
        if pack_app_with is not None:
            steps.append(
                Step(
                    "Packing the installed app as a wheel for the environment",
                    (pack_app_with, "-m", "vrag_desktop.core.runtime.app_package", APP_DIST, str(app.parent)),
                    "Could not pack the installed app as a wheel",
                    300.0,
                )
            )
        if mode == "standalone":
            steps.append(
                Step(
                    f"Installing {CPU_TORCH_BUILD} (from {torch_index or 'your package index'}; about 200 MB)",
                    (*pip, CPU_TORCH_BUILD, *_torch_index_args(torch_index)),
                    "pip install of the CPU torch failed",
                    step_timeout,
                )
            )
            title = f"Installing the app's headless dependencies and {' '.join(LAYERED_PACKAGES)} (minutes)"
            extra = "import torch; print('torch', torch.__version__, 'CPU only')"
        else:
            title = (
                f"Installing {' '.join(packages)} and the app's headless dependencies (several GB; minutes)"
            )
            extra = "import torch, vllm; print('CUDA available:', torch.cuda.is_available())"
        steps += [
            Step(
                title + (f" (locked: {Path(lock).name})" if lock else ""),
                (*pip, *lock_args(lock)) if lock else (*pip, *packages, *app_requirements),
                "pip install failed",
                step_timeout,
            ),
            Step("Installing the app package", (*pip, "--no-deps", *app_arg), "pip install failed", 600.0),
        ]
    steps += [
        Step(
            "Installing the trainer package",
            (*pip, "--no-deps", *_source_arg(trainer, editable_trainer)),
            "Could not install the trainer package",
            600.0,
        ),
        Step.import_check(
            "the trainer", python, _VERIFY.format(extra=extra, names=_VERSIONED), str(env / VERSIONS)
        ),
    ]
    return steps
