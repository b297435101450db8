"""The double-click app installed where its user cannot write: the bundle in a root-owned folder
(mode 0755, its files 0644/0755, as under /opt), run by an unprivileged user (uid 65534, "nobody")
whose HOME and data directory are their own. Its command line answers, its window opens and
indexes the sample corpus, a search finds what it indexed, and nothing is written into the
install folder. (tests/test_frozen_app.py checks the same as root, where "read-only" is not real.)

Needs root (to hand the folder to root and switch to the other user) and setpriv or runuser:
skipped, saying why, otherwise. Reuses the bundle tests/test_frozen_app.py builds.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from frozen_bundle import APP, frozen_marks, moved_bundle
from frozen_bundle import listing as _listing
from frozen_bundle import run_env as _env

NOBODY = 65534

pytestmark = [
    *frozen_marks(600),
    pytest.mark.skipif(
        not hasattr(os, "geteuid") or os.geteuid() != 0,
        reason="needs root: to install the bundle in a root-owned folder and run it as another user",
    ),
]


def _as_nobody() -> list[str]:
    """The command prefix that runs a program as uid/gid 65534 with no supplementary groups."""
    if shutil.which("setpriv"):
        return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    if shutil.which("runuser"):
        return ["runuser", "-u", "nobody", "--"]
    pytest.skip("neither setpriv nor runuser is here to run the app as an unprivileged user")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Path]:
    """The built bundle (tests/frozen_bundle.py)."""
    yield from moved_bundle(tmp_path_factory, request)


@pytest.fixture()
def installed(bundle: Path) -> Iterator[Path]:
    """The bundle "installed" in ``<tmp>/opt/VRAG Desktop``: root-owned, 0755 folders, links to the
    build's files (0644, executables 0755). Outside pytest's own temp folder (0700, closed to
    other users); every folder above it is traversable."""
    top = Path(tempfile.mkdtemp(prefix="vrag-readonly-", dir="/tmp"))
    try:
        os.chmod(top, 0o755)
        install = top / "opt" / APP
        install.parent.mkdir(mode=0o755)
        shutil.copytree(bundle, install, copy_function=os.link, symlinks=True)
        for p in [install, *install.rglob("*")]:
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                continue
            assert st.st_uid == 0, f"{p} is not root's"
            assert not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH), (
                f"{p} is writable by others: {oct(st.st_mode)}"
            )
            assert st.st_mode & stat.S_IROTH, f"{p} is not readable by others: {oct(st.st_mode)}"
        yield install
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _nobodys_home() -> Path:
    home = Path(tempfile.mkdtemp(prefix="vrag-nobody-", dir="/tmp")) / "hôme"
    home.mkdir()
    (home / "run").mkdir(mode=0o700)
    for p in (home.parent, home, home / "run"):
        os.chown(p, NOBODY, NOBODY)
    return home


def test_read_only_install_as_an_unprivileged_user(installed: Path) -> None:
    prefix = _as_nobody()
    home = _nobodys_home()
    try:
        _check(installed, prefix, home)
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)


def _check(installed: Path, prefix: list[str], home: Path) -> None:
    exe = str(installed / APP)
    data = home / "dätä"
    before = _listing(installed)
    env = _env(home)
    os.chown(home / "run", NOBODY, NOBODY)  # _env made it (as root) if it was not there

    def run(argv: list[str], timeout: float = 300, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*prefix, exe, "--data-dir", str(data), *argv],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd="/",
        )

    # -- the user cannot write into the install folder (the check is real), and the CLI answers
    probe = subprocess.run(
        [*prefix, "sh", "-c", f"touch '{installed}/probe' 2>&1; id -u"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert probe.stdout.strip().endswith(str(NOBODY)) and not (installed / "probe").exists(), probe.stdout
    out = run(["--version"], timeout=60)
    assert out.returncode == 0 and "vrag-desktop" in out.stdout, out.stderr[-3000:]

    # -- the window opens and indexes the sample corpus (first launch), then quits
    report = home / "smoke.json"
    out = run(
        [],
        timeout=480,
        QT_QPA_PLATFORM="offscreen",
        VRAG_DESKTOP_SMOKE=str(report),
        VRAG_DESKTOP_SMOKE_WAIT="sample",
        VRAG_DESKTOP_SMOKE_TIMEOUT="420",
    )
    assert out.returncode == 0, f"exit {out.returncode}:\n{out.stderr[-4000:]}"
    result = json.loads(report.read_text(encoding="utf-8"))
    assert result["visible"] and result["outcome"] == "done" and "sample" in result["corpora"], result
    assert Path(result["data_dir"]) == data, result

    # -- its command line searches what the window indexed
    out = run(["search", "research and development spending", "--json"], timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert any("northwind_annual_report" in json.dumps(h) for h in json.loads(out.stdout)), out.stdout[:2000]

    # -- what the app wrote is the user's, under HOME; nothing in the install folder
    assert _listing(installed) == before
    strangers = [p for p in installed.rglob("*") if p.lstat().st_uid != 0]
    assert not strangers, strangers[:10]
    assert all(p.stat().st_uid == NOBODY for p in data.rglob("*") if not p.is_symlink()), "a root-owned file"
