"""Which Python creates the engines' environments (core/runtime/base_python.py), with real processes.

Candidates are real executables on a PATH the test controls: the machine's own Python (through a
symlink), and small fake interpreters (shell scripts answering the probe with another version, or a
wrapper running the real Python with ``ensurepip`` hidden, as on Debian without python3-venv).
Provisioning runs the real uv against loopback only: a closed port (offline), an HTTP server in a
thread serving a downloads JSON and a tarball in python-build-standalone's ``install_only`` layout
whose interpreter is a wrapper around this machine's Python, and a server that stalls mid-download.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import importlib.util
import io
import json
import os
import platform
import socket
import subprocess
import sys
import sysconfig
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from vrag_desktop.core.progress import Cancelled, CancelToken
from vrag_desktop.core.runtime import base_python as bp
from vrag_desktop.core.runtime.lockfile import find_lock, user_index_settings
from vrag_desktop.core.runtime.venv import EnvCreateError, pip_env, venv_uv
from vrag_desktop.core.runtime.vllm_env import create_vllm_env

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="fake interpreters are POSIX shell scripts")

REAL = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
REAL_VERSION = sys.version_info[:3]
# uv patches an install's build configuration, so the fake one carries this machine's
SYSCONFIGDATA = Path(importlib.util.find_spec(sysconfig._get_sysconfigdata_name()).origin)  # type: ignore[arg-type, attr-defined, union-attr]


def _fake(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def _answers(version: tuple[int, int, int], missing: tuple[str, ...] = ()) -> str:
    """A fake interpreter that answers the probe as Python ``version`` would."""
    return f"echo '{json.dumps({'version': list(version), 'missing': list(missing)})}'"


def _without(tmp: Path, *modules: str) -> str:
    """The real Python with ``modules`` missing (``ensurepip``: Debian's python3 without python3-venv)."""
    shadow = tmp / "shadow"
    for name in modules or ("ensurepip",):
        (shadow / name).mkdir(parents=True)
        (shadow / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}'\")\n"
        )
    return f'PYTHONPATH="{shadow}" exec "{REAL}" "$@"'


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A frozen app (its own interpreter is no candidate) on a PATH holding only ``bin``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv(bp.ENV_VAR, raising=False)
    return bin_dir


@pytest.fixture
def uv_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """uv with no user config, cache or managed Pythons of its own, and no retries (fast failures)."""
    assert bp.uv_binary() is not None, "uv is missing: pip install uv (the build extra)"
    for name, sub in (
        ("UV_CACHE_DIR", "uv-cache"),
        ("UV_PYTHON_INSTALL_DIR", "uv-managed"),
        ("XDG_DATA_HOME", "xdg"),
    ):
        monkeypatch.setenv(name, str(tmp_path / sub))
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    for name in ("UV_PYTHON_INSTALL_MIRROR", "UV_PYTHON_DOWNLOADS_JSON_URL", "UV_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------- finding one


def test_refused_candidates_are_listed_with_their_reasons(
    machine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VRAG_VENV_UV", "0")  # python -m venv: a Python without ensurepip cannot
    _fake(machine, "python3.13", _answers((3, 14, 0)))
    _fake(machine, "python3", _answers((3, 9, 18)))
    _fake(machine, "python", _without(tmp_path, "ensurepip"))
    _fake(machine, "python3.12", "echo 'Segmentation fault' >&2; exit 139")
    with pytest.raises(bp.NoBasePython) as info:
        bp.find_base_python(tmp_path / "none", purpose="the vLLM environment")
    text = str(info.value)
    assert text.startswith("No Python 3.10–3.13 with venv was found to create the vLLM environment.")
    assert "Python 3.14.0 is outside the supported 3.10–3.13" in text
    assert "Python 3.9.18 is outside" in text
    assert "lacks ensurepip (on Debian/Ubuntu: install python3-venv)" in text
    assert "is not a working Python (exit code 139: Segmentation fault)" in text
    assert "sudo apt install python3 python3-venv" in text and bp.ENV_VAR in text
    assert [c.split(" ")[0] for c, _ in info.value.refused] == [
        "python3.13",
        "python3.12",
        "python3",
        "python",
    ]
    assert not info.value.env_var


def test_nothing_on_path_says_so(machine: Path, tmp_path: Path) -> None:
    with pytest.raises(EnvCreateError, match=r"none of python3\.13, .* is on PATH"):
        bp.find_base_python(tmp_path / "none", purpose="the trainer environment")


def test_the_machines_python_is_found_on_path(machine: Path, tmp_path: Path) -> None:
    _fake(machine, "python3.13", _answers((3, 14, 1)))
    (machine / "python3").symlink_to(REAL)
    found = bp.find_base_python()
    assert found == bp.BasePython(str(machine / "python3"), REAL_VERSION)


def test_a_slow_candidate_times_out(machine: Path) -> None:
    _fake(machine, "python3", "/bin/sleep 5")  # a shell and its child: both are killed
    with pytest.raises(bp.NoBasePython, match=r"did not answer within 0.5 s"):
        bp.find_base_python(timeout=0.5)


def test_this_interpreter_comes_first_unless_frozen(machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(machine, "python3", _answers((3, 12, 3)))
    monkeypatch.setattr(sys, "frozen", False)
    assert bp.find_base_python().path == sys.executable
    monkeypatch.setattr(sys, "frozen", True)
    assert bp.find_base_python() == bp.BasePython(str(machine / "python3"), (3, 12, 3))


def test_the_env_variable_wins_and_is_never_bypassed(
    machine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (machine / "python3").symlink_to(REAL)
    monkeypatch.setenv(bp.ENV_VAR, str(tmp_path / "gone" / "python3"))
    with pytest.raises(bp.NoBasePython) as info:
        bp.find_base_python()
    assert info.value.env_var
    assert str(info.value).startswith(f"{bp.ENV_VAR}={tmp_path / 'gone' / 'python3'} cannot create")
    assert "not found" in str(info.value)
    with pytest.raises(bp.NoBasePython, match=bp.ENV_VAR):  # no download over the person's choice
        next(bp.ensure_base_python("the vLLM environment", tmp_path / "vllm-venv"))
    old = _fake(tmp_path / "other", "py39", _answers((3, 9, 2)))
    monkeypatch.setenv(bp.ENV_VAR, str(old))
    with pytest.raises(bp.NoBasePython, match=r"Python 3.9.2 is outside"):
        bp.find_base_python()
    monkeypatch.setenv(bp.ENV_VAR, "python3")  # a name is looked up on PATH
    assert bp.find_base_python().path == str(machine / "python3")


def test_a_downloaded_python_is_found_before_path(machine: Path, tmp_path: Path) -> None:
    _fake(machine, "python3", _answers((3, 12, 3)))
    install = tmp_path / "runtime" / "python" / "cpython-3.11.7-linux-x86_64-gnu" / "bin"
    (install.parent.parent / "cpython-3.11-linux-x86_64-gnu").mkdir(parents=True)  # not an install
    install.mkdir(parents=True)
    (install / "python3").symlink_to(REAL)
    assert bp.find_base_python(tmp_path / "runtime" / "python").path == str(install / "python3")
    assert bp.python_dir_for(tmp_path / "runtime" / "vllm-venv") == tmp_path / "runtime" / "python"


# ---------------------------------------------------------------- where uv is


def test_the_frozen_app_uses_its_bundled_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_uv = bp.uv_binary()
    assert real_uv is not None
    bundled = tmp_path / "bundle" / "tools" / "uv"
    bundled.parent.mkdir(parents=True)
    bundled.symlink_to(real_uv)
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path / "bundle"), raising=False)
    assert bp.uv_binary() == bundled


def test_without_uv_the_error_says_so(machine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path / "bundle"), raising=False)  # no tools/uv in it
    monkeypatch.setitem(sys.modules, "uv", None)  # the uv package is not installed
    _fake(machine, "python3", _answers((3, 9, 0)))
    assert bp.uv_binary() is None
    with pytest.raises(bp.NoBasePython) as info:
        next(bp.ensure_base_python("the trainer environment", tmp_path / "runtime" / "trainer-env"))
    assert "Python 3.9.0 is outside" in str(
        info.value
    ) and "uv, which downloads one, is not available" in str(info.value)
    with pytest.raises(bp.NoBasePython, match="Could not download a Python: uv is not available"):
        next(bp.provision_python(tmp_path / "python"))
    assert not (tmp_path / "python").exists()


# ---------------------------------------------------------------- made with uv


def _seeds(folder: Path) -> Path:
    """What ``uv venv --seed`` installs, offline: pip (and setuptools before 3.12) from this
    Python's own ensurepip bundle. Before 3.12 uv also seeds ``wheel``, which no bundle holds: a
    metadata-only wheel of that name stands in (what the seeds contain is not under test)."""
    folder.mkdir(parents=True)
    spec = importlib.util.find_spec("ensurepip")
    bundled = sorted(Path(spec.origin).parent.glob("_bundled/*.whl")) if spec and spec.origin else []
    if not any(whl.name.startswith("pip-") for whl in bundled):  # Debian keeps them elsewhere
        pytest.skip("this Python has no bundled pip wheel to seed the environment from offline")
    for whl in bundled:
        (folder / whl.name).write_bytes(whl.read_bytes())
    if sys.version_info < (3, 12):
        info = "wheel-0.0.0.dist-info"
        files = {
            f"{info}/METADATA": "Metadata-Version: 2.1\nName: wheel\nVersion: 0.0.0\n",
            f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        }
        record = [
            f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
            f"{len(text.encode())}"
            for name, text in files.items()
        ]
        files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
        with zipfile.ZipFile(folder / "wheel-0.0.0-py3-none-any.whl", "w") as zf:
            for name, text in files.items():
                zf.writestr(name, text)
    return folder


@pytest.mark.timeout(600)
def test_with_uv_a_python_without_venv_or_ensurepip_makes_the_environment(
    machine: Path, uv_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv needs neither module: such a Python is refused only where ``python -m venv`` would make
    the environment, and the same (cached) probe is accepted once uv makes it; the vLLM build then
    creates a real venv from it with uv (offline, seeded locally), stopped before pip's steps."""
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    for name, sub in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_CONFIG_DIRS", "config-dirs")):
        monkeypatch.setenv(name, str(uv_env / sub))  # no pip.conf of this machine's
    if user_index_settings():
        pytest.skip(f"a pip index is set where the test cannot unset it: {user_index_settings()}")
    python3 = _fake(machine, "python3", _without(uv_env, "ensurepip", "venv"))
    monkeypatch.setenv("VRAG_VENV_UV", "0")
    with pytest.raises(
        bp.NoBasePython, match=r"lacks venv and ensurepip \(on Debian/Ubuntu: install python3-venv\)"
    ):
        bp.find_base_python(uv_env / "none")
    monkeypatch.delenv("VRAG_VENV_UV")
    assert venv_uv() is not None
    assert bp.find_base_python(uv_env / "none") == bp.BasePython(str(python3), REAL_VERSION)

    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_NO_INDEX", "1")
    monkeypatch.setenv("UV_FIND_LINKS", str(_seeds(uv_env / "seeds")))
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")
    env = uv_env / "runtime" / "vllm-venv"
    lines: list[str] = []
    gen = create_vllm_env(env, cpu=True)
    for line in gen:
        lines.append(line)
        if line.startswith("[2/"):  # the venv is made; pip's steps would download: stop
            gen.close()
    assert f"Using Python {'.'.join(map(str, REAL_VERSION))} ({python3}) for the vLLM environment" in lines
    assert any(line.startswith("[1/") and line.endswith(f"Creating virtualenv {env} (uv)") for line in lines)
    assert lines[-1].startswith("[2/"), lines[-10:]
    assert not any("Downloading Python" in line for line in lines)
    out = subprocess.run(
        [str(env / "bin" / "python"), "-c", "import pip, sys; print(sys.prefix)"],
        capture_output=True,
        text=True,
        env=pip_env(),
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.strip() == str(env), out.stderr[-2000:]


# ---------------------------------------------------------------- downloading one


def test_offline_download_fails_clearly_and_leaves_nothing(uv_env: Path) -> None:
    port = _closed_port()
    target = uv_env / "runtime" / "python"
    gen = bp.provision_python(target, extra_args=("--mirror", f"http://127.0.0.1:{port}/mirror"))
    assert next(gen).startswith("Downloading Python 3.12 with uv")
    with pytest.raises(bp.NoBasePython) as info:
        list(gen)
    first, rest = str(info.value).split("\n", 1)
    assert first == (
        f"Could not download a Python: no connection to 127.0.0.1:{port}; install Python 3.12 with your "
        "package manager (Debian/Ubuntu: sudo apt install python3 python3-venv), or set "
        "VRAG_BASE_PYTHON=/path/to/python3."
    )
    assert "uv said:" in rest and "Connection refused" in rest  # uv's own lines at the end
    assert not target.exists()


def test_a_downloads_list_that_cannot_be_fetched(uv_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = _closed_port()
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS_JSON_URL", f"http://127.0.0.1:{port}/downloads.json")
    target = uv_env / "python"
    with pytest.raises(bp.NoBasePython, match=f"no connection to 127.0.0.1:{port};"):
        list(bp.provision_python(target))
    assert not target.exists()


def test_a_folder_with_other_files_is_not_emptied(uv_env: Path) -> None:
    target = uv_env / "python"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(bp.NoBasePython, match=r"holds files uv did not make \(notes.txt\)"):
        list(bp.provision_python(target))
    assert (target / "notes.txt").read_text() == "mine"


def _standalone(version: str) -> bytes:
    """A python-build-standalone ``install_only`` tarball whose interpreter runs this machine's."""
    minor = ".".join(version.split(".")[:2])
    files = {
        f"python/bin/python{minor}": (f'#!/bin/sh\nexec "{REAL}" "$@"\n', 0o755),
        f"python/lib/python{minor}/{SYSCONFIGDATA.name}": (SYSCONFIGDATA.read_text(encoding="utf-8"), 0o644),
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, (text, mode) in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("python/bin/python3")
        link.type, link.linkname = tarfile.SYMTYPE, f"python{minor}"
        tar.addfile(link)
    return buf.getvalue()


def _stall_head() -> bytes:
    """The first 64 KiB of a gzipped tar whose first member is 1 MiB of random bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = os.urandom(1 << 20)
        info = tarfile.TarInfo("python/big")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()[:65536]


_STALL_HEAD = _stall_head()


class _Server:
    """Loopback HTTP: ``files`` by path; ``/stall.tar.gz`` sends a little, then waits for ``stop``."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.stalled = threading.Event()
        self.stop = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/stall.tar.gz":
                    self.send_response(200)
                    self.send_header("Content-Length", str(50_000_000))
                    self.end_headers()
                    self.wfile.write(_STALL_HEAD)  # a valid start: uv is reading a file when it stalls
                    self.wfile.flush()
                    outer.stalled.set()
                    outer.stop.wait(30)
                    return
                body = outer.files.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def publish(self, version: str, path: str, body: bytes | None = None) -> str:
        """List ``version`` at ``path`` in a downloads JSON; returns the JSON's URL."""
        major, minor, patch = (int(v) for v in version.split("."))
        arch = platform.machine()
        key = f"cpython-{version}-linux-{arch}-gnu"
        entry = {
            "name": "cpython",
            "arch": {"family": arch, "variant": None},
            "os": "linux",
            "libc": "gnu",
            "major": major,
            "minor": minor,
            "patch": patch,
            "prerelease": "",
            "url": self.url + path,
            "sha256": hashlib.sha256(body or b"").hexdigest() if body is not None else "0" * 64,
            "variant": None,
            "build": "20990101",
        }
        if body is not None:
            self.files[path] = body
        self.files["/downloads.json"] = json.dumps({key: entry}).encode()
        return self.url + "/downloads.json"


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    thread = threading.Thread(target=s.httpd.serve_forever, daemon=True)
    thread.start()
    yield s
    s.stop.set()
    s.httpd.shutdown()
    s.httpd.server_close()


def test_a_python_is_downloaded_and_then_reused(uv_env: Path, server: _Server) -> None:
    version = ".".join(map(str, REAL_VERSION))
    url = server.publish(version, f"/cpython-{version}+20990101-install_only.tar.gz", _standalone(version))
    target = uv_env / "runtime" / "python"
    gen = bp.provision_python(target, version=version, extra_args=("--python-downloads-json-url", url))
    lines: list[str] = []
    while True:
        try:
            lines.append(next(gen))
        except StopIteration as stop:
            python = stop.value
            break
    assert any(f"Installed Python {version}" in line for line in lines), lines
    assert python == target / f"cpython-{version}-linux-{platform.machine()}-gnu" / "bin" / "python3"
    found = bp.probe(python)
    assert isinstance(found, bp.BasePython) and found.version == REAL_VERSION


def _pids_mentioning(text: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if text.encode() in (d / "cmdline").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                continue
    return pids


def test_cancel_mid_download_kills_uv_and_leaves_nothing(uv_env: Path, server: _Server) -> None:
    url = server.publish("3.12.99", "/stall.tar.gz")
    target = uv_env / "python"
    token = CancelToken()
    threading.Thread(target=lambda: server.stalled.wait(20) and token.cancel(), daemon=True).start()
    gen = bp.provision_python(target, cancel=token, extra_args=("--python-downloads-json-url", url))
    with pytest.raises(Cancelled):
        list(gen)
    assert server.stalled.is_set()
    assert not target.exists() and _pids_mentioning(str(target)) == []


def test_a_stalled_download_times_out(uv_env: Path, server: _Server) -> None:
    url = server.publish("3.12.99", "/stall.tar.gz")
    target = uv_env / "python"
    gen = bp.provision_python(target, timeout=1.5, extra_args=("--python-downloads-json-url", url))
    with pytest.raises(TimeoutError, match=r"did not finish within 1\.5 s"):
        list(gen)
    assert not target.exists() and _pids_mentioning(str(target)) == []


def test_the_vllm_build_downloads_a_python_as_progress(
    machine: Path, uv_env: Path, server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No usable Python on the machine: creating the vLLM environment downloads one first, its
    lines in the build's progress before the build's own steps (stopped there: pip would download)."""
    _fake(machine, "python3", _answers((3, 9, 18)))
    version = f"{bp.PROVISION_VERSION}.99"
    url = server.publish(version, "/py.tar.gz", _standalone(version))
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS_JSON_URL", url)
    env = uv_env / "runtime" / "vllm-venv"
    lines: list[str] = []
    gen = create_vllm_env(env, cpu=True)
    for line in gen:
        lines.append(line)
        if line.startswith("[1/"):  # the build's own steps begin (venv, then pip: minutes): stop
            gen.close()
    text = "\n".join(lines)
    assert "No Python 3.10–3.13 with venv on this machine to create the vLLM environment:" in text
    assert "Python 3.9.18 is outside" in text and "Downloading Python 3.12 with uv" in text
    provisioned = uv_env / "runtime" / "python"
    assert f"Using Python {'.'.join(map(str, REAL_VERSION))} ({provisioned}/cpython-{version}" in text
    steps = 5 if find_lock("vllm-cpu", REAL_VERSION[:2]) else 4  # locked: torch, then the lock
    assert lines[-1] == f"[1/{steps}] Creating virtualenv {env}" + (" (uv)" if venv_uv() else "")
    server.stop.set()
    assert bp.find_base_python(provisioned).path.startswith(str(provisioned))  # reused, no download
