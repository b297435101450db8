"""The bundle's platform claim, checked: docs/install.md says which glibc and libstdc++ the
double-click app needs and which distributions that admits; the built bundle's ELF files are read
(``readelf -V``: the versions each one requires) and must need nothing newer. The host's
libstdc++/libgcc_s must not be in the bundle (a bundled C++ runtime breaks Mesa's drivers on newer
distributions). The parser itself is checked on a system binary in every run."""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from elf_versions import elf_files, parse_readelf, required_versions, version_key
from frozen_bundle import ROOT, frozen_marks, moved_bundle

INSTALL_MD = ROOT / "docs" / "install.md"
#: Never in the bundle: the machine's own copies are used (pyinstaller.spec, HOST_LIBRARIES).
HOST_ONLY = ("libstdc++.so.6", "libgcc_s.so.1")

needs_readelf = pytest.mark.skipif(
    shutil.which("readelf") is None, reason="readelf (binutils) is not installed"
)
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF files: Linux")


def claims() -> tuple[
    tuple[int, ...], tuple[int, ...], list[tuple[str, tuple[int, ...], tuple[int, ...], str]]
]:
    """What docs/install.md promises: the glibc and GLIBCXX floors (every mention must agree) and
    the distribution table's rows (name, glibc, GLIBCXX, status)."""
    text = INSTALL_MD.read_text(encoding="utf-8")
    glibc = {m for m in re.findall(r"glibc ≥ \**(\d+\.\d+)", text)}
    cxx = {m for m in re.findall(r"GLIBCXX_(3\.4\.\d+)", text)}
    assert len(glibc) == 1, f"docs/install.md names different glibc floors: {sorted(glibc)}"
    assert len(cxx) == 1, f"docs/install.md names different GLIBCXX floors: {sorted(cxx)}"
    rows = [
        (name.strip(), version_key("x_" + g), version_key("x_" + c), status.strip())
        for name, g, c, status in re.findall(
            r"^\| ([^|]+?) \| (\d+\.\d+) \| (3\.4\.\d+) \| ([^|]+) \|$", text, flags=re.M
        )
    ]
    assert rows, "docs/install.md has no table of distributions (name | glibc | GLIBCXX | status)"
    return version_key("x_" + glibc.pop()), version_key("x_" + cxx.pop()), rows


def test_docs_distribution_table_agrees_with_the_floors() -> None:
    """A distribution marked supported meets both floors; one marked not supported misses one."""
    glibc, cxx, rows = claims()
    for name, g, c, status in rows:
        meets = g >= glibc and c >= cxx
        if status.startswith("not supported"):
            assert not meets, f"{name} is marked not supported but meets glibc/GLIBCXX floors"
        else:
            assert meets, f"{name} ({status}) has glibc {g} / GLIBCXX {c}, below the stated floors"
            assert "tested" in status, f"{name}: say whether it is tested or untested"


@linux
@needs_readelf
def test_parser_reads_what_a_system_binary_needs() -> None:
    """A real binary: the parser finds its libc versions, none newer than this machine's glibc."""
    exe = Path(shutil.which("ls") or "/bin/ls").resolve()
    needs = required_versions([exe, Path(sys.executable).resolve()])
    top = needs.highest("GLIBC")
    assert top is not None, needs.by_file
    host = os.confstr("CS_GNU_LIBC_VERSION") or ""  # "glibc 2.36"
    assert version_key(top[0]) <= version_key("x_" + host.split()[-1]), (top, host)
    assert parse_readelf("").by_file == {}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Path]:
    yield from moved_bundle(tmp_path_factory, request)


def _frozen(test: Callable[..., None]) -> Callable[..., None]:
    for mark in frozen_marks(120):
        test = mark(test)
    return test


@needs_readelf
@_frozen
def test_bundle_needs_no_more_than_docs_claim(bundle: Path) -> None:
    glibc, cxx, _rows = claims()
    internal = bundle / "_internal"
    bundled = [p.name for p in internal.iterdir()]
    assert not [n for n in bundled if n in HOST_ONLY], "the host's C++ runtime was bundled"
    needs = required_versions(elf_files(bundle))
    assert len(needs.by_file) > 100, f"only {len(needs.by_file)} ELF files read: the bundle is incomplete"
    top = needs.highest("GLIBC")
    assert top is not None
    assert version_key(top[0]) <= glibc, (
        f"the bundle needs {top[0]} (from {', '.join(Path(f).name for f in top[1][:5])}) but "
        f"docs/install.md promises glibc ≥ {'.'.join(map(str, glibc))}"
    )
    top_cxx = needs.highest("GLIBCXX")
    assert top_cxx is not None and version_key(top_cxx[0]) <= cxx, (
        f"the bundle needs {top_cxx} but docs/install.md promises GLIBCXX_{'.'.join(map(str, cxx))}"
    )
