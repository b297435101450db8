"""The one guard for results that come back after the widget they were for may be gone.

Why one: work runs off the GUI thread (:mod:`.tasks`) and a person may close a panel, a dialog or
the window while it runs; touching a deleted widget's C++ side raises (or crashes). Qt drops a
signal to a deleted receiver by itself, but a Python callback holds only the Python wrapper, so
every late callback asks here first. Before this module there were three copies of the check
(tasks, the runtime tabs, the evidence view) and a dozen inline ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import shiboken6
from PySide6.QtCore import QObject

__all__ = ["alive", "if_alive", "unless_deleted"]

_F = TypeVar("_F", bound=Callable[..., Any])


def alive(*objects: object) -> bool:
    """True while every one of ``objects`` (Qt objects; None counts as gone) still exists on the
    C++ side; plain Python objects always count as alive."""
    for obj in objects:
        if obj is None:
            return False
        if isinstance(obj, QObject) and not shiboken6.isValid(obj):
            return False
    return True


def if_alive(owner: QObject, fn: Callable[..., Any]) -> Callable[..., None]:
    """``fn`` that does nothing once ``owner`` is deleted (a callback for a widget that may close
    before the work it started ends)."""

    def call(*args: Any) -> None:
        if alive(owner):
            fn(*args)

    return call


def unless_deleted(cb: _F | None) -> _F | None:
    """A QObject's bound method that does nothing once the object is deleted, as a Qt connection to
    it would be; any other callable (or None) is returned as it is."""
    owner = getattr(cb, "__self__", None)
    if cb is None or not isinstance(owner, QObject):
        return cb
    return cast("_F", if_alive(owner, cb))
