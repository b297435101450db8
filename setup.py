"""Packaging glue that pyproject.toml cannot express. Everything else is in pyproject.toml.

- The checkout's top-level ``resources/`` (the sample corpus, icons) ships inside the wheel as
  ``vrag_desktop/resources``, where :func:`vrag_desktop.core.paths.resources_dir` finds it.
- The trainer (``trainer/``, distribution ``vrag-desktop-trainer``) ships as a wheel inside the
  app's wheel, at ``vrag_desktop/_bundled/``: the trainer runs in its own environment, which an
  installed app creates from that wheel (:func:`vrag_desktop.core.runtime.trainer_env.trainer_sources`),
  so ``pip install vrag-desktop`` can train without a checkout. The trainer wheel is built from a
  copy of its sources, so a build leaves nothing in ``trainer/``.
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import find_namespace_packages, find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
TRAINER = HERE / "trainer"
# Each folder under resources/ is a data-only (namespace) package, so its files travel as package data.
RESOURCES = ["vrag_desktop.resources"] + [
    f"vrag_desktop.resources.{name}" for name in find_namespace_packages(where="resources")
]
_BUILD_TRAINER = """
import sys
from setuptools import build_meta
print(build_meta.build_wheel(sys.argv[1]))
"""


class BuildPyWithTrainer(build_py):
    """The app's modules, then the trainer's wheel into ``vrag_desktop/_bundled/``."""

    def run(self) -> None:
        super().run()
        if not (TRAINER / "pyproject.toml").is_file():  # an sdist made without it: no bundled trainer
            return
        out = Path(self.build_lib) / "vrag_desktop" / "_bundled"
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("vrag_desktop_trainer-*.whl"):
            old.unlink()
        with tempfile.TemporaryDirectory(prefix="vrag-trainer-wheel-") as tmp:
            src = Path(tmp) / "trainer"
            src.mkdir()
            shutil.copy2(TRAINER / "pyproject.toml", src / "pyproject.toml")
            shutil.copytree(
                TRAINER / "vrag_trainer",
                src / "vrag_trainer",
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
            subprocess.run([sys.executable, "-c", _BUILD_TRAINER, str(out.resolve())], cwd=src, check=True)


setup(
    packages=find_packages(include=["vrag_desktop", "vrag_desktop.*"]) + RESOURCES,
    package_dir={"vrag_desktop.resources": "resources"},
    # locks/: the engines' environments install these pinned, hashed versions (core/runtime/lockfile.py)
    package_data={"vrag_desktop": ["py.typed", "locks/*.txt"], **{name: ["*", ".*"] for name in RESOURCES}},
    cmdclass={"build_py": BuildPyWithTrainer},
)
