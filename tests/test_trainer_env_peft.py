"""The trainer environment carries PEFT (LoRA runs need it): pinned in both the layered (CPU) and
the full (GPU) package sets, checked by the import check, and installed by the layered steps."""

from __future__ import annotations

from pathlib import Path

from vrag_desktop.core.runtime.trainer_env_plan import (
    _VERIFY,
    _VERSIONED,
    FULL_PACKAGES,
    LAYERED_PACKAGES,
    PEFT,
    trainer_env_steps,
)


def test_peft_is_pinned_installed_and_import_checked(tmp_path: Path) -> None:
    assert PEFT.startswith("peft==") and PEFT in LAYERED_PACKAGES and PEFT in FULL_PACKAGES
    assert "peft" in _VERSIONED and "\nimport peft" in _VERIFY
    steps = trainer_env_steps(
        tmp_path / "env", mode="layered", base="/usr/bin/python3", trainer_source=tmp_path, site_dirs=["/x"]
    )
    assert any(PEFT in step.argv for step in steps)
