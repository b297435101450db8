"""PyInstaller hook for torch, used instead of pyinstaller-hooks-contrib's (pyinstaller.spec's
``hookspath``): the same files, but torch's submodules are listed from its folder instead of being
imported one by one in a subprocess (``collect_submodules``), which took over a minute of every
build. Every module is still analysed: torch imports many of its parts by name at run time."""

from pathlib import Path

from PyInstaller.utils.hooks import (
    PY_DYLIB_PATTERNS,
    collect_data_files,
    collect_dynamic_libs,
    get_package_paths,
)

module_collection_mode = "pyz+py"  # torch reads its own sources (TorchScript, inspect)
warn_on_missing_hiddenimports = False

datas = collect_data_files(
    "torch", excludes=["**/*.h", "**/*.hpp", "**/*.cuh", "**/*.lib", "**/*.cpp", "**/*.pyi", "**/*.cmake"]
)
binaries = collect_dynamic_libs("torch", search_patterns=[*PY_DYLIB_PATTERNS, "*.so.*"])
bindepend_symlink_suppression = ["**/torch/lib/*.so*"]

_SKIPPED = ("torch.utils.tensorboard",)  # no tensorboard here


def _submodules() -> list[str]:
    _, pkg_dir = get_package_paths("torch")
    root = Path(pkg_dir)
    names = []
    for f in root.rglob("*.py"):
        rel = f.relative_to(root.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        if any(not p.isidentifier() for p in parts):
            continue
        name = ".".join(parts)
        if not name.startswith(_SKIPPED):
            names.append(name)
    return sorted(names)


hiddenimports = _submodules()

# The CUDA variant (VRAG_BUNDLE_CUDA=1, built where torch is a CUDA build): the nvidia-* packages
# torch requires, as the contrib hook infers them.
try:
    import packaging.requirements
    from _pyinstaller_hooks_contrib.compat import importlib_metadata
    from _pyinstaller_hooks_contrib.utils import nvidia_cuda as cudautils

    _reqs = [
        packaging.requirements.Requirement(r) for r in importlib_metadata.distribution("torch").requires or []
    ]
    hiddenimports += cudautils.infer_hiddenimports_from_requirements(
        [r.name for r in _reqs if r.marker is None or r.marker.evaluate()]
    )
except Exception:  # pragma: no cover - the CPU build has none
    pass
