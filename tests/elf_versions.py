"""The symbol versions ELF files require (``readelf -V``'s ``.gnu.version_r``), parsed: what a bundle
needs from the machine's glibc and libstdc++ (tests/test_bundle_glibc.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ELF_MAGIC = b"\x7fELF"
_FILE = re.compile(r"^\s*(?:0x)?[0-9a-f]+:\s+Version:\s+\d+\s+File:\s+(\S+)\s+Cnt:\s+\d+", re.I)
_NAME = re.compile(r"^\s*(?:0x)?[0-9a-f]+:\s+Name:\s+(\S+)\s+Flags:", re.I)
_START = re.compile(r"^File:\s+(.+)$")
_SECTION = re.compile(r"^Version (needs|symbols|definition) section", re.I)


def version_key(name: str) -> tuple[int, ...]:
    """``GLIBC_2.35`` → ``(2, 35)``; ``GLIBCXX_3.4.29`` → ``(3, 4, 29)``."""
    return tuple(int(x) for x in name.split("_", 1)[1].split("."))


@dataclass
class Needs:
    """For each ELF file, the (library, version) pairs it requires."""

    by_file: dict[str, set[tuple[str, str]]] = field(default_factory=dict)

    def highest(self, prefix: str) -> tuple[str, list[str]] | None:
        """The highest ``PREFIX_x.y`` version any file needs, and the files that need it."""
        best: tuple[int, ...] | None = None
        who: list[str] = []
        for f, pairs in self.by_file.items():
            for _, name in pairs:
                if not re.fullmatch(rf"{prefix}_[0-9.]+", name):
                    continue
                k = version_key(name)
                if best is None or k > best:
                    best, who = k, [f]
                elif k == best and f not in who:
                    who.append(f)
        if best is None:
            return None
        return f"{prefix}_{'.'.join(map(str, best))}", sorted(who)


def parse_readelf(text: str, single: str = "<input>") -> Needs:
    """``readelf -V --wide FILE…`` output → :class:`Needs` (only the ``needs`` sections count:
    the versions a file defines are its own). readelf names each file only when given several;
    ``single`` names the one otherwise."""
    needs = Needs()
    current: str | None = None if "\nFile: " in "\n" + text else single
    in_needs = False
    lib = ""
    for line in text.splitlines():
        m = _START.match(line)
        if m:
            current, in_needs = m.group(1).strip(), False
            needs.by_file.setdefault(current, set())
            continue
        m = _SECTION.match(line)
        if m:
            in_needs = m.group(1).lower() == "needs"
            if current is not None:
                needs.by_file.setdefault(current, set())
            continue
        if not in_needs or current is None:
            continue
        m = _FILE.match(line)
        if m:
            lib = m.group(1)
            continue
        m = _NAME.match(line)
        if m:
            needs.by_file[current].add((lib, m.group(1)))
    return needs


def elf_files(folder: Path) -> list[Path]:
    """Every regular ELF file under ``folder`` (by its magic number, not its name)."""
    out = []
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink():
            with p.open("rb") as fh:
                if fh.read(4) == ELF_MAGIC:
                    out.append(p)
    return out


def required_versions(files: Iterable[Path], chunk: int = 200) -> Needs:
    """Run readelf over ``files`` (in chunks: a long argv) and merge what they need."""
    readelf = shutil.which("readelf")
    if readelf is None:
        raise FileNotFoundError("readelf (binutils) is not installed")
    paths = [str(p) for p in files]
    merged = Needs()
    for i in range(0, len(paths), chunk):
        proc = subprocess.run(
            [readelf, "-V", "--wide", *paths[i : i + chunk]],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=300,
        )
        if proc.returncode not in (0, 1):  # 1: a warning about one file; its output still counts
            raise RuntimeError(f"readelf failed ({proc.returncode}): {proc.stderr[-2000:]}")
        merged.by_file.update(parse_readelf(proc.stdout).by_file)
    return merged
