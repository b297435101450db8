"""The hashed lock files in ``vrag_desktop/locks/`` (made by scripts/lock.sh), found and checked.

Why: ranges in pyproject and the engines' package lists resolve to whatever an index serves that
day; a lock pins every package of an environment to the versions the project tested, each with its
sha256 hashes, so pip (``--require-hashes``) refuses a substituted file. A lock serves the Pythons
its header names (``# vrag-lock: python=3.11,3.12 platform=x86_64-manylinux_2_35``); elsewhere the
environment is installed from the ranges, as before. ``VRAG_NO_LOCK=1`` does that everywhere.

Also here: whether the person set their own package index (pip's variables or config files), which
the installers then leave alone instead of adding PyTorch's CPU index.

Runs before the app is installed (scripts/setup.sh: ``python -m vrag_desktop.core.runtime.lockfile``),
so it needs the standard library and ``packaging`` (pip's own copy will do).
"""

from __future__ import annotations

import argparse
import configparser
import os
import platform
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # scripts/setup.sh, before anything is installed: pip's vendored copy
    import importlib

    Requirement = importlib.import_module("pip._vendor.packaging.requirements").Requirement  # type: ignore[misc]
    canonicalize_name = importlib.import_module("pip._vendor.packaging.utils").canonicalize_name

__all__ = [
    "DISABLE_ENV",
    "LOCK_DIR",
    "Lock",
    "env_lock",
    "find_lock",
    "install_args",
    "installed_versions",
    "lock_args",
    "lock_drift",
    "project_requirements",
    "read_lock",
    "unsatisfied",
    "user_index_settings",
]

LOCK_DIR = Path(__file__).resolve().parents[2] / "locks"
DISABLE_ENV = "VRAG_NO_LOCK"
_HEADER = re.compile(r"^# vrag-lock: python=(?P<py>[0-9.,]+) platform=(?P<plat>\S+)")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")
#: pip settings that choose where packages come from.
INDEX_SETTINGS = ("index-url", "extra-index-url", "find-links", "no-index")


@dataclass(frozen=True)
class Lock:
    """A lock file: where it is, the Pythons and platform it was resolved for, its pins."""

    path: Path
    pythons: tuple[str, ...]
    platform: str
    pins: Mapping[str, str]


def read_lock(path: str | os.PathLike[str]) -> Lock:
    """Parse a lock; a file without the header, or with an unpinned requirement, is refused."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    head = _HEADER.match(text)
    if head is None:
        raise ValueError(f"{path} is not a lock made by scripts/lock.sh (no '# vrag-lock:' header)")
    pins: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line[0] in "# \t-":
            continue
        m = _PIN.match(line)
        if m is None:
            raise ValueError(f"{path}: not an exact pin: {line.strip()!r}")
        pins[canonicalize_name(m.group(1))] = m.group(2)
    return Lock(path, tuple(head.group("py").split(",")), head.group("plat"), pins)


def _python_text(python: str | Sequence[int]) -> str:
    return python if isinstance(python, str) else ".".join(map(str, tuple(python)[:2]))


def find_lock(
    name: str,
    python: str | Sequence[int],
    *,
    folder: Path | None = None,
    machine: str | None = None,
    system: str | None = None,
) -> Lock | None:
    """The lock ``name`` for ``python`` (``"3.11"`` or a version tuple) on this machine (Linux
    x86-64 only), or None: no lock applies (or ``$VRAG_NO_LOCK=1``)."""
    if os.environ.get(DISABLE_ENV) == "1":
        return None
    if (system or platform.system()) != "Linux":
        return None
    arch = machine or platform.machine()
    py = _python_text(python)
    folder = LOCK_DIR if folder is None else folder
    for path in (folder / f"{name}-py{py}.txt", folder / f"{name}.txt"):
        if not path.is_file():
            continue
        lock = read_lock(path)
        if py in lock.pythons and lock.platform.startswith(arch):
            return lock
    return None


def env_lock(name: str, base: str) -> Lock | None:
    """The lock ``name`` for an environment the interpreter ``base`` creates (its version probed)."""
    from vrag_desktop.core.runtime.base_python import BasePython, probe

    found = probe(base)
    return find_lock(name, found.version) if isinstance(found, BasePython) else None


def lock_args(path: str | os.PathLike[str]) -> tuple[str, ...]:
    """pip's arguments that install exactly the lock at ``path``: every file checked against its
    hashes, no dependency resolved beyond it."""
    return ("--require-hashes", "--no-deps", "-r", str(path))


def install_args(lock: Lock) -> tuple[str, ...]:
    return lock_args(lock.path)


def installed_versions(python: str | os.PathLike[str]) -> dict[str, str]:
    """Every distribution the interpreter ``python`` (an environment's) sees, by canonical name."""
    import json
    import subprocess

    code = (
        "import importlib.metadata as m, json; "
        "print(json.dumps([[d.metadata['Name'] or '', d.version] for d in m.distributions()]))"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return {canonicalize_name(name): version for name, version in json.loads(out.stdout) if name}


def lock_drift(lock: Lock, installed: Mapping[str, str]) -> dict[str, tuple[str, str | None]]:
    """The lock's packages an environment holds at another version, or not at all:
    ``name → (locked, installed or None)``. Empty when it holds exactly the locked versions (what
    it holds beyond the lock, such as torch from its own index or the app itself, is not drift)."""
    return {
        name: (version, installed.get(name))
        for name, version in sorted(lock.pins.items())
        if installed.get(name) != version
    }


def project_requirements(pyproject: Path, extras: Iterable[str] = ()) -> list[str]:
    """pyproject's dependencies plus those of ``extras``."""
    import importlib

    tomllib: Any = importlib.import_module("tomllib")  # Python 3.11+ (the locks' Pythons)
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    out = list(project.get("dependencies", []))
    for extra in extras:
        out += project.get("optional-dependencies", {}).get(extra, [])
    return out


def unsatisfied(lock: Lock, requirements: Iterable[str], *, outside: Iterable[str] = ("torch",)) -> list[str]:
    """The requirements (PEP 508 strings, markers evaluated for this interpreter) the lock does not
    meet: a package missing from it or pinned outside the range. ``outside``: installed apart
    (torch, by its build)."""
    skip = {canonicalize_name(n) for n in outside}
    bad = []
    for text in requirements:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        name = canonicalize_name(req.name)
        if name in skip:
            continue
        pinned = lock.pins.get(name)
        if pinned is None:
            bad.append(f"{text} (not in the lock)")
        elif not req.specifier.contains(pinned, prereleases=True):
            bad.append(f"{text} (the lock has {pinned})")
    return bad


def _pip_config_files() -> list[Path]:
    """pip's configuration files, in the order pip reads them."""
    home = Path.home()
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(home / ".config")
    dirs = os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":")
    files = [Path(d) / "pip" / "pip.conf" for d in dirs] + [Path("/etc/pip.conf")]
    files += [home / ".pip" / "pip.conf", Path(xdg) / "pip" / "pip.conf"]
    if os.environ.get("VIRTUAL_ENV"):
        files.append(Path(os.environ["VIRTUAL_ENV"]) / "pip.conf")
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    return files


def user_index_settings(
    environ: Mapping[str, str] | None = None, files: Iterable[Path] | None = None
) -> list[str]:
    """Where the person told pip which index to use (``PIP_INDEX_URL`` and the like, or a config
    file's ``index-url``/``extra-index-url``/``find-links``/``no-index``); empty when nowhere."""
    env = os.environ if environ is None else environ
    found = [
        f"${v}"
        for v in (f"PIP_{s.upper().replace('-', '_')}" for s in INDEX_SETTINGS)
        if env.get(v, "").strip()
    ]
    for path in _pip_config_files() if files is None else files:
        cp = configparser.RawConfigParser()
        try:
            cp.read(path, encoding="utf-8")
        except (OSError, configparser.Error):
            continue
        for section in ("global", "install"):
            if cp.has_section(section):
                found += [
                    f"{path} [{section}] {k}"
                    for k in INDEX_SETTINGS
                    if cp.get(section, k, fallback="").strip()
                ]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m vrag_desktop.core.runtime.lockfile NAME [--project pyproject.toml --extras a,b]``
    prints the lock that applies to this interpreter (exit 0), or why none does (exit 1);
    ``--index-configured`` exits 0 when the person set their own index (printing where)."""
    p = argparse.ArgumentParser(prog="python -m vrag_desktop.core.runtime.lockfile")
    p.add_argument("name", nargs="?")
    p.add_argument("--project", type=Path, help="check that the lock meets this pyproject's requirements")
    p.add_argument("--extras", default="", help="comma-separated extras of --project")
    p.add_argument("--index-configured", action="store_true")
    args = p.parse_args(argv)
    if args.index_configured:
        where = user_index_settings()
        print("\n".join(where))
        return 0 if where else 1
    if not args.name:
        p.error("a lock name is needed")
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    lock = find_lock(args.name, version)
    if lock is None:
        reason = (
            f"${DISABLE_ENV}=1" if os.environ.get(DISABLE_ENV) == "1" else "none for this Python and platform"
        )
        print(
            f"no lock '{args.name}' for Python {version} on {platform.system()} {platform.machine()} ({reason})"
        )
        return 1
    if args.project is not None:
        bad = unsatisfied(lock, project_requirements(args.project, [e for e in args.extras.split(",") if e]))
        if bad:
            print(f"{lock.path} is out of date with {args.project} (run scripts/lock.sh): " + "; ".join(bad))
            return 1
    print(lock.path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
