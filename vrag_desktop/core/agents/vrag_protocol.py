"""The VRAG protocol as pure functions: prompt, tag parsing, bbox validation, image sizing, crop math.

Why a separate module: these are the interface the released VRAG model was trained on (prompt bytes,
``<think>/<search>/<bbox>/<answer>`` tags, the ≤401,408-px frame its coordinates refer to, the 56-px
raw padding). Keeping them free of I/O (only PIL) makes every rule unit-testable pixel by pixel and
lets the agent loop (:mod:`vrag_desktop.core.agents.vrag`) stay about control flow.

Coordinates: a box the model writes is in the frame of the **last image it was shown** (the resized
copy). :class:`View` tracks that frame plus where its raw pixels sit on the page, so nested zooms
compose and every crop can be drawn on the page's raw image.
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from vrag_desktop.core import images
from vrag_desktop.core.agents import imaging

# ---------------------------------------------------------------- constants (reference §3)

#: The VRAG prompt, byte-identical to the training copies (no trailing newline); ``{question}`` is
#: substituted by :func:`build_prompt`. "as your want" is in the original and stays.
VRAG_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time "
    "you get new information. After reasoning, if you find you lack some knowledge, you can call a search "
    "engine by <search> query </search> and user will return the searched results. Every time you retrieve "
    "an image, you have the option to crop it to obtain a clearer view, the format for coordinates is "
    "<bbox>[x1, y1, x2, y2]</bbox>. You can search as many times as your want. If you find no further "
    "external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without "
    "detailed illustrations. For example, <answer> Beijing </answer>. Question: {question}"
)

MAX_PIXELS = 512 * 28 * 28  # 401,408
MIN_PIXELS = 256 * 28 * 28  # 200,704
CROP_PAD = 56  # raw pixels added on each side of a crop (demo behaviour)
#: A box may overshoot the shown image by this fraction of its side and is clamped; beyond, rejected.
BBOX_TOLERANCE = 0.05

#: Appended to the user message once the steps are spent (reference wording).
ANSWER_NOW = "please answer the question now with answer in <answer> ... </answer>"
#: The original's graceful answer when the model never answers.
FALLBACK_ANSWER = "Sorry, I can not retrieval something about the question."

ACTIONS = ("search", "bbox", "answer")

_FORMAT_REMINDER = (
    "You must conduct reasoning inside <think> and </think> first, then do exactly one of: call the search "
    "engine by <search> query </search>, crop the last image by <bbox>[x1, y1, x2, y2]</bbox>, or give the "
    "answer inside <answer> and </answer>."
)


def build_prompt(question: str, trailing_newline: bool = True) -> str:
    """The single user turn. The demo sends one trailing ``\\n`` after the question (default);
    the training data has none (``trailing_newline=False``). ``str.replace``, not ``format``, so
    braces in a question are kept verbatim."""
    text = VRAG_PROMPT.replace("{question}", question)
    return text + "\n" if trailing_newline else text


def invalid_action_message(problem: str) -> str:
    """Corrective user turn, modelled on the training rollout's "Your previous action is invalid. …
    Please try again." (the exact upstream wording is not pinned; the shape is)."""
    problem = problem.strip()
    if problem and not problem.endswith("."):
        problem += "."
    return f"Your previous action is invalid. {problem} {_FORMAT_REMINDER} Please try again."


# ---------------------------------------------------------------- tag parsing


@dataclass(frozen=True)
class Turn:
    """One model reply, parsed. ``action`` is None when nothing usable was found (then ``problems``
    says why, in words fit to send back to the model). Non-fatal oddities (a second action) are in
    ``problems`` while ``action`` is still set: the first action is the one carried out, as in the
    original demo and the RL rollout."""

    think: str | None
    action: str | None  # "search" | "bbox" | "answer" | None
    argument: str
    problems: tuple[str, ...] = ()
    actions_found: tuple[str, ...] = field(default=(), compare=False)


_THINK_OPEN = re.compile(r"<\s*think\s*>", re.I)
_THINK_CLOSE = re.compile(r"<\s*/\s*think\s*>", re.I)
_ACTION_OPEN = re.compile(r"<\s*(search|bbox|answer)\s*>", re.I)
_CLOSE = {name: re.compile(rf"<\s*/\s*{name}\s*>", re.I) for name in ACTIONS}


def _split_think(text: str) -> tuple[str | None, str]:
    """(thought, text outside it). Tolerates a missing ``<think>`` (a bare ``</think>`` closes what
    came before, as templates that pre-open the think block produce) and an unclosed one (the
    thought runs to the first action tag)."""
    o = _THINK_OPEN.search(text)
    c = _THINK_CLOSE.search(text, o.end() if o else 0)
    if o and c:
        return text[o.end() : c.start()].strip(), text[: o.start()] + " " + text[c.end() :]
    if c and not o:
        return text[: c.start()].strip(), text[c.end() :]
    if o:
        a = _ACTION_OPEN.search(text, o.end())
        end = a.start() if a else len(text)
        return text[o.end() : end].strip(), text[: o.start()] + " " + text[end:]
    return None, text


def parse_turn(text: str) -> Turn:
    """Parse a reply: thought = first ``<think>…</think>``; action = first of ``<search>``,
    ``<bbox>``, ``<answer>`` outside the thought. Tag names are case-insensitive and may carry
    spaces (``< /answer >``); an action left unclosed at the very end of the text is accepted (a
    stop sequence or token limit often eats the closing tag)."""
    think, rest = _split_think(text)
    found, problems = _scan_actions(rest)
    if not found and think and _ACTION_OPEN.search(think):
        found, problems = _scan_actions(think)  # the whole reply was written inside <think>
        if found:
            problems.append("the action was written inside <think>; put it after </think>")
    names = tuple(n for n, _ in found)
    if not found:
        if not problems:
            problems.append("no action tag was found: the reply has no <search>, <bbox> or <answer>")
        return Turn(think, None, "", tuple(problems), names)
    name, arg = found[0]
    if len(found) > 1:
        listed = ", ".join(f"<{n}>" for n in names)
        problems.append(
            f"the reply has {len(found)} actions ({listed}); only the first, <{name}>, is used: "
            "give exactly one action per turn"
        )
    if not arg:
        what = {"search": "query", "bbox": "coordinates", "answer": "answer"}[name]
        problems.insert(0, f"the <{name}> tag is empty: put the {what} between <{name}> and </{name}>")
        return Turn(think, None, "", tuple(problems), names)
    return Turn(think, name, arg, tuple(problems), names)


def _scan_actions(rest: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Every action tag in order, as (name, stripped argument), plus problems (unclosed tags)."""
    found: list[tuple[str, str]] = []
    problems: list[str] = []
    pos = 0
    while True:
        m = _ACTION_OPEN.search(rest, pos)
        if not m:
            break
        name = m.group(1).lower()
        close = _CLOSE[name].search(rest, m.end())
        nxt = _ACTION_OPEN.search(rest, m.end())
        if close and (nxt is None or close.start() <= nxt.start()):
            found.append((name, rest[m.end() : close.start()].strip()))
            pos = close.end()
        elif nxt is None:  # unclosed, runs to the end of the text: tolerated
            found.append((name, rest[m.end() :].strip()))
            break
        else:
            problems.append(f"the <{name}> tag is not closed with </{name}>")
            pos = nxt.start()
    return found, problems


class ThinkSplitter:
    """Pulls the text inside ``<think>…</think>`` out of a streamed reply whose tags may be split
    across chunks (a partial ``<thi`` at a chunk's end is held back until the next chunk decides
    it), so a UI can show the reasoning live. ``feed`` returns the new thought text."""

    _HOLD = 16

    def __init__(self) -> None:
        self.buf = ""
        self.inside = False

    def feed(self, text: str) -> str:
        self.buf += text
        out: list[str] = []
        while True:
            pattern = _THINK_CLOSE if self.inside else _THINK_OPEN
            m = pattern.search(self.buf)
            if m:
                if self.inside:
                    out.append(self.buf[: m.start()])
                self.buf = self.buf[m.end() :]
                self.inside = not self.inside
                continue
            i = self.buf.rfind("<")
            keep = i >= 0 and ">" not in self.buf[i:] and len(self.buf) - i < self._HOLD
            if self.inside:
                out.append(self.buf[:i] if keep else self.buf)
            self.buf = self.buf[i:] if keep else ""
            return "".join(out)

    def flush(self) -> str:
        rest, self.buf = (self.buf if self.inside else ""), ""
        return rest


# ---------------------------------------------------------------- bbox


class BBoxError(ValueError):
    """A bbox the model wrote cannot be used; the message says how to fix it (it is sent back)."""


_NUMBER_SPLIT = re.compile(r"[,\s;]+")


def _bbox_values(text: str) -> list[object]:
    s = text.strip().strip("`").strip()
    try:
        value: object = json.loads(s)
    except ValueError:
        inner = s.strip("[]() \t\n")
        value = [t for t in _NUMBER_SPLIT.split(inner) if t]
    # Qwen2.5-VL's grounding habits: [[x1, y1, x2, y2]] or [{"bbox_2d": [...]}]
    if isinstance(value, dict) and "bbox_2d" in value:
        value = value["bbox_2d"]
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict | list):
        value = value[0]
        if isinstance(value, dict) and "bbox_2d" in value:
            value = value["bbox_2d"]
    if not isinstance(value, list):
        raise BBoxError(f"the bbox '{text.strip()}' is not a list of 4 numbers like [x1, y1, x2, y2]")
    return value


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def parse_bbox(text: str, shown_size: tuple[int, int]) -> tuple[float, float, float, float]:
    """A box in pixels of the shown image (``shown_size`` = (w, h)), validated and clamped.

    Accepts JSON ``[x1, y1, x2, y2]`` and plain lists ``x1, y1, x2, y2``. Requires exactly 4 finite
    non-negative numbers with x2 > x1 and y2 > y1 (no zero area), inside the image; a box that
    overshoots the right/bottom edge by ≤5 % of the side is clamped to it. Raises :class:`BBoxError`
    with a message the model can act on."""
    w, h = shown_size
    values = _bbox_values(text)
    nums: list[float] = []
    bad: list[object] = []
    for v in values:
        try:
            if isinstance(v, bool | list | dict) or v is None:
                raise TypeError
            f = float(v)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            bad.append(v)
            continue
        if not math.isfinite(f):
            raise BBoxError(f"'{v}' in the bbox is not a finite number")
        nums.append(f)
    if bad and not nums:
        raise BBoxError(
            f"the bbox '{text.strip()[:80]}' contains no numbers; write 4 pixel coordinates like "
            "[x1, y1, x2, y2]"
        )
    if bad:
        raise BBoxError(f"'{bad[0]}' in the bbox is not a number; write 4 numbers like [x1, y1, x2, y2]")
    if len(nums) != 4:
        raise BBoxError(
            f"the bbox has {len(nums)} number{'s' if len(nums) != 1 else ''}; it needs exactly 4: "
            "[x1, y1, x2, y2] (top-left and bottom-right corners)"
        )
    x1, y1, x2, y2 = nums
    if min(nums) < 0:
        raise BBoxError(
            f"coordinates must be non-negative pixels; [{', '.join(map(_fmt, nums))}] has {_fmt(min(nums))}"
        )
    if x2 <= x1:
        raise BBoxError(f"x2 ({_fmt(x2)}) must be greater than x1 ({_fmt(x1)}): the box has no width")
    if y2 <= y1:
        raise BBoxError(f"y2 ({_fmt(y2)}) must be greater than y1 ({_fmt(y1)}): the box has no height")
    frame = f"the last image is {w}x{h} pixels, so x must be within 0..{w} and y within 0..{h}"
    if x2 <= 1 and y2 <= 1 and w > 2 and h > 2:
        raise BBoxError(
            f"the box [{', '.join(map(_fmt, nums))}] looks normalised to 0..1; use absolute pixels: {frame}"
        )
    if x1 >= w or y1 >= h or x2 > w * (1 + BBOX_TOLERANCE) or y2 > h * (1 + BBOX_TOLERANCE):
        raise BBoxError(f"the box [{', '.join(map(_fmt, nums))}] lies outside the image: {frame}")
    return x1, y1, min(x2, float(w)), min(y2, float(h))


# ---------------------------------------------------------------- sizing, encoding


def fit_pixels(
    w: int, h: int, min_pixels: int = MIN_PIXELS, max_pixels: int = MAX_PIXELS, *, snap: int | None = None
) -> tuple[int, int]:
    """Size the model sees: above ``max_pixels`` scale down by √(max/(w·h)), below ``min_pixels``
    scale up by √(min/(w·h)), else unchanged (reference §3.3). Down-scaling floors and up-scaling
    ceils so the result is guaranteed inside the bounds (the original's ``int()`` could land a few
    pixels under the minimum); sides are never 0.

    ``snap=28`` additionally rounds both sides to multiples of 28 within the bounds, as Qwen2.5-VL's
    processor (``smart_resize``) does server-side: then the frame the model's coordinates refer to is
    exactly the image we sent. Off by default (the reference does not snap)."""
    if w <= 0 or h <= 0:
        raise ValueError(f"image size must be positive, got {w}x{h}")
    area = w * h
    if area > max_pixels:
        s = math.sqrt(max_pixels / area)
        nw, nh = max(1, math.floor(w * s + 1e-9)), max(1, math.floor(h * s + 1e-9))
        while nw * nh > max_pixels:  # float edge cases
            nw, nh = (nw - 1, nh) if nw >= nh else (nw, nh - 1)
    elif area < min_pixels:
        s = math.sqrt(min_pixels / area)
        nw, nh = max(1, math.ceil(w * s - 1e-9)), max(1, math.ceil(h * s - 1e-9))  # no float-noise pixel
    else:
        nw, nh = w, h
    if snap:
        nw, nh = _snap(nw, nh, snap, min_pixels, max_pixels)
    return nw, nh


def _snap(w: int, h: int, f: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen2-VL ``smart_resize``: nearest multiples of ``f``, then back inside the pixel bounds."""
    nw, nh = max(f, round(w / f) * f), max(f, round(h / f) * f)
    if nw * nh > max_pixels:
        beta = math.sqrt(w * h / max_pixels)
        nw, nh = max(f, math.floor(w / beta / f) * f), max(f, math.floor(h / beta / f) * f)
    elif nw * nh < min_pixels:
        beta = math.sqrt(min_pixels / (w * h))
        nw, nh = math.ceil(w * beta / f) * f, math.ceil(h * beta / f) * f
    return nw, nh


def resize_for_model(
    img: Image.Image, min_pixels: int = MIN_PIXELS, max_pixels: int = MAX_PIXELS, *, snap: int | None = None
) -> Image.Image:
    """RGB at :func:`fit_pixels` size (what the model is shown); ``img`` itself when it already is."""
    img = img if img.mode == "RGB" else img.convert("RGB")
    size = fit_pixels(img.width, img.height, min_pixels, max_pixels, snap=snap)
    return img if size == img.size else imaging.resize(img, size, Image.Resampling.BICUBIC)


def open_for_pixels(source: str | Path | bytes, max_pixels: int) -> tuple[Image.Image, tuple[int, int]]:
    """(RGB image of at least ``max_pixels`` area where possible, full size of the source).

    JPEGs are decoded at the largest 1/2, 1/4 or 1/8 scale that still covers ``max_pixels`` (libjpeg
    draft mode): a 2000×2800 page meant for a 400k-pixel view decodes ~4× faster. The caller resizes
    exactly; full-resolution work (crops) opens the file normally. The last few decodes are kept
    (:func:`.imaging.decoded`): a page a search showed is decoded again, at the same scale, when its
    memory is re-encoded, and the same pages come back across runs. Treat the result as read-only.
    """
    im = Image.open(io.BytesIO(source) if isinstance(source, bytes) else source)
    with im:
        turn, full = _draft(im, max_pixels)
        return imaging.decoded(source, im, lambda: (images.upright(imaging.rgb(im), turn), full))


def decoded_size(source: str | Path, max_pixels: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(size of :func:`open_for_pixels`' image, full size), from the header alone: what a decode
    would give, known before paying for it."""
    with Image.open(source) as im:
        turn, full = _draft(im, max_pixels)
        w, h = im.size
        return ((h, w) if _swaps(turn) else (w, h)), full


def _swaps(turn: int) -> bool:
    return turn in (5, 6, 7, 8)


def _draft(im: Image.Image, max_pixels: int) -> tuple[int, tuple[int, int]]:
    """Set ``im``'s JPEG draft scale for ``max_pixels``; (EXIF turn, upright full size)."""
    turn = images.orientation(im)
    w, h = im.size
    full = (h, w) if _swaps(turn) else (w, h)  # the model sees, and crops, the upright picture
    if w * h > max_pixels > 0:
        s = (max_pixels / (w * h)) ** 0.5
        im.draft("RGB", (max(1, math.ceil(w * s)), max(1, math.ceil(h * s))))
    return turn, full


def jpeg_bytes(img: Image.Image, quality: int = 90) -> bytes:
    """The JPEG the model is sent; the agent writes the same bytes to disk, so saved runs show
    exactly what the model saw."""
    buf = io.BytesIO()
    (img if img.mode == "RGB" else img.convert("RGB")).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def data_uri(jpeg: bytes) -> str:
    """``data:image/jpeg;base64,…`` with its subtype (the original's ``data:image;base64`` lacked it)."""
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


def encode_image(img: Image.Image, quality: int = 90) -> str:
    """JPEG data URI of an image (see :func:`data_uri`)."""
    return data_uri(jpeg_bytes(img, quality))


# ---------------------------------------------------------------- crop math

Region = tuple[int, int, int, int]


def crop_region(
    box_in_shown: tuple[float, float, float, float],
    shown_size: tuple[int, int],
    raw_size: tuple[int, int],
    pad: int = CROP_PAD,
) -> Region:
    """Raw-pixel crop for a box in the shown frame: x scaled by raw_w/shown_w, y by raw_h/shown_h,
    ``pad`` raw pixels added on each side, clamped to the raw image. The start is floored and the
    end ceiled (never lose a pixel the model asked for); the region is at least 1 px each way."""
    x1, y1, x2, y2 = box_in_shown
    sw, sh = shown_size
    rw, rh = raw_size
    fx, fy = rw / sw, rh / sh
    left = max(0, min(rw - 1, math.floor(x1 * fx - pad)))
    top = max(0, min(rh - 1, math.floor(y1 * fy - pad)))
    right = min(rw, max(left + 1, math.ceil(x2 * fx + pad)))
    bottom = min(rh, max(top + 1, math.ceil(y2 * fy + pad)))
    return left, top, right, bottom


@dataclass(frozen=True)
class View:
    """The last image shown to the model: its shown size, the size of the raw pixels behind it, and
    where those raw pixels sit on the page (``origin``, page raw pixels). A page shown after a search
    has origin (0, 0) and raw = the page; a crop's raw is the un-resized crop of the page, so nested
    zooms are pure translations and compose exactly."""

    shown_size: tuple[int, int]
    raw_size: tuple[int, int]
    origin: tuple[int, int] = (0, 0)

    def zoom(
        self,
        box_in_shown: tuple[float, float, float, float],
        pad: int = CROP_PAD,
        min_pixels: int = MIN_PIXELS,
        max_pixels: int = MAX_PIXELS,
        *,
        snap: int | None = None,
    ) -> tuple[Region, View]:
        """(region in the **page's** raw pixels, the view of the crop once shown)."""
        x1, y1, x2, y2 = crop_region(box_in_shown, self.shown_size, self.raw_size, pad)
        ox, oy = self.origin
        region = (ox + x1, oy + y1, ox + x2, oy + y2)
        cw, ch = x2 - x1, y2 - y1
        return region, View(
            fit_pixels(cw, ch, min_pixels, max_pixels, snap=snap), (cw, ch), (region[0], region[1])
        )


__all__ = [
    "ACTIONS",
    "ANSWER_NOW",
    "BBOX_TOLERANCE",
    "CROP_PAD",
    "FALLBACK_ANSWER",
    "MAX_PIXELS",
    "MIN_PIXELS",
    "VRAG_PROMPT",
    "BBoxError",
    "Region",
    "ThinkSplitter",
    "Turn",
    "View",
    "build_prompt",
    "crop_region",
    "data_uri",
    "decoded_size",
    "encode_image",
    "fit_pixels",
    "invalid_action_message",
    "jpeg_bytes",
    "parse_bbox",
    "parse_turn",
    "resize_for_model",
]
