"""The test command's shards (scripts/test.sh): a test of the built bundle waits for the background
build, so one placed before the other tests would hold its whole shard for minutes (it did: the
glibc test sat 10 minutes at the head of the main shard)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _group(script: str, name: str) -> set[str]:
    m = re.search(rf"^\s*{name}=\(([^)]*)\)", script, re.M)
    assert m, f"no {name}=(...) in scripts/test.sh"
    return set(m.group(1).split())


def test_every_test_of_the_built_bundle_runs_last() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    frozen = _group(script, "frozen")
    uses_bundle = {
        f"tests/{p.name}"
        for p in (ROOT / "tests").glob("test_*.py")
        if re.search(r"^from frozen_bundle import|^import frozen_bundle", p.read_text(encoding="utf-8"), re.M)
    }
    assert uses_bundle, "no test imports tests/frozen_bundle.py: the check finds nothing to check"
    assert uses_bundle <= frozen, f"add to frozen=(...) in scripts/test.sh: {sorted(uses_bundle - frozen)}"
    assert all((ROOT / f).is_file() for f in frozen | _group(script, "long") | _group(script, "vllm"))
