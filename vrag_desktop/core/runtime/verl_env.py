"""Create verl's own virtualenv (verl 0.9.1 and the trainer package), as a cancellable generator.

Why its own environment: verl 0.9.1 requires ``transformers>=5.5.3,<5.11`` while the app and the
TRL trainer run newer ones, so verl can live in neither. This env is *layered* like the CPU
trainer env (a ``.pth`` file makes the app's packages visible: torch, ``vrag_desktop``), with verl,
the transformers verl accepts (installed in the env, so it shadows the app's) and the trainer
package (``--no-deps``) installed in it. It is what the opt-in test
``trainer/tests/test_verl_real.py`` and a person trying verl on one machine use; a cluster node
installs verl its own way (``docs/trainer.md``). ``python -m vrag_desktop.core.runtime.verl_env
PATH`` makes one (``scripts/setup.sh --verl`` does not exist: this is opt-in, never part of setup).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Generator, Sequence
from pathlib import Path

from vrag_desktop.core.progress import Cancelled, CancelToken
from vrag_desktop.core.runtime.lockfile import env_lock, lock_args
from vrag_desktop.core.runtime.venv import (
    EnvCreateError,
    Step,
    build_venv,
    marker_ready,
    venv_python,
    venv_uv,
)

__all__ = ["MARKER", "VERL_PACKAGES", "create_verl_env", "verl_env_ready", "verl_env_steps"]

MARKER = ".vrag-verl-env.json"
#: verl with its ``verl-core`` extra (the agent loop imports cachetools, zmq, fastapi…) and the
#: transformers range its wheel declares (``Requires-Dist``).
VERL_PACKAGES = ("verl[verl-core]==0.9.1", "transformers>=5.5.3,<5.11")
_VERIFY = """\
import importlib.metadata as m
import verl, hydra, ray, tensordict, transformers
from verl.experimental.agent_loop.agent_loop import AgentLoopBase
import vrag_trainer, vrag_desktop.core.training
print("imports OK:", ", ".join(f"{n} {m.version(n)}" for n in ("verl", "transformers", "torch", "ray")))
"""


def verl_env_ready(path: str | Path) -> bool:
    """A finished verl env is at ``path`` (its marker is written last)."""
    return marker_ready(path, MARKER)


def verl_env_steps(
    path: str | Path,
    *,
    base: str,
    trainer_source: str | Path,
    site_dirs: Sequence[str],
    pip_args: Sequence[str] = (),
    step_timeout: float = 3600.0,
    lock: str | Path | None = None,
    uv: str | None = None,
) -> list[Step]:
    """The commands that make a verl env (pure): venv, the ``.pth`` onto ``site_dirs`` (the app's
    package directories), verl with its dependencies, the trainer package, an import check."""
    from vrag_desktop.core.runtime.trainer_env_plan import _WRITE_PTH, PTH_NAME

    if not site_dirs:
        raise EnvCreateError("A verl environment layers on the app's packages; none were given.")
    env = Path(path).expanduser()
    python = str(venv_python(env))
    pip = (python, "-m", "pip", "install", "--progress-bar", "off", *pip_args)
    return [
        Step.new_venv(env, base, uv),
        Step(
            "Layering on the app's environment (torch and vrag_desktop come from it)",
            (python, "-c", _WRITE_PTH, PTH_NAME, *site_dirs),
            "Could not write the .pth file that layers the env on the app's",
            60.0,
        ),
        Step(
            f"Installing {' '.join(VERL_PACKAGES)} (Ray, Hydra, tensordict…; minutes)",
            (*pip, *lock_args(lock)) if lock else (*pip, *VERL_PACKAGES),
            "pip install of verl failed",
            step_timeout,
        ),
        Step(
            "Installing the trainer package",
            (*pip, "--no-deps", "-e", str(trainer_source)),
            "Could not install the trainer package",
            600.0,
        ),
        Step.import_check("verl and the trainer", python, _VERIFY),
    ]


def create_verl_env(
    path: str | Path, *, force: bool = False, cancel: CancelToken | None = None
) -> Generator[str, None, Path]:
    """Create the verl env at ``path`` from a checkout (the trainer's folder is needed). Yields
    progress lines; returns the interpreter. Raises :class:`EnvCreateError`, ``Cancelled``."""
    from vrag_desktop.core.runtime.trainer_env import app_site_dirs, repo_root

    env = Path(path).expanduser().absolute()
    steps: list[Step] = []
    if force or not verl_env_ready(env):
        root = repo_root()
        if root is None or not (root / "trainer").is_dir():
            raise EnvCreateError("A verl environment is made from a checkout (trainer/ was not found).")
        lock = env_lock("verl", sys.executable)
        steps = verl_env_steps(
            env,
            base=sys.executable,
            trainer_source=root / "trainer",
            site_dirs=app_site_dirs(),
            lock=lock.path if lock else None,
            uv=venv_uv(),
        )
    return (
        yield from build_venv(
            env,
            steps,
            marker=MARKER,
            record={"packages": list(VERL_PACKAGES)},
            label="verl environment",
            cancel=cancel,
            force=force,
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m vrag_desktop.core.runtime.verl_env [--force] PATH``."""
    p = argparse.ArgumentParser(prog="python -m vrag_desktop.core.runtime.verl_env")
    p.add_argument("path")
    p.add_argument("--force", action="store_true")
    args = p.parse_args(argv)
    gen = create_verl_env(args.path, force=args.force)
    try:
        for line in gen:
            print(line, flush=True)
    except (EnvCreateError, Cancelled, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        gen.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
