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


# ---- banners: readable in both themes, and no colour outside the theme --------------------------
def _image_colours(img: QImage) -> tuple[QColor, Any]:
    """The image's most common colour (its background) and its pixels as an (h, w, 3) array."""
    import numpy as np

    img = img.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = img.width(), img.height(), img.bytesPerLine()
    rows = np.frombuffer(img.constBits(), np.uint8, count=h * stride).reshape(h, stride)
    rgb = rows[:, : w * 3].reshape(h, w, 3)
    colours, counts = np.unique(rgb.reshape(-1, 3), axis=0, return_counts=True)
    r, g, b = (int(v) for v in colours[counts.argmax()])
    return QColor(r, g, b), rgb


def _text_contrast(banner: Any, label: QLabel) -> float:
    """The WCAG contrast of ``label``'s text colour (as styled) on ``banner``'s background (as
    drawn); the text must really be drawn in that colour."""
    import numpy as np

    bg, rgb = _image_colours(banner.grab().toImage())
    fg = label.palette().color(label.foregroundRole())
    top_left = label.mapTo(banner, label.rect().topLeft())
    area = rgb[top_left.y() : top_left.y() + label.height(), top_left.x() : top_left.x() + label.width()]
    near = np.abs(area.astype(int) - np.array([fg.red(), fg.green(), fg.blue()])).sum(axis=2) < 40
    assert near.sum() >= 10, f"the text is not drawn in {fg.name()}"
    return theme.contrast(fg, bg)


def _banners(qtbot: Any) -> list[tuple[str, Any, QLabel]]:
    """Every kind of banner: the notification bar at each level, a banner frame of each kind (the
    readiness bar, the offline and example bars, dialogs' errors) and the vLLM pre-flight box."""
    from PySide6.QtWidgets import QFrame, QVBoxLayout, QWidget

    from vrag_desktop.qt.notifications import NotificationBar
    from vrag_desktop.qt.runtime.gpu_box import Preflight

    out: list[tuple[str, Any, QLabel]] = []
    for level in ("error", "warning", "info"):
        bar = NotificationBar()
        qtbot.addWidget(bar)
        bar.resize(700, 60)
        bar.show_message(level, "vLLM could not start", "the GPU has 2 GB free; the model needs 15 GB")
        out.append((f"notification {level}", bar, bar.label))
    for kind in ("warn", "error", "info"):
        frame = QFrame()
        qtbot.addWidget(frame)
        frame.setProperty("role", f"banner-{kind}")
        label = QLabel("Nothing is indexed yet: add a folder to the corpus first.", frame)
        QVBoxLayout(frame).addWidget(label)
        frame.resize(600, 50)
        frame.show()
        out.append((f"banner-{kind}", frame, label))
    host = QWidget()
    qtbot.addWidget(host)
    pre = Preflight(host)
    QVBoxLayout(host).addWidget(pre.box)
    pre.show(["The model needs about 15.2 GiB of GPU memory; 7.8 GiB are free."])
    host.resize(600, 120)
    host.show()
    pre.box.keep = (host, pre)  # qtbot holds widgets weakly: the box lives as long as its host
    out.append(("pre-flight", pre.box, pre.label))
    return out


@pytest.mark.parametrize("name", ["light", "dark"])
def test_banners_are_readable_in_both_themes(app: QApplication, qtbot: Any, name: str) -> None:
    theme.apply_theme(app, name)
    window = app.palette().color(Role.Window)
    for what, banner, label in _banners(qtbot):
        qtbot.waitUntil(banner.isVisible, timeout=2_000)
        ratio = _text_contrast(banner, label)
        assert ratio >= theme.MIN_CONTRAST, f"{what} in {name}: contrast {ratio:.2f}"
        bg, _ = _image_colours(banner.grab().toImage())
        if name == "dark":  # a dark banner on a dark window, never a bright box
            assert bg.lightness() < 110 and abs(bg.lightness() - window.lightness()) < 60, (what, bg.name())


def test_the_notification_bar_follows_a_theme_switch(app: QApplication, qtbot: Any) -> None:
    from vrag_desktop.qt.notifications import NotificationBar

    theme.apply_theme(app, "light")
    bar = NotificationBar()
    qtbot.addWidget(bar)
    bar.resize(700, 60)
    bar.show_message("error", "Could not save settings", "Read-only file system")
    bar.show()
    light_bg, _ = _image_colours(bar.grab().toImage())
    theme.apply_theme(app, "dark")
    dark_bg, _ = _image_colours(bar.grab().toImage())
    assert light_bg == theme.build_palette("light").color(Role.Window) or light_bg.lightness() > 200
    assert dark_bg.lightness() < 110, dark_bg.name()
    assert _text_contrast(bar, bar.label) >= theme.MIN_CONTRAST


def test_a_message_no_longer_true_goes_away_and_errors_stay(app: QApplication, qtbot: Any) -> None:
    """ "vLLM could not start" leaves once withdrawn (the server started, another model was picked);
    another error stays until closed; an info message leaves by itself."""
    from vrag_desktop.qt.infra.errors import error_sink
    from vrag_desktop.qt.notifications import NotificationBar
    from vrag_desktop.qt.runtime.server_text import NOT_SERVING_TITLES

    bar = NotificationBar()
    qtbot.addWidget(bar)
    bar.show_message("error", "vLLM could not start", "port 8000 is in use")
    error_sink().withdraw("Could not save settings")  # another message's: this one stays
    assert not bar.isHidden()
    error_sink().withdraw(*NOT_SERVING_TITLES)
    assert bar.isHidden()
    bar.show_message("error", "Could not save settings", "Read-only file system")
    error_sink().withdraw(*NOT_SERVING_TITLES)
    qtbot.wait(50)
    assert not bar.isHidden() and not bar._timer.isActive()  # an error waits for the person
    bar.INFO_MS = 50
    bar.show_message("info", "Indexed", "12 files")
    qtbot.waitUntil(bar.isHidden, timeout=2_000)


def test_no_qt_module_names_a_colour_of_its_own() -> None:
    """A colour written in a module is the same in both themes (the pre-flight box stayed bright
    yellow on the dark theme): every colour comes from the theme module."""
    import io
    import re
    import tokenize
    from pathlib import Path

    import vrag_desktop.qt as qt_package

    hex_colour = re.compile(r"#[0-9a-fA-F]{3}(?:[0-9a-fA-F]{3})?(?:[0-9a-fA-F]{2})?(?![\w-])")
    named = re.compile(r"\b(?:color|background)\s*:\s*(?:white|black|red|green|blue|yellow|orange)\b")
    root = Path(qt_package.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).as_posix() == "infra/theme.py":
            continue
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
        for tok in tokens:
            if tok.type == tokenize.STRING and (hex_colour.search(tok.string) or named.search(tok.string)):
                found.append(f"{path.relative_to(root)}:{tok.start[0]}: {tok.string[:60]}")
    assert not found, "colours outside the theme:\n" + "\n".join(found)
