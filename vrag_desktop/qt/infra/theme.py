"""Light and dark themes, and the named colours widgets use instead of hard-coded ones.

``apply_theme(app, "light" | "dark")`` puts the app on Fusion with a full palette defined here, so
the look is the same on every platform; ``"system"`` gives the platform its own style and palette
back. Widgets that paint themselves take colours from :func:`color` (``"accent"``, ``"ok"``,
``"warn"``, ``"error"``, ``"muted"``, ``"info"``, ``"graph_bg"``, ``"border"``, ``"surface"``) and
repaint on :func:`theme_notifier` ``changed`` (or on ``QEvent.PaletteChange``, which Qt sends them).

A small app stylesheet styles a few dynamic properties, so widgets need no colours of their own:

* ``QLabel[chip="ok|warn|error|info|muted|accent"]`` — a rounded status chip;
* ``QLabel[role="error|warn|ok|muted|hint"]`` — coloured text (``hint``: small and muted);
* ``QLabel[verdict="supported|partial|unsupported"]`` — a verdict badge;
* ``QFrame[role="banner-warn|banner-error|banner-info"]`` — a tinted message strip;
* ``QGraphicsView[role="graph"]`` — the reasoning-graph background;
* ``QFrame[card="crop"]`` — a crop card's rounded border, in the mark's colour when ``mark`` is
  ``region`` or ``cited`` (a selected card).

Set a property before the widget is shown, or later with :func:`set_role` (it re-polishes).
"""

from __future__ import annotations

import functools

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPalette, QStyleHints
from PySide6.QtWidgets import QApplication, QStyleFactory, QWidget

THEMES = ("system", "light", "dark")

# Named colours per effective theme: muted, readable on the window and base colours of that theme.
_NAMED: dict[str, dict[str, str]] = {
    "light": {
        "accent": "#2f6fde",
        "ok": "#1f8a4c",
        "warn": "#b7791f",
        "error": "#c93c37",
        "info": "#2f6fde",
        "muted": "#6b7280",
        "graph_bg": "#f7f8fa",
        "border": "#d5d9e0",
        "surface": "#ffffff",
        "text": "#1f2328",
    },
    "dark": {
        "accent": "#5b9cff",
        "ok": "#4cc38a",
        "warn": "#e0b040",
        "error": "#f2706b",
        "info": "#5b9cff",
        "muted": "#9aa3af",
        "graph_bg": "#1b1d22",
        "border": "#3a3f4b",
        "surface": "#25282f",
        "text": "#e6e8eb",
    },
}

#: The evidence marks' colours (a region the model cut, one the answer cites), the same in both
#: themes: saturated enough to show on white pages and dark photos alike.
MARKS = {"region": "#1971c2", "cited": "#e8590c"}

# Palette roles for the two themes we define (active colours; disabled ones are derived).
_PALETTE: dict[str, dict[QPalette.ColorRole, str]] = {
    "light": {
        QPalette.ColorRole.Window: "#f3f4f6",
        QPalette.ColorRole.WindowText: "#1f2328",
        QPalette.ColorRole.Base: "#ffffff",
        QPalette.ColorRole.AlternateBase: "#f6f7f9",
        QPalette.ColorRole.ToolTipBase: "#ffffff",
        QPalette.ColorRole.ToolTipText: "#1f2328",
        QPalette.ColorRole.PlaceholderText: "#8b939e",
        QPalette.ColorRole.Text: "#1f2328",
        QPalette.ColorRole.Button: "#f8f9fa",
        QPalette.ColorRole.ButtonText: "#1f2328",
        QPalette.ColorRole.BrightText: "#ffffff",
        QPalette.ColorRole.Light: "#ffffff",
        QPalette.ColorRole.Midlight: "#e9ebef",
        QPalette.ColorRole.Mid: "#c4c9d1",
        QPalette.ColorRole.Dark: "#9aa1ab",
        QPalette.ColorRole.Shadow: "#5c6370",
        QPalette.ColorRole.Highlight: "#2f6fde",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: "#2f6fde",
        QPalette.ColorRole.LinkVisited: "#7b4fc9",
        QPalette.ColorRole.Accent: "#2f6fde",
    },
    "dark": {
        QPalette.ColorRole.Window: "#1e2026",
        QPalette.ColorRole.WindowText: "#e6e8eb",
        QPalette.ColorRole.Base: "#25282f",
        QPalette.ColorRole.AlternateBase: "#2a2d35",
        QPalette.ColorRole.ToolTipBase: "#2a2e37",
        QPalette.ColorRole.ToolTipText: "#e6e8eb",
        QPalette.ColorRole.PlaceholderText: "#7d8590",
        QPalette.ColorRole.Text: "#e6e8eb",
        QPalette.ColorRole.Button: "#2d3038",
        QPalette.ColorRole.ButtonText: "#e6e8eb",
        QPalette.ColorRole.BrightText: "#ffffff",
        QPalette.ColorRole.Light: "#454a57",
        QPalette.ColorRole.Midlight: "#383c47",
        QPalette.ColorRole.Mid: "#2b2e36",
        QPalette.ColorRole.Dark: "#15171b",
        QPalette.ColorRole.Shadow: "#0a0b0d",
        QPalette.ColorRole.Highlight: "#3d7be0",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: "#6ea8ff",
        QPalette.ColorRole.LinkVisited: "#b48cff",
        QPalette.ColorRole.Accent: "#3d7be0",
    },
}

_state: dict[str, str | None] = {
    "chosen": "system",
    "effective": "light",
    "native_style": None,
    "applying": None,
}
_followed: list[bool] = []  # whether we listen to the platform's colour-scheme changes yet


class ThemeNotifier(QObject):
    """Emits ``changed(effective)`` ("light" or "dark") after every :func:`apply_theme`."""

    changed = Signal(str)


@functools.cache
def theme_notifier() -> ThemeNotifier:
    """The app-wide notifier (created on first use, on the GUI thread)."""
    return ThemeNotifier()


def is_dark(palette: QPalette) -> bool:
    """Dark when the window colour is darker than its text (works for any palette, system ones too)."""
    window = palette.color(QPalette.ColorRole.Window)
    text = palette.color(QPalette.ColorRole.WindowText)
    return window.lightnessF() < text.lightnessF()


def current_theme() -> str:
    """The theme last chosen with :func:`apply_theme` ("system", "light" or "dark")."""
    return str(_state["chosen"])


def effective_theme() -> str:
    """What is on screen now: "light" or "dark" ("system" resolved through the palette)."""
    return str(_state["effective"])


def color(name: str) -> QColor:
    """A named colour for the theme on screen; unknown names raise KeyError (a typo should show)."""
    return QColor(_NAMED[effective_theme()][name])


def colors() -> dict[str, QColor]:
    return {k: QColor(v) for k, v in _NAMED[effective_theme()].items()}


def build_palette(theme: str) -> QPalette:
    """The full palette of ``"light"`` or ``"dark"``; disabled colours are faded versions."""
    roles = _PALETTE[theme]
    pal = QPalette()
    for role, value in roles.items():
        c = QColor(value)
        pal.setColor(QPalette.ColorGroup.Active, role, c)
        pal.setColor(QPalette.ColorGroup.Inactive, role, c)
        pal.setColor(QPalette.ColorGroup.Disabled, role, c)
    window = QColor(roles[QPalette.ColorRole.Window])
    for role in (
        QPalette.ColorRole.WindowText,
        QPalette.ColorRole.Text,
        QPalette.ColorRole.ButtonText,
    ):
        pal.setColor(QPalette.ColorGroup.Disabled, role, _mix(QColor(roles[role]), window, 0.55))
    pal.setColor(
        QPalette.ColorGroup.Disabled,
        QPalette.ColorRole.Highlight,
        _mix(QColor(roles[QPalette.ColorRole.Highlight]), window, 0.6),
    )
    # Unfocused selections stay visible but quieter.
    pal.setColor(
        QPalette.ColorGroup.Inactive,
        QPalette.ColorRole.Highlight,
        _mix(QColor(roles[QPalette.ColorRole.Highlight]), window, 0.25),
    )
    return pal


def stylesheet(theme: str) -> str:
    """The app stylesheet for an effective theme (property-selected widgets only)."""
    c = _NAMED[theme]
    dark = theme == "dark"

    def tint(name: str, alpha: float) -> str:
        q = QColor(c[name])
        return f"rgba({q.red()}, {q.green()}, {q.blue()}, {alpha:.2f})"

    chips = "\n".join(
        f'QLabel[chip="{k}"] {{ color: {c[k]}; background: {tint(k, 0.16 if dark else 0.12)}; '
        f"border: 1px solid {tint(k, 0.35)}; border-radius: 9px; padding: 1px 8px; }}"
        for k in ("ok", "warn", "error", "info", "muted", "accent")
    )
    roles = "\n".join(f'QLabel[role="{k}"] {{ color: {c[k]}; }}' for k in ("error", "warn", "ok", "muted"))
    banners = "\n".join(
        f'QFrame[role="banner-{k}"] {{ background: {tint(v, 0.14 if dark else 0.10)}; '
        f"border: 1px solid {tint(v, 0.40)}; border-radius: 6px; }}"
        for k, v in (("warn", "warn"), ("error", "error"), ("info", "info"))
    )
    verdicts = "\n".join(
        f'QLabel[verdict="{k}"] {{ color: white; background: {c[v]}; border-radius: 4px; '
        f"padding: 1px 6px; font-weight: 600; }}"
        for k, v in (("supported", "ok"), ("partial", "warn"), ("unsupported", "error"))
    )
    return f"""
{chips}
{roles}
QLabel[role="hint"] {{ color: {c["muted"]}; font-size: 9pt; }}
{banners}
{verdicts}
QGraphicsView[role="graph"] {{ background: {c["graph_bg"]}; border: 1px solid {c["border"]}; }}
QFrame[card="crop"] {{ border: 1px solid {c["border"]}; border-radius: 6px; margin: 1px; }}
QFrame[card="crop"][mark="region"] {{ border: 2px solid {MARKS["region"]}; margin: 0px; }}
QFrame[card="crop"][mark="cited"] {{ border: 2px solid {MARKS["cited"]}; margin: 0px; }}
"""


def apply_theme(app: QApplication, theme: str) -> str:
    """Switch the whole app to ``theme``; returns the effective theme ("light" or "dark").

    Open widgets follow at once: the application palette and stylesheet propagate to them, and
    :func:`theme_notifier` tells widgets that paint with :func:`color`.
    """
    if theme not in THEMES:
        raise ValueError(f"theme must be one of {', '.join(THEMES)}, not {theme!r}")
    if _state["native_style"] is None:  # the platform's own style, before we first change it
        _state["native_style"] = (app.style().name() or "fusion").lower()
        _state["style"] = _state["native_style"]
    hints = QGuiApplication.styleHints()
    if not _followed and hasattr(hints, "colorSchemeChanged"):
        _followed.append(True)
        hints.colorSchemeChanged.connect(lambda _scheme: _follow_platform(app))
    _state["chosen"] = theme
    _state["applying"] = "1"  # the colour-scheme hints below signal; we settle the result ourselves
    try:
        effective = _apply(app, theme, hints)
    finally:
        _state["applying"] = None
    _state["effective"] = effective
    app.setStyleSheet(stylesheet(effective))
    theme_notifier().changed.emit(effective)
    return effective


def _apply(app: QApplication, theme: str, hints: QStyleHints) -> str:
    """Style, colour-scheme hint and palette for ``theme``; returns the effective theme.

    Style names are tracked here: with an app stylesheet set, ``app.style().name()`` is empty.
    """
    if theme == "system":
        native = str(_state["native_style"])
        available = [k.lower() for k in QStyleFactory.keys()]  # noqa: SIM118 (a list, not a dict)
        if _state["style"] != native and native in available:
            app.setStyle(native)
            _state["style"] = native
        if hasattr(hints, "unsetColorScheme"):
            hints.unsetColorScheme()
        app.setPalette(QPalette())  # an empty palette resolves to the platform's own
        effective = "dark" if is_dark(app.palette()) else "light"
    else:
        if _state["style"] != "fusion":
            app.setStyle("Fusion")
            _state["style"] = "fusion"
        if hasattr(hints, "setColorScheme"):
            hints.setColorScheme(Qt.ColorScheme.Dark if theme == "dark" else Qt.ColorScheme.Light)
        app.setPalette(build_palette(theme))
        effective = theme
    return effective


def _follow_platform(app: QApplication) -> None:
    """The platform switched light/dark: follow it when the person chose "system"."""
    if _state["chosen"] == "system" and not _state.get("applying"):
        effective = "dark" if is_dark(app.palette()) else "light"
        if effective != _state["effective"]:
            _state["effective"] = effective
            app.setStyleSheet(stylesheet(effective))
            theme_notifier().changed.emit(effective)


def set_role(widget: QWidget, name: str, value: str | None) -> None:
    """Set a styling property (``chip``, ``role``, ``verdict``, ``mark``) and re-polish so it shows now."""
    widget.setProperty(name, value)
    style = widget.style()
    style.unpolish(widget)
    style.polish(widget)
    widget.update()


def _mix(a: QColor, b: QColor, t: float) -> QColor:
    """``a`` moved a fraction ``t`` towards ``b``."""
    return QColor(
        round(a.red() + (b.red() - a.red()) * t),
        round(a.green() + (b.green() - a.green()) * t),
        round(a.blue() + (b.blue() - a.blue()) * t),
    )
