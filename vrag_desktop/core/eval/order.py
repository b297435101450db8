"""The order evaluation items are listed in: by uid, naturally (q2 before q10), everywhere a person
reads them — the Evaluations dock, the comparison, the HTML report. Text order put q10 and q11
between q1 and q2."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

__all__ = ["by_uid", "natural_key"]

_PARTS = re.compile(r"(\d+)")
T = TypeVar("T", bound=Mapping[str, Any])


def natural_key(text: object) -> tuple[tuple[int, int, str], ...]:
    """A sort key that orders runs of digits by their value: ``q2`` < ``q10`` < ``Q11`` < ``r1``.
    Case is ignored; numbers come before words at the same place (``1a`` < ``a``)."""
    out = []
    for i, part in enumerate(_PARTS.split(str(text))):
        if not part:
            continue
        out.append((0, int(part), part) if i % 2 else (1, 0, part.casefold()))
    return tuple(out)


def by_uid(rows: Iterable[T]) -> list[T]:
    """``rows`` (result rows, each with a ``uid``) sorted naturally by uid."""
    return sorted(rows, key=lambda r: natural_key(r.get("uid", "")))
