"""Themes: real palettes on the real QApplication; open widgets follow a switch at runtime."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import QApplication, QLabel, QLineEdit

from vrag_desktop.qt.infra import theme

Role = QPalette.ColorRole


@pytest.fixture
def app(qapp: QApplication) -> Iterator[QApplication]:
    theme.apply_theme(qapp, "system")
    yield qapp
    theme.apply_theme(qapp, "system")


def _has_colour_near(img: QImage, target: QColor, tolerance: int = 40) -> bool:
    for y in range(img.height()):
        for x in range(img.width()):
            c = img.pixelColor(x, y)
            if (
                abs(c.red() - target.red()) + abs(c.green() - target.green()) + abs(c.blue() - target.blue())
                <= tolerance
            ):
                return True
    return False


def test_dark_is_darker_than_light_and_readable(app: QApplication) -> None:
    assert theme.apply_theme(app, "light") == "light"
    light = app.palette()
    assert not theme.is_dark(light)
    assert theme.apply_theme(app, "dark") == "dark"
    dark = app.palette()
    assert theme.is_dark(dark)
    assert dark.color(Role.Window).lightness() < light.color(Role.Window).lightness()
    assert dark.color(Role.Base).lightness() < light.color(Role.Base).lightness()
    for pal in (light, dark):  # text stands out from what it sits on
        for bg, fg in (
            (Role.Window, Role.WindowText),
            (Role.Base, Role.Text),
            (Role.Button, Role.ButtonText),
        ):
            assert abs(pal.color(bg).lightness() - pal.color(fg).lightness()) > 150
        disabled = pal.color(QPalette.ColorGroup.Disabled, Role.Text)
        assert disabled != pal.color(QPalette.ColorGroup.Active, Role.Text)


def test_system_gives_the_platform_palette_back(app: QApplication) -> None:
    before = app.palette().color(Role.Window).name()
    theme.apply_theme(app, "dark")
    assert app.palette().color(Role.Window).name() != before
    assert theme.apply_theme(app, "system") == ("dark" if theme.is_dark(app.palette()) else "light")
    assert app.palette().color(Role.Window).name() == before and theme.current_theme() == "system"


def test_named_colours_follow_the_theme(app: QApplication) -> None:
    theme.apply_theme(app, "light")
    light = theme.colors()
    theme.apply_theme(app, "dark")
    dark = theme.colors()
    assert set(light) == set(dark) >= {"accent", "ok", "warn", "error", "muted", "graph_bg"}
    assert theme.color("error") == dark["error"] != light["error"]
    assert dark["graph_bg"].lightness() < light["graph_bg"].lightness()
    with pytest.raises(KeyError):
        theme.color("no-such-role")
    with pytest.raises(ValueError, match="theme must be one of"):
        theme.apply_theme(app, "purple")


def test_open_widgets_follow_a_runtime_switch(app: QApplication, qtbot: Any) -> None:
    edit = QLineEdit("typed")
    qtbot.addWidget(edit)
    edit.show()
    heard: list[str] = []
    theme.theme_notifier().changed.connect(heard.append)
    theme.apply_theme(app, "dark")
    assert edit.palette().color(Role.Base) == theme.build_palette("dark").color(Role.Base)
    theme.apply_theme(app, "light")
    assert edit.palette().color(Role.Base) == theme.build_palette("light").color(Role.Base)
    assert heard == ["dark", "light"]


def test_chip_styles_render_in_theme_colours(app: QApplication, qtbot: Any) -> None:
    theme.apply_theme(app, "dark")
    label = QLabel("failed failed")
    label.setProperty("chip", "error")
    qtbot.addWidget(label)
    label.show()
    img = label.grab().toImage()
    assert _has_colour_near(img, theme.color("error")) and not _has_colour_near(img, theme.color("ok"))
    theme.set_role(label, "chip", "ok")  # changing the property later takes effect at once
    img = label.grab().toImage()
    assert _has_colour_near(img, theme.color("ok")) and not _has_colour_near(img, theme.color("error"))


def test_a_crop_cards_border_follows_the_theme_and_its_selection(app: QApplication, qtbot: Any) -> None:
    """Drawn by the app stylesheet, not by Python at each repaint: the theme's border colour, 1 px
    inside a 1 px margin; selected, 2 px in the region's colour, the contents where they were."""
    from vrag_desktop.core.run.evidence import Region
    from vrag_desktop.qt.evidence.crop_cards import CropCard

    region = Region(1, 1, (0, 0, 10, 10), "")
    for name in ("light", "dark"):
        theme.apply_theme(app, name)
        card = CropCard(region)
        qtbot.addWidget(card)
        card.resize(200, 150)
        card.show()
        inner = card.contentsRect()
        img = card.grab().toImage()
        assert img.pixelColor(100, 1) == QColor(theme.color("border"))
        assert img.pixelColor(100, 0) != img.pixelColor(100, 1)  # the margin
        card.update_region(region, True)
        img = card.grab().toImage()
        assert img.pixelColor(100, 0) == img.pixelColor(100, 1) == QColor(theme.MARKS["region"])
        assert card.contentsRect() == inner
