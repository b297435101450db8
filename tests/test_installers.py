"""The menu entry and the Linux installers. ``vrag-desktop --install-desktop`` writes the .desktop
entry and icons into a temporary HOME (from source; from the bundle, in its frozen test) and
``--uninstall-desktop`` removes them. The AppImage runtime (scripts/appimage-runtime.sh builds it:
gcc and Debian's static libraries; skipped, naming the packages, without them) runs a small image
of its own: mounted with FUSE where /dev/fuse can be used, extracted (``--appimage-extract``) and
extracted-and-run (``APPIMAGE_EXTRACT_AND_RUN=1``). The .deb and the AppImage that
``scripts/build-app.sh --deb --appimage`` make are opt-in: each test skips, saying so, when its
installer is not in dist/ (or is older than the bundle); otherwise it is unpacked into a temporary
root (``dpkg-deb -x``, ``--appimage-extract``), its menu entry and icon are checked, and the app it
installed starts under Xvfb (or offscreen) until its window is visible; the AppImage's app also
starts from the mounted image where FUSE works."""

from __future__ import annotations

import configparser
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from frozen_bundle import APP, ROOT, frozen_marks, gui_prefix, moved_bundle, run, run_env

from vrag_desktop.core.desktop_entry import entry_text

DIST = ROOT / "dist"
STAMP = DIST / APP / ".vrag-build-stamp"
ID = "vrag-desktop"

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="freedesktop.org and Debian: Linux")


def _entry(path: Path) -> configparser.SectionProxy:
    cp = configparser.RawConfigParser(interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]
    cp.read(path, encoding="utf-8")
    return cp["Desktop Entry"]


def _validate(desktop: Path) -> None:
    if shutil.which("desktop-file-validate"):
        check = subprocess.run(["desktop-file-validate", str(desktop)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr


def _window_opens(argv: list[str], tmp: Path, **extra_env: str) -> None:
    """The installed app starts and shows its window (its start-up probe: it closes once visible)."""
    prefix, gui_env = gui_prefix()
    env = run_env(tmp / "home", **gui_env, **extra_env, VRAG_DESKTOP_STARTUP_PROBE="1")
    out = run([*prefix, *argv, "--data-dir", str(tmp / "data")], env, timeout=180)
    assert out.returncode == 0 and "window-visible" in out.stdout, (out.returncode, out.stderr[-3000:])


def _installer(pattern: str, how: str) -> Path:
    """The newest installer matching ``pattern`` in dist/, made from the current bundle; else skip."""
    found = sorted(DIST.glob(pattern), key=lambda p: p.stat().st_mtime)
    if not found:
        pytest.skip(f"no {pattern} in dist/: build it with scripts/build-app.sh {how}")
    if STAMP.is_file() and found[-1].stat().st_mtime < STAMP.stat().st_mtime:
        pytest.skip(f"{found[-1].name} is older than the bundle: rebuild it with scripts/build-app.sh {how}")
    return found[-1]


def test_entry_quotes_the_program_as_the_spec_says() -> None:
    text = entry_text(['/opt/My Apps/VRAG "x" $HOME `id` 100%\\'])
    exec_line = next(line for line in text.splitlines() if line.startswith("Exec="))
    assert exec_line == 'Exec="/opt/My Apps/VRAG \\\\"x\\\\" \\\\$HOME \\\\`id\\\\` 100%%\\\\\\\\" gui %F'
    assert "Exec=vrag-desktop gui %F" in entry_text(["vrag-desktop"])
    assert "TryExec" not in entry_text(["vrag-desktop"])


@linux
def test_install_desktop_from_the_app_into_a_temporary_home(tmp_path: Path) -> None:
    home = tmp_path / "hôme"
    env = run_env(home)
    env.pop("XDG_DATA_HOME")  # the default: ~/.local/share
    env["PYTHONPATH"] = str(ROOT)
    out = run([sys.executable, "-m", "vrag_desktop", "--install-desktop"], env, timeout=120)
    assert out.returncode == 0, out.stderr
    share = home / ".local" / "share"
    desktop = share / "applications" / f"{ID}.desktop"
    entry = _entry(desktop)
    assert entry["Exec"] == f'"{sys.executable}" "-m" "vrag_desktop" gui %F', entry["Exec"]
    assert entry["Icon"] == ID and entry["StartupWMClass"] == APP and "inode/directory" in entry["MimeType"]
    for size in (16, 48, 256):
        assert (share / "icons" / "hicolor" / f"{size}x{size}" / "apps" / f"{ID}.png").is_file()
    assert (share / "icons" / "hicolor" / "scalable" / "apps" / f"{ID}.svg").is_file()
    _validate(desktop)
    out = run([sys.executable, "-m", "vrag_desktop", "--uninstall-desktop"], env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert not desktop.exists() and not list((share / "icons").rglob(f"{ID}.*"))


def _frozen(test: Callable[..., None]) -> Callable[..., None]:
    for mark in frozen_marks(120):
        test = mark(test)
    return test


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Path]:
    yield from moved_bundle(tmp_path_factory, request)


@_frozen
def test_bundle_installs_its_own_menu_entry(bundle: Path, tmp_path: Path) -> None:
    """No checkout: the bundle (moved to a path with spaces and non-ASCII) writes its entry."""
    home = tmp_path / "home"
    env = run_env(home)
    out = run([str(bundle / APP), "--install-desktop"], env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    desktop = Path(env["XDG_DATA_HOME"]) / "applications" / f"{ID}.desktop"
    entry = _entry(desktop)
    exe = (bundle / APP).resolve()
    assert entry["Exec"] == f'"{exe}" gui %F' and entry["TryExec"] == str(exe), entry["Exec"]
    assert (Path(env["XDG_DATA_HOME"]) / "icons" / "hicolor" / "256x256" / "apps" / f"{ID}.png").is_file()
    _validate(desktop)
    out = run([str(bundle / APP), "--uninstall-desktop"], env, timeout=120)
    assert out.returncode == 0 and not desktop.exists(), out.stderr[-3000:]


def _check_share(share: Path, exec_word: str) -> None:
    desktop = share / "applications" / f"{ID}.desktop"
    entry = _entry(desktop)
    assert entry["Exec"] == f"{exec_word} gui %F" and entry["Icon"] == ID, dict(entry)
    assert (share / "icons" / "hicolor" / "256x256" / "apps" / f"{ID}.png").is_file()
    assert (share / "icons" / "hicolor" / "scalable" / "apps" / f"{ID}.svg").is_file()
    _validate(desktop)


@linux
@pytest.mark.timeout(600)
def test_deb_installs_into_a_temporary_root(tmp_path: Path) -> None:
    if not shutil.which("dpkg-deb"):
        pytest.skip("dpkg-deb is not installed")
    deb = _installer(f"{ID}_*_amd64.deb", "--deb")
    info = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True).stdout
    fields = dict(
        line.split(": ", 1) for line in info.splitlines() if ": " in line and not line.startswith(" ")
    )
    assert fields["Package"] == ID and fields["Architecture"] == "amd64", fields
    assert "libc6 (>= 2.35)" in fields["Depends"] and "libstdc++6" in fields["Depends"], fields
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True, timeout=300)
    _check_share(root / "usr" / "share", ID)
    assert (root / "usr" / "share" / "doc" / ID / "copyright").is_file()
    command = root / "usr" / "bin" / ID
    assert command.is_symlink() and command.resolve() == (root / "opt" / ID / APP).resolve()
    assert not (root / "opt" / ID / ".vrag-build-stamp").exists()
    _window_opens([str(command)], tmp_path)


def _fuse_usable() -> bool:
    """Can an AppImage mount itself here? /dev/fuse readable and writable, and root (libfuse mounts
    directly) or fusermount3 on PATH (containers usually have neither)."""
    fuse = Path("/dev/fuse")
    return (
        fuse.exists()
        and os.access(fuse, os.R_OK | os.W_OK)
        and (os.geteuid() == 0 or shutil.which("fusermount3") is not None)
    )


@pytest.fixture(scope="module")
def appimage_runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The AppImage runtime, built by scripts/appimage-runtime.sh into a temporary folder."""
    if not sys.platform.startswith("linux") or platform.machine() != "x86_64":
        pytest.skip("the AppImage runtime is built for x86_64 Linux")
    out = tmp_path_factory.mktemp("appimage-runtime") / "runtime-x86_64"
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "appimage-runtime.sh"), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0 and "apt-get install" in proc.stderr and "gcc failed" not in proc.stderr:
        pytest.skip(proc.stderr.strip().splitlines()[-1])  # which Debian packages it needs
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == str(out), proc.stdout
    return out


def _tiny_appimage(runtime: Path, tmp: Path) -> Path:
    """An AppImage made as make-installers.sh makes the app's: an AppDir whose AppRun reports its
    APPDIR, arguments and a file beside it, then exits 3; mksquashfs; the runtime in front."""
    if not shutil.which("mksquashfs"):
        pytest.skip("mksquashfs is not installed (Debian: squashfs-tools)")
    appdir = tmp / "AppDir"
    (appdir / "usr" / "share").mkdir(parents=True)
    (appdir / "usr" / "share" / "données é.txt").write_text("from the image\n", encoding="utf-8")
    apprun = appdir / "AppRun"
    apprun.write_text(
        '#!/bin/sh\nHERE=$(dirname "$(readlink -f "$0")")\n'
        'echo "appdir=$APPDIR"\necho "here=$HERE"\nfor a in "$@"; do echo "arg=$a"; done\n'
        'cat "$HERE/usr/share/données é.txt"\nexit 3\n',
        encoding="utf-8",
    )
    apprun.chmod(0o755)
    squash = tmp / "image.squashfs"
    subprocess.run(
        ["mksquashfs", str(appdir), str(squash), "-root-owned", "-noappend", "-comp", "zstd", "-quiet"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    image = tmp / "Tiny App-x86_64.AppImage"
    image.write_bytes(runtime.read_bytes() + squash.read_bytes())
    image.chmod(0o755)
    return image


def _present(folder: Path) -> bool:
    """Is ``folder`` still there? While the FUSE process tears down, libfuse closes its connection
    before the (lazy) unmount, so for a moment a stat fails with ECONNABORTED: still there."""
    try:
        os.lstat(folder)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True


def _unmounted(folder: Path) -> bool:
    """Has the AppImage's FUSE process unmounted and removed ``folder``? It does so on its own once
    the app has ended (it sees its pipe close), a moment later: waited for, up to 60 s."""
    deadline = time.monotonic() + 60
    while _present(folder) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not _present(folder)


def _runs_from(out: subprocess.CompletedProcess[str], under: Path) -> str:
    """The tiny AppRun's report: its exit status came back, and it ran from a folder in ``under``."""
    assert out.returncode == 3, (out.returncode, out.stdout, out.stderr[-2000:])
    lines = out.stdout.splitlines()
    assert lines[2:] == ["arg=one", "arg=two words", "from the image"], out.stdout
    appdir = lines[0].removeprefix("appdir=")
    assert Path(appdir).parent == under and lines[1] == f"here={appdir}", lines[:2]
    return appdir


def test_appimage_runtime_is_a_static_type2_runtime(appimage_runtime: Path) -> None:
    head = appimage_runtime.read_bytes()[:11]
    assert head[:4] == b"\x7fELF" and head[8:11] == b"AI\x02", head  # ELF, AppImage type 2
    if shutil.which("readelf"):
        headers = subprocess.run(
            ["readelf", "-lS", str(appimage_runtime)], capture_output=True, text=True, check=True
        ).stdout
        assert "program interpreter" not in headers, "not static: it needs a dynamic loader"
        for section in (".appimage", ".digest_md5", ".upd_info", ".sha256_sig", ".sig_key"):
            assert f" {section} " in headers, section  # where AppImage's tools write their data
    licences = appimage_runtime.parent / "licences"
    assert "MIT License" in (licences / "appimage-type2-runtime.LICENSE").read_text(encoding="utf-8")
    assert (licences / "squashfuse-header" / "LICENSE").is_file()
    if Path("/usr/share/doc/libfuse3-3/copyright").is_file():
        assert (licences / "libfuse3-3.copyright").is_file() and (licences / "LGPL-2.1.txt").is_file()
    # the same sources, compiler and libraries: kept, not rebuilt
    before = appimage_runtime.stat().st_mtime_ns
    again = subprocess.run(
        ["bash", str(ROOT / "scripts" / "appimage-runtime.sh"), str(appimage_runtime)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0 and again.stdout.strip() == str(appimage_runtime), again.stderr
    assert appimage_runtime.stat().st_mtime_ns == before and "Building" not in again.stderr


def test_appimage_runtime_extracts_and_runs_its_image(appimage_runtime: Path, tmp_path: Path) -> None:
    image = _tiny_appimage(appimage_runtime, tmp_path)
    offset = subprocess.run([str(image), "--appimage-offset"], capture_output=True, text=True, timeout=60)
    assert offset.stdout.strip() == str(appimage_runtime.stat().st_size), offset
    # --appimage-extract: squashfs-root/ in the working folder
    work = tmp_path / "work"
    work.mkdir()
    out = subprocess.run(
        [str(image), "--appimage-extract"], cwd=work, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    root = work / "squashfs-root"
    assert os.access(root / "AppRun", os.X_OK)
    assert (root / "usr" / "share" / "données é.txt").read_text(encoding="utf-8") == "from the image\n"
    # APPIMAGE_EXTRACT_AND_RUN=1 (no FUSE needed): extracted into $TMPDIR, run, removed afterwards
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "APPIMAGE_EXTRACT_AND_RUN": "1", "TMPDIR": str(tmpdir)}
    out = subprocess.run(
        [str(image), "one", "two words"], env=env, capture_output=True, text=True, timeout=120
    )
    assert Path(_runs_from(out, tmpdir)).name.startswith("appimage_extracted_")
    assert not list(tmpdir.iterdir()), list(tmpdir.iterdir())


@pytest.mark.skipif(not _fuse_usable(), reason="FUSE is not usable here (/dev/fuse, root or fusermount3)")
def test_appimage_runtime_mounts_its_image(appimage_runtime: Path, tmp_path: Path) -> None:
    image = _tiny_appimage(appimage_runtime, tmp_path)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "APPIMAGE_EXTRACT_AND_RUN"}
    env["TMPDIR"] = str(tmpdir)
    out = subprocess.run(
        [str(image), "one", "two words"], env=env, capture_output=True, text=True, timeout=120
    )
    mount = _runs_from(out, tmpdir)
    assert Path(mount).name.startswith(".mount_Tiny"), mount  # FUSE-mounted, not extracted
    assert _unmounted(Path(mount)), "the image stayed mounted after the app ended"


@linux
def test_appimage_runtime_script_names_what_it_needs(tmp_path: Path) -> None:
    """Without gcc (a PATH holding only the tools the script needs first), it fails saying which
    Debian packages to install, and writes nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "uname", "cat", "mktemp", "rm"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    out_file = tmp_path / "out" / "runtime-x86_64"
    proc = subprocess.run(
        [str(bin_dir / "bash"), str(ROOT / "scripts" / "appimage-runtime.sh"), str(out_file)],
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    if platform.machine() == "x86_64":
        assert "gcc is not installed" in proc.stderr and "libsquashfuse-dev libzstd-dev" in proc.stderr
    else:
        assert "only x86_64" in proc.stderr, proc.stderr
    assert not out_file.parent.exists()


@linux
def test_make_installers_refuses_a_runtime_that_is_not_one(tmp_path: Path) -> None:
    """VRAG_APPIMAGE_RUNTIME must name an AppImage type 2 runtime; anything else is refused before
    the minutes of packing, and no AppImage is written. (The bundle here is a stand-in: an
    executable and a stamp are all the script reads before that check.)"""
    dist = tmp_path / "dist"
    (dist / APP).mkdir(parents=True)
    (dist / APP / APP).write_text("#!/bin/sh\n")
    (dist / APP / APP).chmod(0o755)
    (dist / APP / ".vrag-build-stamp").write_text("key\n")
    for bad in (ROOT / "README.md", Path(sys.executable).resolve(), tmp_path / "missing"):
        env = {**os.environ, "VRAG_BUILD_DIST": str(dist), "VRAG_BUILD_WORK": str(tmp_path / "work")}
        env["VRAG_APPIMAGE_RUNTIME"] = str(bad)
        env["VRAG_BUILD_PYTHON"] = sys.executable
        proc = subprocess.run(
            ["bash", str(ROOT / "scripts" / "make-installers.sh"), "--appimage"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 1 and "is not an AppImage type 2 runtime" in proc.stderr, (bad, proc.stderr)
    assert not list(dist.glob("*.AppImage*")) and not (tmp_path / "work").exists()


@linux
@pytest.mark.timeout(900)
def test_appimage_unpacks_and_starts(tmp_path: Path) -> None:
    image = _installer("VRAG_Desktop-*-x86_64.AppImage", "--appimage")
    with image.open("rb") as f:
        head = f.read(11)
    assert head[:4] == b"\x7fELF" and head[8:11] == b"AI\x02", head  # an executable type 2 AppImage
    out = subprocess.run(
        [str(image), "--appimage-extract"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    appdir = tmp_path / "squashfs-root"
    assert os.access(appdir / "AppRun", os.X_OK)
    assert (appdir / f"{ID}.desktop").is_file() and (appdir / ".DirIcon").resolve().is_file()
    _check_share(appdir / "usr" / "share", ID)
    runtime_docs = appdir / "usr" / "share" / "doc" / ID / "appimage-runtime"
    assert (runtime_docs / "appimage-type2-runtime.LICENSE").is_file() and (
        runtime_docs / "README.md"
    ).is_file()
    _window_opens([str(appdir / "AppRun")], tmp_path)
    shutil.rmtree(appdir)
    if _fuse_usable():  # the AppImage itself, mounted with FUSE as a double-click runs it
        (tmp_path / "tmp").mkdir()
        _window_opens([str(image)], tmp_path, TMPDIR=str(tmp_path / "tmp"))
        mounts = list((tmp_path / "tmp").glob(".mount_*"))
        assert all(_unmounted(m) for m in mounts), "the image stayed mounted after the app ended"
