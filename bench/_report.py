"""What the one-tree benches (``--tree``) print and save: a Markdown table row, the ``--json`` file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def row(*cells: object) -> str:
    """One Markdown table row."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def save_json(path: Path | None, figures: Any) -> None:
    """Write ``figures`` to ``path`` (the ``--json`` option; None: not asked), making its folder."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(figures, indent=1))
