"""Locked environments (vrag_desktop/locks/, scripts/lock.sh): each lock pins every package with its
hashes and still meets what pyproject asks; the CPU locks hold no CUDA package; an environment
built through the app's own step runner installs exactly the locked versions (not the newer one an
index offers) and refuses a file whose hash differs; the person's index settings are found."""

from __future__ import annotations

import base64
import hashlib
import re
import sys
import zipfile
from pathlib import Path

import pytest

from vrag_desktop.core.runtime.lockfile import (
    LOCK_DIR,
    env_lock,
    find_lock,
    installed_versions,
    lock_args,
    lock_drift,
    project_requirements,
    read_lock,
    unsatisfied,
    user_index_settings,
)
from vrag_desktop.core.runtime.venv import EnvCreateError, Step, build_venv, venv_python

ROOT = Path(__file__).resolve().parents[1]
CPU_LOCKS = ("app", "trainer-layered", "trainer-standalone", "vllm-cpu", "verl")
CUDA = re.compile(r"^(nvidia-(?!ml-py$)|torchvision$|torchaudio$|torchcodec$)")  # nvidia-ml-py: NVML


def test_every_lock_pins_every_package_with_hashes() -> None:
    locks = sorted(LOCK_DIR.glob("*.txt"))
    assert {p.stem.split("-py")[0] for p in locks} >= {"app", "minilm", "trainer-layered", "vllm-cpu"}
    for path in locks:
        lock = read_lock(path)  # a line that is not name==version raises
        text = path.read_text(encoding="utf-8")
        blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
        pinned = [b for b in blocks if re.match(r"[A-Za-z0-9]", b)]
        assert len(pinned) == len(lock.pins) > 0, path
        for block in pinned:
            assert "--hash=sha256:" in block, f"{path.name}: no hash for {block.splitlines()[0]}"
        assert lock.platform.startswith("x86_64-manylinux") and lock.pythons, path
        if path.stem.split("-py")[0] in CPU_LOCKS:
            cuda = sorted(n for n in lock.pins if CUDA.match(n))
            assert not cuda, f"{path.name} would install CUDA packages on a CPU machine: {cuda}"
            assert "torch" not in lock.pins, f"{path.name}: the CPU torch is installed apart, by its build"


def test_the_app_lock_meets_pyproject() -> None:
    """Fails when pyproject gains or tightens a dependency the lock does not meet: run scripts/lock.sh."""
    lock = find_lock("app", "3.11")
    assert lock is not None
    reqs = project_requirements(ROOT / "pyproject.toml", ["dev", "build"])
    assert unsatisfied(lock, reqs) == [], "vrag_desktop/locks/app.txt is stale: run scripts/lock.sh app"


def test_find_lock_by_python_and_platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    head = "# vrag-lock: python={} platform=x86_64-manylinux_2_35\n"
    (tmp_path / "x.txt").write_text(head.format("3.11,3.12") + "a==1 \\\n    --hash=sha256:00\n")
    (tmp_path / "x-py3.13.txt").write_text(head.format("3.13") + "a==2 \\\n    --hash=sha256:00\n")
    found = find_lock("x", (3, 12, 1), folder=tmp_path, machine="x86_64", system="Linux")
    assert found is not None and found.pins == {"a": "1"}
    found = find_lock("x", "3.13", folder=tmp_path, machine="x86_64", system="Linux")
    assert found is not None and found.pins == {"a": "2"}
    assert find_lock("x", "3.10", folder=tmp_path, machine="x86_64", system="Linux") is None
    assert find_lock("x", "3.11", folder=tmp_path, machine="aarch64", system="Linux") is None
    assert find_lock("x", "3.11", folder=tmp_path, machine="x86_64", system="Darwin") is None
    monkeypatch.setenv("VRAG_NO_LOCK", "1")
    assert find_lock("x", "3.11", folder=tmp_path, machine="x86_64", system="Linux") is None
    (tmp_path / "bad.txt").write_text(head.format("3.11") + "a>=1\n")
    with pytest.raises(ValueError, match="not an exact pin"):
        read_lock(tmp_path / "bad.txt")
    (tmp_path / "nohead.txt").write_text("a==1\n")
    with pytest.raises(ValueError, match="no '# vrag-lock:' header"):
        read_lock(tmp_path / "nohead.txt")


def test_the_persons_index_settings_are_found(tmp_path: Path) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\ntimeout = 60\n")
    assert user_index_settings({}, [conf]) == []
    assert user_index_settings({"PIP_INDEX_URL": "https://mirror/simple"}, [conf]) == ["$PIP_INDEX_URL"]
    conf.write_text("[install]\nextra-index-url = https://mirror/simple\n")
    assert user_index_settings({}, [conf, tmp_path / "absent.conf"]) == [f"{conf} [install] extra-index-url"]


def _wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A minimal pure-Python wheel (a module printing its version), written by hand."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": f"VERSION = {version!r}\n",
        f"{dist}/METADATA": "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, body in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(body.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(body.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    out = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as z:
        for path, body in files.items():
            z.writestr(path, body)
    return out


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.timeout(180)
def test_an_environment_installs_exactly_the_locked_versions(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    app = _wheel(wheels, "vragtinyapp", "1.0", ("vragtinydep>=1",))
    old = _wheel(wheels, "vragtinydep", "1.0")
    _wheel(wheels, "vragtinydep", "2.0")  # what the range alone would pick
    lock = tmp_path / "tiny.txt"
    lock.write_text(
        "# vrag-lock: python=3.11 platform=x86_64-manylinux_2_35\n"
        f"vragtinyapp==1.0 \\\n    --hash=sha256:{_sha(app)}\n"
        f"vragtinydep==1.0 \\\n    --hash=sha256:{_sha(old)}\n",
        encoding="utf-8",
    )
    assert read_lock(lock).pins == {"vragtinyapp": "1.0", "vragtinydep": "1.0"}
    env = tmp_path / "env"
    python = str(venv_python(env))
    # A venv without pip of its own (fast); this interpreter's pip installs into it (--python).
    new_venv = Step("venv", (sys.executable, "-m", "venv", "--without-pip", str(env)), "venv failed", 120.0)
    pip = (
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--no-index",
        "--find-links",
        str(wheels),
    )
    check = "import vragtinyapp, vragtinydep; print('versions', vragtinyapp.VERSION, vragtinydep.VERSION)"
    steps = [
        new_venv,
        Step("Installing the lock", (*pip, *lock_args(lock)), "pip install failed", 120.0),
        Step.import_check("the tiny packages", python, check),
    ]
    lines = list(build_venv(env, steps, marker=".done", record={}, label="tiny env"))
    assert "versions 1.0 1.0" in lines, lines[-5:]

    # a file that is not the one locked (its hash differs) is refused, and nothing is marked ready
    lock.write_text(lock.read_text().replace(_sha(old), "0" * 64), encoding="utf-8")
    other = tmp_path / "other"
    py2 = str(venv_python(other))
    steps = [
        Step("venv", (sys.executable, "-m", "venv", "--without-pip", str(other)), "venv failed", 120.0),
        Step(
            "Installing the lock",
            (*pip[:3], "--python", py2, *pip[5:], *lock_args(lock)),
            "pip install failed",
            120.0,
        ),
    ]
    with pytest.raises(EnvCreateError, match=r"(?s)pip install failed.*HASHES"):
        list(build_venv(other, steps, marker=".done", record={}, label="tiny env"))
    assert not (other / ".done").exists() and not list(other.rglob("vragtinydep.py"))


@pytest.mark.parametrize("name", ["trainer-standalone", "trainer-full"])
def test_the_trainer_locks_meet_the_apps_headless_requirements(name: str) -> None:
    """The app goes into these environments --no-deps; its headless requirements come from the lock."""
    from vrag_desktop.core.runtime.app_package import app_requirements, headless_requirements

    lock = read_lock(LOCK_DIR / f"{name}.txt")
    bad = unsatisfied(lock, headless_requirements(app_requirements(ROOT)))
    assert bad == [], f"vrag_desktop/locks/{name}.txt is stale: run scripts/lock.sh {name}"


@pytest.mark.timeout(180)
def test_uv_creates_an_environment_pip_can_install_into(tmp_path: Path) -> None:
    """The uv path of Step.new_venv (used where uv is present and no pip index of one's own is set):
    the venv has pip (seeded), so the pip steps that follow work unchanged."""
    from vrag_desktop.core.runtime.base_python import uv_binary

    uv = uv_binary()
    if uv is None:
        pytest.skip("uv is not installed")
    env = tmp_path / "uvenv"
    python = str(venv_python(env))
    steps = [
        Step.new_venv(env, sys.executable, str(uv)),
        Step.import_check("pip", python, "import pip, sys; print('pip', pip.__version__, sys.prefix)"),
    ]
    assert steps[0].argv[:3] == (str(uv), "venv", "--seed")
    lines = list(build_venv(env, steps, marker=".done", record={}, label="uv env"))
    assert any(line.startswith("pip ") and line.endswith(str(env)) for line in lines), lines[-5:]


@pytest.mark.parametrize(("env", "name"), [(".venv", "app"), (".venv-trainer", "trainer-layered")])
def test_the_environments_setup_made_hold_exactly_their_locks(env: str, name: str) -> None:
    """The app's environment and the trainer's, as scripts/setup.sh (the README's commands) made
    them: every package of their lock at exactly the locked version."""
    python = ROOT / env / "bin" / "python"
    if not python.exists():
        pytest.skip(f"{env} was not made here (scripts/setup.sh makes it)")
    lock = env_lock(name, str(python))
    if lock is None:
        pytest.skip(f"no lock '{name}' applies to {python} (setup installed from the ranges and said so)")
    installed = installed_versions(python)
    assert lock_drift(lock, installed) == {}
    assert {"torch", "vrag-desktop"} <= set(installed)  # torch from its own index; the app itself


def test_drift_names_a_package_at_another_version_and_one_missing(tmp_path: Path) -> None:
    lock_file = tmp_path / "l.txt"
    lock_file.write_text(
        "# vrag-lock: python=3.11 platform=x86_64-manylinux_2_35\nalpha==1.0 \\\n    --hash=sha256:00\n"
        "beta==2.0 \\\n    --hash=sha256:00\ngamma==3.0 \\\n    --hash=sha256:00\n",
        encoding="utf-8",
    )
    lock = read_lock(lock_file)
    assert lock_drift(lock, {"alpha": "1.0", "beta": "2.1", "extra": "9"}) == {
        "beta": ("2.0", "2.1"),
        "gamma": ("3.0", None),
    }
    assert lock_drift(lock, {"alpha": "1.0", "beta": "2.0", "gamma": "3.0", "torch": "2.13.0"}) == {}
