"""Light and dark themes, and the named colours widgets use instead of hard-coded ones.

``apply_theme(app, "light" | "dark")`` puts the app on Fusion with a full palette defined here, so
the look is the same on every platform; ``"system"`` gives the platform its own style and palette
back. Widgets that paint themselves take colours from :func:`color` (``"accent"``, ``"ok"``,
``"warn"``, ``"error"``, ``"muted"``, ``"info"``, ``"graph_bg"``, ``"border"``, ``"surface"``, the
log's search marks ``"match*"``, the transcript's ``"card"``, the plots' ``"plot_*"`` hues) and
repaint on :func:`theme_notifier` ``changed`` (or on ``QEvent.PaletteChange``, which Qt sends them).
No other Qt module names a colour (``tests/qt/test_theme.py`` checks): a colour written in a module
would be the same in both themes, and readable in one at most.

A small app stylesheet styles a few dynamic properties, so widgets need no colours of their own:

* ``QLabel[chip="ok|warn|error|info|muted|accent"]`` — a rounded status chip;
* ``QLabel[role="error|warn|ok|muted|info|accent|hint"]`` — coloured text (``hint``: small and muted);
* ``QLabel[verdict="supported|partial|unsupported"]`` — a verdict badge;
* ``QFrame[role="banner-warn|banner-error|banner-info"]`` — a message strip (or an advice box, such
  as a pre-flight warning), its text in a colour chosen for it (WCAG contrast ≥ 4.5 in both themes);
* ``QPushButton[role="danger"]`` — a destructive button asking for a second click;
* ``[invalid="true"]`` on an input — its border in the error colour;
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

# Named colours per effective theme. Text colours (accent … muted) have a WCAG contrast of at least
# 4.5 on the theme's window and base colours; each banner's text at least 4.5 on its background.
_NAMED: dict[str, dict[str, str]] = {
    "light": {
        "accent": "#2660cc",
        "ok": "#1b7a43",
        "warn": "#8f5d0c",
        "error": "#b93530",
        "info": "#2660cc",
        "muted": "#5f6672",
        "graph_bg": "#f7f8fa",
        "border": "#d5d9e0",
        "surface": "#ffffff",
        "text": "#1f2328",
        "card": "#f3f5f8",  # a transcript block on the base colour
        "on_strong": "#ffffff",  # text on a strong colour (a verdict badge on ok/warn/error)
        "banner_error_bg": "#fbe5e3",
        "banner_error_text": "#6e1a16",
        "banner_error_border": "#ecaaa5",
        "banner_warn_bg": "#fcf0d4",
        "banner_warn_text": "#5c4000",
        "banner_warn_border": "#e8c46e",
        "banner_info_bg": "#e3edfb",
        "banner_info_text": "#163a69",
        "banner_info_border": "#a9c4ee",
        "match": "#fde68a",  # the log's search hits, and the current one
        "match_text": "#111827",
        "match_current": "#f59e0b",
        "match_current_text": "#111827",
        "plot_blue": "#2563eb",
        "plot_green": "#16a34a",
        "plot_orange": "#d97706",
        "plot_purple": "#9333ea",
        "plot_cyan": "#0891b2",
        "plot_grey": "#4b5563",
        "plot_violet": "#7c3aed",
        "plot_red": "#dc2626",
        "plot_rose": "#be123c",
        "plot_amber": "#ea580c",
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
        "card": "#2c3038",
        "on_strong": "#111827",
        "banner_error_bg": "#4a2225",
        "banner_error_text": "#ffdcd8",
        "banner_error_border": "#7a3a3c",
        "banner_warn_bg": "#423619",
        "banner_warn_text": "#ffe7ad",
        "banner_warn_border": "#6e5a26",
        "banner_info_bg": "#1d3354",
        "banner_info_text": "#d9e8ff",
        "banner_info_border": "#355a8c",
        "match": "#5c4d12",
        "match_text": "#fff7e0",
        "match_current": "#e0b040",
        "match_current_text": "#111827",
        "plot_blue": "#60a5fa",
        "plot_green": "#4ade80",
        "plot_orange": "#fbbf24",
        "plot_purple": "#c084fc",
        "plot_cyan": "#22d3ee",
        "plot_grey": "#cbd5e1",
        "plot_violet": "#a78bfa",
        "plot_red": "#f87171",
        "plot_rose": "#fb7185",
        "plot_amber": "#fb923c",
    },
}

#: The evidence marks' colours (a region the model cut, one the answer cites, the flash that shows
#: where a jump landed), the same in both themes: drawn on the pages, not on the window, saturated
#: enough to show on white pages and dark photos alike.
MARKS = {"region": "#1971c2", "cited": "#e8590c", "flash": "#fab005", "on_mark": "#ffffff"}

#: The reasoning graph's node kinds, the same in both themes: mid-saturated, so their captions in
#: ``on_kind`` (white) read at a contrast of at least 4.5, and they stand out on light and dark
#: backgrounds alike.
KINDS = {
    "root": "#4f5d95",
    "think": "#8657c4",
    "search": "#2474c6",
    "crop": "#a35a0d",
    "answer": "#217f45",
    "other": "#6b7280",
    "on_kind": "#ffffff",
}

#: Where banner text must stand out: the WCAG contrast a person with low vision can read.
MIN_CONTRAST = 4.5

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
    roles = "\n".join(
        f'QLabel[role="{k}"] {{ color: {c[k]}; }}' for k in ("error", "warn", "ok", "muted", "info", "accent")
    )
    # opaque, with their own text colour: a tint over the window left the text's contrast to chance
    banners = "\n".join(
        f'QFrame[role="banner-{k}"] {{ background: {c[f"banner_{k}_bg"]}; '
        f"border: 1px solid {c[f'banner_{k}_border']}; border-radius: 6px; }}\n"
        f'QFrame[role="banner-{k}"] QLabel, QLabel[role="banner-{k}"] {{ color: {c[f"banner_{k}_text"]}; }}'
        for k in ("warn", "error", "info")
    )
    verdicts = "\n".join(
        f'QLabel[verdict="{k}"] {{ color: {c["on_strong"]}; background: {c[v]}; border-radius: 4px; '
        f"padding: 1px 6px; font-weight: 600; }}"
        for k, v in (("supported", "ok"), ("partial", "warn"), ("unsupported", "error"))
    )
    return f"""
{chips}
{roles}
QLabel[role="hint"] {{ color: {c["muted"]}; font-size: 9pt; }}
{banners}
{verdicts}
QPushButton[role="danger"] {{ color: {c["error"]}; font-weight: bold; }}
QLineEdit[invalid="true"], QSpinBox[invalid="true"], QDoubleSpinBox[invalid="true"],
QComboBox[invalid="true"], QPlainTextEdit[invalid="true"] {{ border: 1px solid {c["error"]}; }}
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


def contrast(a: QColor, b: QColor) -> float:
    """The WCAG 2 contrast ratio of two colours (1 to 21; text wants at least :data:`MIN_CONTRAST`)."""

    def luminance(c: QColor) -> float:
        def channel(v: float) -> float:
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

        return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF())

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _mix(a: QColor, b: QColor, t: float) -> QColor:
    """``a`` moved a fraction ``t`` towards ``b``."""
    return QColor(
        round(a.red() + (b.red() - a.red()) * t),
        round(a.green() + (b.green() - a.green()) * t),
        round(a.blue() + (b.blue() - a.blue()) * t),
    )
