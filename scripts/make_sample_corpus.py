#!/usr/bin/env python3
"""Generate the small sample corpus that ships with VRAG Desktop (resources/sample_corpus/).

Everything in the corpus is fictional ("Northwind Robotics", the "Valmora Range", ...) and is
produced by this script, deterministically (fixed seeds, fixed PDF dates and IDs): running it again
overwrites the files with the same content. The corpus exercises every input type the app indexes:

* PDFs with a real text layer (one topic per page, with drawn tables, charts and a diagram),
* a "scanned" PDF whose pages are images only (readable through OCR alone),
* PNG / JPEG / WEBP images with large burned-in text,
* a short MP4 video made of title-card scenes,
* Markdown and plain-text notes,

plus ``questions.json``: questions a user might ask, each answerable from exactly one page or file,
and ``train.json`` / ``val.json``: the same questions split for training, with short reference answers.

Usage::

    python scripts/make_sample_corpus.py            # writes resources/sample_corpus/
    python scripts/make_sample_corpus.py --out DIR  # somewhere else
    python scripts/make_sample_corpus.py --check    # only verify an existing corpus
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
from pathlib import Path

import cv2
import numpy as np
import pymupdf
from PIL import Image, ImageDraw, ImageFilter, ImageFont

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "resources" / "sample_corpus"

FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
FIXED_PDF_DATE = "D:20250301120000Z"

# Relative paths of everything the script writes (also used by --check and the README).
REPORT_PDF = "pdf/northwind_annual_report_2024.pdf"
GUIDE_PDF = "pdf/field_guide_alpine_plants.pdf"
MEMO_PDF = "pdf/scanned_memo.pdf"
CHART_PNG = "images/monthly_active_robots_2024.png"
LIGHTHOUSE_JPG = "images/harbor_lighthouse.jpg"
WHITEBOARD_WEBP = "images/whiteboard_sprint14.webp"
SITE_MAP_PNG = "images/osaka_plant_site_map.png"
VIDEO_MP4 = "video/lab_tour.mp4"
MEETING_MD = "notes/kestrel_batteries_meeting.md"
RECIPE_TXT = "notes/team_breakfast_pancakes.txt"
QUESTIONS_JSON = "questions.json"
TRAIN_JSON = "train.json"
VAL_JSON = "val.json"
README_MD = "README.md"

PAGE_W, PAGE_H = 595, 842  # A4 in points (annual report, memo)
MARGIN = 56
A5_W, A5_H, A5_MARGIN = 420, 595, 40  # pocket field guide


# --------------------------------------------------------------------------------------------
# Fonts (PIL)
# --------------------------------------------------------------------------------------------


def font(name: str, size: int) -> ImageFont.FreeTypeFont:
    """A DejaVu font by file stem (e.g. "DejaVuSans-Bold"); fails loudly if it is missing."""
    path = FONT_DIR / f"{name}.ttf"
    if not path.exists():
        raise SystemExit(f"font not found: {path} (install the DejaVu fonts)")
    return ImageFont.truetype(str(path), size)


def fit_font(name: str, text: str, max_width: float, start: int, minimum: int):
    """The largest size <= start (and >= minimum) at which text fits in max_width pixels."""
    size = start
    while size > minimum and font(name, size).getlength(text) > max_width:
        size -= 1
    return font(name, size)


def wrap(text: str, fnt: ImageFont.FreeTypeFont, max_width: float) -> list[str]:
    """Greedy word wrap measured with the real font."""
    lines: list[str] = []
    for para in text.split("\n"):
        words, line = para.split(), ""
        if not words:
            lines.append("")
            continue
        for word in words:
            trial = f"{line} {word}".strip()
            if fnt.getlength(trial) <= max_width or not line:
                line = trial
            else:
                lines.append(line)
                line = word
        lines.append(line)
    return lines


# --------------------------------------------------------------------------------------------
# PDF helpers (text layer via the Base-14 fonts: Latin-1 text only, so plain ASCII dashes)
# --------------------------------------------------------------------------------------------

NAVY = (0.11, 0.20, 0.38)
GREY = (0.40, 0.40, 0.40)
BLACK = (0, 0, 0)
GREEN = (0.16, 0.36, 0.22)


class PdfWriter:
    """Minimal flowing-layout helper on top of pymupdf's insert_textbox."""

    def __init__(
        self,
        body_font: str,
        bold_font: str,
        accent,
        running_title: str,
        *,
        size: tuple[float, float] = (PAGE_W, PAGE_H),
        margin: float = MARGIN,
    ):
        self.doc = pymupdf.open()
        (self.pw, self.ph), self.m = size, margin
        self.heading_size = 19 if self.pw > 500 else 15
        self.body_font, self.bold_font = body_font, bold_font
        self.accent, self.running_title = accent, running_title
        self.page: pymupdf.Page | None = None
        self.y = 0.0

    def new_page(self, heading: str) -> pymupdf.Page:
        page = self.doc.new_page(width=self.pw, height=self.ph)
        page.draw_rect(pymupdf.Rect(0, 0, self.pw, 10), color=None, fill=self.accent)
        page.insert_text((self.m, 36), self.running_title, fontsize=8.5, fontname=self.body_font, color=GREY)
        n = page.number + 1
        page.insert_text(
            (self.pw - self.m - 30, self.ph - 24),
            f"Page {n}",
            fontsize=8.5,
            fontname=self.body_font,
            color=GREY,
        )
        self.page, self.y = page, 50.0
        if heading:
            self.heading(heading)
        return page

    def heading(self, text: str, size: float | None = None) -> None:
        self.text(text, size=size or self.heading_size, bold=True, color=self.accent, gap=2)
        self.page.draw_line((self.m, self.y), (self.pw - self.m, self.y), color=self.accent, width=0.8)
        self.y += 10

    def text(
        self,
        text: str,
        *,
        size: float = 10.5,
        bold: bool = False,
        color=BLACK,
        gap: float = 7,
        indent: float = 0,
        lh: float = 1.32,
        align: int = 0,
        bottom: float | None = None,
    ) -> float:
        """Insert a paragraph at the cursor; returns the height used. Raises on overflow."""
        bottom = bottom or self.ph - 44
        rect = pymupdf.Rect(self.m + indent, self.y, self.pw - self.m, bottom)
        rc = self.page.insert_textbox(
            rect,
            text,
            fontsize=size,
            lineheight=lh,
            align=align,
            fontname=self.bold_font if bold else self.body_font,
            color=color,
        )
        if rc < 0:
            raise RuntimeError(f"text overflow on page {self.page.number + 1}: {text[:50]!r}")
        used = rect.height - rc
        self.y += used + gap
        return used

    def paragraphs(self, paras: list[str], **kw) -> None:
        for p in paras:
            self.text(p, **kw)

    def bullets(self, items: list[str], **kw) -> None:
        for item in items:
            self.page.insert_text((self.m + 4, self.y + 11.3), "-", fontsize=10.5, fontname=self.body_font)
            self.text(item, indent=14, gap=3, **kw)
        self.y += 4

    def table(
        self,
        rows: list[list[str]],
        col_x: list[float],
        *,
        size: float = 9.5,
        right_align_from: int = 1,
        row_h: float = 16,
    ) -> None:
        """Draw a simple ruled table as real text; the first row is the header."""
        page = self.page
        right_edge = self.pw - self.m
        page.draw_line((self.m, self.y), (right_edge, self.y), color=self.accent, width=0.9)
        for r, row in enumerate(rows):
            base = self.y + row_h - 4.5
            fname = (
                self.bold_font
                if r in (0, len(rows) - 1) and row[0] in (rows[0][0], "Total")
                else self.body_font
            )
            for c, cell in enumerate(row):
                if c >= right_align_from:
                    # right-align numbers on the column's right edge
                    col_right = col_x[c + 1] - 8 if c + 1 < len(col_x) else right_edge
                    w = pymupdf.get_text_length(cell, fontname=fname, fontsize=size)
                    page.insert_text((col_right - w, base), cell, fontsize=size, fontname=fname)
                else:
                    page.insert_text((col_x[c], base), cell, fontsize=size, fontname=fname)
            self.y += row_h
            width = 0.9 if r in (0, len(rows) - 2) else 0.3
            page.draw_line(
                (self.m, self.y),
                (right_edge, self.y),
                color=self.accent if width > 0.5 else GREY,
                width=width,
            )
        self.y += 10

    def save(self, path: Path, title: str, subject: str, author: str) -> None:
        self.doc.set_metadata(
            {
                "title": title,
                "subject": subject,
                "author": author,
                "creator": "scripts/make_sample_corpus.py",
                "producer": "PyMuPDF",
                "keywords": "VRAG Desktop sample corpus, fictional",
                "creationDate": FIXED_PDF_DATE,
                "modDate": FIXED_PDF_DATE,
            }
        )
        save_pdf(self.doc, path)


def save_pdf(doc: pymupdf.Document, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(str(path), garbage=4, deflate=True, no_new_id=True)
    doc.close()


# --------------------------------------------------------------------------------------------
# 1. Northwind Robotics annual report (8 pages, text layer, drawn table + bar chart)
# --------------------------------------------------------------------------------------------

REGIONS = [  # region, 2023, 2024 (USD millions)
    ("North America", 151.0, 168.4),
    ("Europe", 104.3, 121.7),
    ("Asia-Pacific", 77.8, 94.2),
    ("Latin America", 24.6, 27.9),
]


def draw_region_bar_chart(page: pymupdf.Page, top: float) -> float:
    """Vertical bar chart (2023 vs 2024) drawn with vector shapes; returns its bottom y."""
    left, right, height = MARGIN + 40, PAGE_W - MARGIN - 10, 170
    base = top + 24 + height
    page.insert_text(
        (MARGIN, top + 10),
        "Figure 1. Revenue by region, 2023 and 2024 (USD millions)",
        fontsize=9.5,
        fontname="hebo",
        color=NAVY,
    )
    vmax = 180.0
    for tick in range(0, 181, 60):  # gridlines + axis labels
        y = base - height * tick / vmax
        page.draw_line((left, y), (right, y), color=(0.82, 0.82, 0.82), width=0.4)
        label = f"{tick}"
        w = pymupdf.get_text_length(label, fontsize=8)
        page.insert_text((left - 6 - w, y + 3), label, fontsize=8, color=GREY)
    page.draw_line((left, base), (right, base), color=BLACK, width=0.8)
    page.draw_line((left, base), (left, base - height), color=BLACK, width=0.8)
    group_w = (right - left) / len(REGIONS)
    bar_w = group_w * 0.28
    c23, c24 = (0.62, 0.70, 0.82), NAVY
    for i, (name, v23, v24) in enumerate(REGIONS):
        gx = left + i * group_w + group_w * 0.18
        for j, (val, col) in enumerate(((v23, c23), (v24, c24))):
            x0 = gx + j * (bar_w + 4)
            y0 = base - height * val / vmax
            page.draw_rect(pymupdf.Rect(x0, y0, x0 + bar_w, base), color=None, fill=col)
            lab = f"{val:.1f}"
            w = pymupdf.get_text_length(lab, fontsize=7.5)
            page.insert_text((x0 + (bar_w - w) / 2, y0 - 3), lab, fontsize=7.5)
        w = pymupdf.get_text_length(name, fontsize=8.5)
        page.insert_text((gx + bar_w + 2 - w / 2, base + 13), name, fontsize=8.5)
    # legend
    lx, ly = right - 120, top + 22
    for k, (lab, col) in enumerate((("2023", c23), ("2024", c24))):
        page.draw_rect(pymupdf.Rect(lx + k * 55, ly, lx + k * 55 + 9, ly + 9), color=None, fill=col)
        page.insert_text((lx + k * 55 + 13, ly + 8), lab, fontsize=8.5)
    return base + 22


def make_annual_report(path: Path) -> None:
    w = PdfWriter("helv", "hebo", NAVY, "Northwind Robotics  |  Annual Report 2024")

    # --- Page 1: cover + letter to shareholders
    page = w.new_page("")
    page.draw_rect(pymupdf.Rect(MARGIN, 60, PAGE_W - MARGIN, 190), color=None, fill=NAVY)
    page.insert_text((MARGIN + 22, 110), "Northwind Robotics", fontsize=30, fontname="hebo", color=(1, 1, 1))
    page.insert_text((MARGIN + 22, 142), "Annual Report 2024", fontsize=18, fontname="helv", color=(1, 1, 1))
    page.insert_text(
        (MARGIN + 22, 170),
        "Autonomous machines for warehouses, ports and factories",
        fontsize=10.5,
        fontname="helv",
        color=(0.85, 0.88, 0.95),
    )
    w.y = 210
    w.heading("Letter to our shareholders", size=16)
    w.paragraphs(
        [
            "Dear shareholders,",
            "2024 was the year Northwind Robotics grew from a promising robot maker into a dependable "
            "partner for some of the busiest warehouses in the world. Our fleet of autonomous "
            "machines now moves pallets, parcels and spare parts for 214 customers in 19 countries, "
            "and for the first time more than half of our new orders came from customers who were "
            "already using our robots and decided to buy more.",
            "When Koji Tanabe and I founded the company in a rented garage in Denver in 2011, we had "
            "one prototype, two borrowed laptops and a simple belief: robots should work safely next "
            "to people instead of behind fences. Thirteen years later that belief still guides every "
            "design decision we make.",
            "Revenue rose by 15 percent, our gross margin improved to 38 percent, and we reached "
            "positive operating cash flow in the third quarter. We opened a second assembly line, "
            "welcomed hundreds of new colleagues and filed more patents than in any previous year. "
            "The following pages describe where the growth came from, how our flagship Atlas robot "
            "performed, and what we are doing to make our products safer and our factories cleaner.",
            "None of this would have been possible without our employees, our customers and you, our "
            "shareholders. Thank you for your trust and for your patience during the years when "
            "building the company mattered more than reporting a profit.",
        ]
    )
    w.text("Maren Alvarez", bold=True, gap=1)
    w.text("Chief Executive Officer and co-founder\nDenver, Colorado, 28 February 2025", color=GREY)

    # --- Page 2: revenue by region (table + bar chart)
    w.new_page("Revenue by Region")
    w.paragraphs(
        [
            "Northwind Robotics recorded total revenue of USD 412.2 million in fiscal year 2024, up "
            "from USD 357.7 million the year before. Hardware sales accounted for 71 percent of the "
            "total, while fleet software subscriptions and maintenance contracts made up the "
            "remaining 29 percent. Recurring revenue becomes more important every year, because each "
            "robot we sell usually comes with a five-year service agreement.",
            "North America remained our largest market, driven by large parcel hubs in Texas, Ohio "
            "and Ontario. Europe grew faster than expected after two grocery chains in Germany and "
            "the Netherlands switched their regional distribution centres to our robots. "
            "Asia-Pacific was the fastest-growing region at 21.1 percent, helped by a frame agreement "
            "with a Japanese electronics distributor. Latin America is still small, but our "
            "installed base in Mexico and Chile doubled during the year.",
        ]
    )
    rows = [["Region", "2023 (USD m)", "2024 (USD m)", "Change", "Share of 2024"]]
    for name, v23, v24 in REGIONS:
        rows.append(
            [name, f"{v23:.1f}", f"{v24:.1f}", f"+{(v24 / v23 - 1) * 100:.1f}%", f"{v24 / 412.2 * 100:.1f}%"]
        )
    rows.append(["Total", "357.7", "412.2", "+15.2%", "100%"])
    w.text("Table 1. Revenue by region", size=9.5, bold=True, color=NAVY, gap=4)
    w.table(rows, [MARGIN + 4, MARGIN + 150, MARGIN + 240, MARGIN + 330, MARGIN + 400])
    w.y = draw_region_bar_chart(w.page, w.y)
    w.paragraphs(
        [
            "Currency effects were minor: a stronger US dollar reduced reported revenue by about 0.6 "
            "percent. Services revenue was spread evenly across the year, while hardware deliveries "
            "peaked in the fourth quarter, as they usually do before the holiday shopping season.",
        ]
    )

    # --- Page 3: Atlas warehouse robot
    w.new_page("Product Line: Atlas Warehouse Robot")
    w.paragraphs(
        [
            "Atlas is our flagship autonomous mobile robot. It drives under standard pallets and "
            "shelving units, lifts them a few centimetres and carries them to packing stations, "
            "loading docks or cold rooms without any fixed tracks, magnetic tape or reflectors on "
            "the floor. Customers usually start with a pilot of ten robots and grow to fleets of "
            "several hundred, all coordinated by our Compass fleet management software.",
            "In 2024 we shipped 3,860 Atlas units, 24 percent more than in 2023. The most popular "
            "option was the cold-storage kit, which lets the robot work in freezers at minus 25 "
            "degrees. Version 3 of the robot, introduced in May, added a second battery module, a "
            "quieter drive train and automatic opportunity charging while the robot waits for work.",
        ]
    )
    w.text("Atlas technical specifications", size=11, bold=True, color=NAVY, gap=4)
    specs = [
        ["Specification", "Atlas v3"],
        ["Maximum payload", "450 kg"],
        ["Battery runtime", "14 hours on a single charge"],
        ["Charging time (10 to 90 percent)", "90 minutes"],
        ["Top speed (empty / loaded)", "2.2 m/s / 1.5 m/s"],
        ["Robot weight", "310 kg"],
        ["Dimensions (L x W x H)", "1,250 x 850 x 420 mm"],
        ["Lift height", "up to 120 mm"],
        ["Navigation", "360-degree lidar and four stereo cameras"],
        ["Operating temperature", "-10 to 40 °C (cold-storage kit: -25 °C)"],
        ["List price", "from USD 68,000"],
    ]
    w.table(specs, [MARGIN + 4, MARGIN + 220], right_align_from=99)
    w.paragraphs(
        [
            "Customers tell us that the long battery life matters more than top speed: a robot that "
            "lasts a full double shift removes the need for spare robots during charging. The "
            "payload of 450 kilograms covers about 95 percent of the pallets we see in European and "
            "North American warehouses.",
        ]
    )

    # --- Page 4: safety
    w.new_page("Safety Incidents and Certifications")
    w.paragraphs(
        [
            "Safety is the first item on the agenda of every Northwind board meeting. In 2024 our "
            "robots drove a combined 41 million kilometres at customer sites. Customers reported "
            "seven minor incidents involving Atlas robots, mostly light contact with racks or with "
            "pallets that had been left in marked driving lanes. None of them injured a person, and "
            "we recorded zero lost-time injuries among our own staff for the second year running.",
            "Every incident was analysed by our safety review board within 48 hours. The findings "
            "led to two firmware changes: a lower speed limit near blind corners and a longer "
            "warning signal before a robot reverses. Every robot carries four emergency-stop "
            "buttons and a safety-rated protective field that slows the robot when a person comes "
            "within 2 metres and stops it completely at 0.5 metres.",
            "Our total recordable incident rate for employees was 0.21 per 200,000 hours worked, "
            "compared with an industry average of 2.8.",
        ]
    )
    w.text("Certifications held at the end of 2024", size=11, bold=True, color=NAVY, gap=4)
    w.bullets(
        [
            "ISO 3691-4 (driverless industrial trucks): Atlas certified by an independent test "
            "laboratory in April 2024.",
            "UL 3100 (automated mobile platforms): awarded in September 2024, a requirement of many "
            "US retailers.",
            "CE marking under the EU Machinery Directive for all products sold in Europe.",
            "ISO 45001 occupational health and safety management at the Osaka and Denver sites.",
            "ISO 9001 quality management at all three sites.",
        ]
    )
    w.paragraphs(
        [
            "In 2025 we will publish an annual safety report with incident data for every customer "
            "site that agrees to take part, because we believe openness builds trust in robots.",
        ]
    )

    # --- Page 5: research and development
    w.new_page("Research and Development")
    w.paragraphs(
        [
            "We invested USD 58.3 million in research and development in 2024, equal to 14.1 "
            "percent of revenue. Our R&D team of 390 engineers works on three themes: energy, "
            "perception and fleet intelligence. During the year we filed 37 patent applications and "
            "were granted 22 patents.",
        ]
    )
    w.text("Battery chemistry", size=12, bold=True, color=NAVY, gap=3)
    w.paragraphs(
        [
            "Since 2023 all new robots use lithium iron phosphate (LFP) cells instead of nickel-based "
            "cells. LFP cells last more charge cycles, tolerate heat better and contain no cobalt. In "
            "2024 we started a pilot with sodium-ion cells, which are cheaper, perform better in "
            "cold warehouses and avoid lithium altogether. Early results show about 15 percent lower "
            "energy density, which we compensate with a larger battery bay in the next robot design.",
        ]
    )
    w.text("Lidar and perception", size=12, bold=True, color=NAVY, gap=3)
    w.paragraphs(
        [
            "Our own solid-state lidar sensor, Lumen-3, has no moving parts, sees objects up to 120 "
            "metres away with an angular resolution of 0.1 degrees, and costs about one third of the "
            "mechanical sensors we buy today. Series production is planned for the third quarter of "
            "2025. New camera software recognises forklift forks, hanging cables and shrink wrap "
            "lying on the floor, which used to confuse robots.",
        ]
    )
    w.text("Fleet intelligence", size=12, bold=True, color=NAVY, gap=3)
    w.paragraphs(
        [
            "Robots in the same building now share map updates within seconds, so when one robot "
            "discovers a blocked aisle, the whole fleet plans around it. Across our customers this "
            "reduced average order travel distance by 9 percent.",
        ]
    )

    # --- Page 6: sustainability
    w.new_page("Sustainability")
    w.paragraphs(
        [
            "Robots that save energy in our customers' warehouses should also be built responsibly. "
            "In 2024 we cut our combined Scope 1 and Scope 2 greenhouse gas emissions by 31 percent "
            "compared with our 2021 baseline, to 5,900 tonnes of CO2 equivalent.",
            "The biggest single step was the rooftop solar array on our Osaka factory. The 4.8 "
            "megawatt installation went live in March and now supplies 62 percent of the plant's "
            "electricity. Our Denver headquarters buys wind power through a local green tariff, and "
            "the Lisbon office runs on certified renewable electricity.",
        ]
    )
    w.text("Recycling and circular design", size=12, bold=True, color=NAVY, gap=3)
    w.bullets(
        [
            "1,140 tonnes of aluminium offcuts and scrap were recycled, most of it returned to our "
            "chassis supplier and melted into new frames.",
            "92 percent of production waste was diverted from landfill, up from 78 percent in 2022.",
            "2,300 used battery packs came back through our take-back programme; 60 percent were "
            "refurbished for second-life energy storage, the rest were sent to certified recyclers.",
            "Reusable steel shipping crates replaced single-use wooden crates and saved about 380 "
            "tonnes of timber.",
            "Water use at the Osaka plant fell 18 percent after the paint line was converted to "
            "powder coating.",
        ]
    )
    w.paragraphs(
        [
            "Next year we will start reporting Scope 3 emissions from purchased components and from "
            "the electricity our robots use at customer sites, which together are far larger than "
            "our own footprint.",
        ]
    )

    # --- Page 7: employees and offices
    w.new_page("Employees and Offices")
    w.paragraphs(
        [
            "At the end of 2024 Northwind Robotics employed 2,140 people of 46 nationalities. Women "
            "made up 34 percent of the workforce and 29 percent of engineering leadership. Voluntary "
            "employee turnover was 7.9 percent, and 64 percent of employees joined the employee "
            "share plan.",
        ]
    )
    w.table(
        [
            ["Office", "Main activities", "Employees"],
            ["Denver, USA (headquarters)", "Sales, customer support, finance, legal", "540"],
            ["Lisbon, Portugal", "Fleet software, navigation, cloud services", "620"],
            ["Osaka, Japan", "Manufacturing, hardware engineering, battery packs", "880"],
            ["Remote field service", "Installation and repairs at customer sites", "100"],
            ["Total", "", "2,140"],
        ],
        [MARGIN + 4, MARGIN + 160, MARGIN + 420],
        right_align_from=2,
    )
    w.paragraphs(
        [
            "The Lisbon team works from a renovated cork warehouse in the Marvila district and grew "
            "by 140 people, mostly software engineers. The Osaka plant, in the city of Sakai, runs "
            "two shifts and now builds up to 450 robots a month. Our Denver headquarters hosts the "
            "customer experience centre, where visitors can watch robot fleets at work.",
            "All parents, regardless of gender, receive 20 weeks of fully paid parental leave. In "
            "2024 we also introduced a four-day week pilot for the Lisbon software teams; the results "
            "will be shared with all employees in the spring.",
        ]
    )

    # --- Page 8: outlook 2025
    w.new_page("Outlook 2025")
    w.text("Financial guidance", size=12, bold=True, color=NAVY, gap=3)
    w.paragraphs(
        [
            "For 2025 we forecast revenue between USD 480 million and USD 510 million, growth of "
            "16 to 24 percent, and a gross margin of about 39 percent. Planned capital expenditure "
            "is USD 35 million, mainly for a third assembly line in Osaka and new test equipment. "
            "We do not plan to pay a dividend; cash will be reinvested in growth.",
        ]
    )
    w.text("Priorities for the year", size=12, bold=True, color=NAVY, gap=3)
    w.bullets(
        [
            "Launch Atlas Mini in the second quarter, a compact robot for retail backrooms and "
            "hospital supply rooms.",
            "Start series production of the Lumen-3 lidar sensor.",
            "Open a service hub in Monterrey, Mexico, to support customers in Latin America.",
            "Reach 40 percent of revenue from software and services by 2027.",
        ]
    )
    w.text("Risks we are watching", size=12, bold=True, color=NAVY, gap=3)
    w.paragraphs(
        [
            "New tariffs on electronic components could raise our costs by up to 3 percent if they "
            "come into force. Semiconductor supply has normalised, but we keep six months of stock "
            "for critical chips. A slowdown in warehouse construction in the United States would "
            "delay some orders, although most of our customers retrofit existing buildings rather "
            "than build new ones.",
            "We enter 2025 with a healthy order book, a stronger balance sheet and products that "
            "customers recommend to each other. We look forward to reporting our progress.",
        ]
    )
    w.save(
        path,
        "Northwind Robotics Annual Report 2024",
        "Fictional annual report (sample corpus)",
        "Northwind Robotics",
    )


# --------------------------------------------------------------------------------------------
# 2. Field guide to alpine plants (5 pages, text layer, one labelled vector diagram)
# --------------------------------------------------------------------------------------------

ZONES = [  # name, from m, to m, fill colour, description
    ("Montane forest", 1000, 1700, (0.20, 0.42, 0.24), "beech, silver fir, spruce"),
    ("Subalpine zone", 1700, 2100, (0.42, 0.60, 0.32), "larch, stone pine, dwarf shrubs"),
    ("Alpine meadows", 2100, 2600, (0.72, 0.80, 0.42), "gentians, edelweiss, grasses"),
    ("Rock and scree", 2600, 3000, (0.62, 0.60, 0.56), "saxifrages, cushion plants"),
    ("Nival zone", 3000, 3800, (0.96, 0.97, 1.00), "snow, ice, lichens"),
]


def draw_zone_diagram(w: PdfWriter, top: float) -> float:
    """A mountain split into altitude bands with an elevation axis and leader-line labels."""
    page, m = w.page, w.m
    h = 235
    base, peak_y = top + h, top + 8
    ax = m + 34  # elevation axis
    half_base = 80
    cx = ax + 12 + half_base
    lx = cx + half_base + 14  # label column
    lo, hi = 1000, 3800

    def y_of(metres):
        return base - (metres - lo) / (hi - lo) * (base - peak_y)

    def half_w(y):
        return half_base * (y - peak_y) / (base - peak_y)

    for name, m0, m1, col, desc in ZONES:
        y0, y1 = y_of(m0), y_of(m1)
        pts = [(cx - half_w(y0), y0), (cx + half_w(y0), y0), (cx + half_w(y1), y1), (cx - half_w(y1), y1)]
        page.draw_polyline([*pts, pts[0]], color=(0.3, 0.3, 0.3), fill=col, width=0.5)
        ym = (y0 + y1) / 2 + (6 if name == "Nival zone" else 0)
        page.draw_line((cx + half_w(ym) + 3, ym), (lx - 4, ym), color=GREY, width=0.5, dashes="[2] 0")
        page.insert_text((lx, ym), name, fontsize=10, fontname="tibo")
        page.insert_text((lx, ym + 10), desc, fontsize=8.5, fontname="tiro", color=GREY)
    page.draw_line((ax, base), (ax, peak_y), color=BLACK, width=0.7)
    for metres in (1000, 1700, 2100, 2600, 3000, 3800):
        y = y_of(metres)
        page.draw_line((ax - 4, y), (ax, y), color=BLACK, width=0.7)
        label = f"{metres:,} m"
        tw = pymupdf.get_text_length(label, fontname="tiro", fontsize=8)
        page.insert_text((ax - 7 - tw, y + 3), label, fontsize=8, fontname="tiro")
    ty = y_of(2100)  # tree line marker
    red = (0.6, 0.1, 0.1)
    page.draw_line(
        (cx - half_w(ty) - 6, ty), (cx + half_w(ty) + 6, ty), color=red, width=1.2, dashes="[4 2] 0"
    )
    page.insert_text((cx + half_w(ty) + 9, ty + 3), "tree line", fontsize=8.5, fontname="tiit", color=red)
    page.insert_text(
        (m, base + 17),
        "Diagram: vegetation zones of the Valmora Range by elevation",
        fontsize=9,
        fontname="tiit",
        color=GREY,
    )
    return base + 30


def make_field_guide(path: Path) -> None:
    w = PdfWriter(
        "tiro",
        "tibo",
        GREEN,
        "Field Guide to Alpine Plants of the Valmora Range",
        size=(A5_W, A5_H),
        margin=A5_MARGIN,
    )
    body = {"size": 10.5, "lh": 1.25, "gap": 5}

    w.new_page("About this Guide")
    w.paragraphs(
        [
            "This pocket guide describes the flowering plants that walkers meet most often above "
            "the forests of the Valmora Range. It is written for hikers, families and school groups "
            "rather than botanists, so we use common names first and give the scientific name in "
            "brackets. Each species entry lists the typical height, the months when it flowers, "
            "the rock or soil it prefers and a few tips for telling it apart from similar plants.",
            "The best time to see alpine flowers in the Valmora Range is from late June to mid "
            "August, when the snow has melted from the upper meadows. Early in the season look on "
            "south-facing slopes; later in summer the richest displays are found near melting snow "
            "patches and along streams.",
            "Code of conduct. Photograph flowers, do not pick them. Many alpine species are "
            "protected by law inside the Valmora Nature Park, and picking or digging up a protected "
            "plant can be fined up to 500 euros. Stay on marked trails: a cushion plant crushed by a "
            "single boot may need decades to grow back. Keep dogs on a lead during the nesting "
            "season and take all litter home, including fruit peel.",
            "This third edition was prepared by volunteers of the Valmora Alpine Club in 2023. "
            "Corrections and new sightings are welcome at the club hut in the village of San Lorin.",
        ],
        **body,
    )

    w.new_page("Edelweiss (Leontopodium nivale subsp. alpinum)")
    w.paragraphs(
        [
            "Edelweiss is the best-known flower of the mountains and the emblem of many alpine "
            "clubs. What looks like a single white flower is actually a cluster of five to fifteen "
            "small yellow flower heads, surrounded by a star of thick, woolly white bracts. Plants "
            "are usually 5 to 20 centimetres tall, with narrow grey-green leaves.",
            "The dense felt of white hairs covering the whole plant is an adaptation to a harsh "
            "life: the hairs reflect much of the strong ultraviolet light at high altitude, reduce "
            "water loss in drying winds and trap a thin layer of warmer air around the leaves.",
            "Where to look: edelweiss grows on limestone ledges, stony grassland and steep rocky "
            "slopes between about 1,800 and 3,000 metres. In the Valmora Range the best-known "
            "colony grows below the Cresta Bianca ridge. It flowers from July to September.",
            "In the nineteenth century young men climbed dangerous cliffs to bring edelweiss back "
            "to their sweethearts as proof of courage, and several died in the attempt. Heavy "
            "picking made the plant rare in easily reached places, and it is now strictly "
            "protected. Garden centres sell cultivated plants that grow taller and greener in "
            "lowland gardens.",
            "Similar species: mountain everlasting has pink or white papery flower heads but no "
            "woolly star of bracts.",
        ],
        **body,
    )

    w.new_page("Gentians (Gentiana)")
    w.paragraphs(
        [
            "Few colours in nature match the deep blue of a gentian. Three gentians are common in "
            "the Valmora Range.",
            "Trumpet gentian (Gentiana acaulis) has a single, very large trumpet-shaped flower, 5 to "
            "7 centimetres long, sitting almost directly on a rosette of glossy leaves. It prefers "
            "acid soils over granite and flowers from May to July.",
            "Spring gentian (Gentiana verna) is much smaller, with a flat, star-shaped flower of "
            "brilliant sky blue and five spreading petals. It is one of the first flowers to "
            "appear after the snow melts, from April to June, and grows on limestone grassland.",
            "Great yellow gentian (Gentiana lutea) looks completely different: a tall plant up to "
            "1.5 metres high with whorls of yellow flowers and broad ribbed leaves. Its thick roots "
            "are dug up under licence to make bitter liqueurs and aperitifs, and the plant can live "
            "for more than fifty years.",
            "Watch the blue gentians when a cloud covers the sun: their flowers close within a few "
            "minutes and open again when the sunshine returns. Closing protects the pollen and "
            "nectar from rain and cold, and keeps the inside of the flower warm for the bumblebees "
            "that crawl deep into the trumpet to pollinate it.",
        ],
        **body,
    )

    w.new_page("Saxifrages (Saxifraga)")
    w.paragraphs(
        [
            "The name saxifrage comes from the Latin words saxum, stone, and frangere, to break. "
            "The plants were once thought to split rocks, because their roots push deep into narrow "
            "cracks in cliffs and boulders, where little else can grow.",
            "Purple saxifrage (Saxifraga oppositifolia) forms low mats of tiny dark green leaves "
            "arranged in four rows along creeping stems. Its magenta, cup-shaped flowers open "
            "within days of the snow melting, sometimes as early as May. It is one of the toughest "
            "flowering plants on Earth: in the Swiss Alps it has been found flowering at 4,505 "
            "metres on the summit ridge of the Dom, and it also grows in the far north of Greenland.",
            "Livelong saxifrage (Saxifraga paniculata) grows as silvery rosettes on limestone. The "
            "silver rim on each leaf is made of tiny lime crusts: the plant takes in calcium with "
            "water and releases it through small pores along the leaf edge.",
            "Many saxifrages grow as cushions. On a sunny day the inside of a dense cushion can be "
            "ten degrees warmer than the surrounding air, and the cushion holds moisture like a "
            "sponge. Such cushions grow only a few millimetres a year, which is why walkers should "
            "never step on them.",
        ],
        **body,
    )

    w.new_page("Vegetation Zones of the Valmora Range")
    w.paragraphs(
        [
            "As you climb, the air cools by roughly 0.6 degrees for every 100 metres of height, and "
            "the growing season shrinks from about six months at the valley forests to only a few "
            "weeks near the permanent snow. Plants change with every step upward, forming bands "
            "that are easy to recognise from a distance.",
        ],
        **body,
    )
    w.y = draw_zone_diagram(w, w.y + 2)
    w.paragraphs(
        [
            "Above the tree line trees cannot survive the short summers and winter winds, and "
            "alpine meadows take over. Higher still, on rock and scree, only cushion plants and "
            "saxifrages cope with the cold. The nival zone begins at about 3,000 metres, where snow "
            "lies for most of the year and lichens are almost the only life.",
        ],
        **body,
    )
    w.save(
        path,
        "Field Guide to Alpine Plants of the Valmora Range",
        "Fictional field guide (sample corpus)",
        "Valmora Alpine Club",
    )


# --------------------------------------------------------------------------------------------
# 3. Scanned memo (image-only PDF: no text layer, readable by OCR only)
# --------------------------------------------------------------------------------------------

MEMO_PAGES = [
    [
        ("title", "NORTHWIND ROBOTICS - INTERNAL MEMO"),
        ("gap", ""),
        ("field", "To:        All Denver staff"),
        ("field", "From:      Priya Raman, Facilities Manager"),
        ("field", "Date:      February 10, 2025"),
        ("field", "Subject:   Our office is moving to 1200 Larimer Street"),
        ("rule", ""),
        (
            "body",
            "Our Denver office is moving. Starting Monday, March 3, the whole Denver team "
            "will work from our new offices on floors 6 and 7 of the building at 1200 "
            "Larimer Street, a short walk from Union Station.",
        ),
        (
            "body",
            "Empty blue packing crates will be delivered to every desk on Thursday, "
            "February 20. Please pack your desk before noon on Friday, February 28, and "
            "label every crate with your name and your new desk number. The movers "
            "arrive at 2 pm that day.",
        ),
        (
            "body",
            "The old office on Blake Street closes for good at 6 pm on February 28. Nobody "
            "can enter either building during the weekend of March 1 and 2.",
        ),
        (
            "body",
            "IT will move all laptops, monitors and docking stations. Please do not pack them yourself.",
        ),
        ("body", "Please turn over for answers to common questions."),
        ("body", "Thank you for your help!   - Priya"),
    ],
    [
        ("title", "DENVER OFFICE MOVE - QUESTIONS AND ANSWERS"),
        ("rule", ""),
        ("q", "Where do I park after the move?"),
        (
            "body",
            "The new building has no staff parking. Northwind pays for a monthly pass "
            "at the Larimer Square garage on 14th Street. Sign up with Facilities by "
            "February 21.",
        ),
        ("q", "Will my current badge open the new doors?"),
        (
            "body",
            "No. New badges are handed out at the reception desk on floor 6 from 8 am on "
            "March 3. Bring a photo ID.",
        ),
        ("q", "Can I cycle to work?"),
        (
            "body",
            "Yes. There is a locked bike room for 40 bikes in the basement, next to the showers and lockers.",
        ),
        ("q", "What happens to the robot demo lab?"),
        (
            "body",
            "The demo lab moves to the ground floor, with its own loading door for "
            "customer visits. It reopens on March 17.",
        ),
        ("q", "Who can I ask about the move?"),
        ("body", "Priya Raman, Facilities, phone extension 4410."),
    ],
]


# How "scanned" the memo looks. Text is large (36 px body on a 150 dpi page) with generous line
# spacing: PP-OCR's angle classifier occasionally flips a dense upright line and drops it.
MEMO_SKEW_DEG, MEMO_NOISE, MEMO_BLUR = 0.3, 5.0, 0.5
MEMO_BODY_PX, MEMO_LINE_PX = 36, 54


def render_memo_page(blocks, seed: int) -> bytes:
    """Render one memo page as a slightly noisy, slightly skewed greyscale 'scan' (JPEG bytes)."""
    wpx, hpx = 1240, 1754  # A4 at 150 dpi
    img = Image.new("L", (wpx, hpx), 250)
    d = ImageDraw.Draw(img)
    f_title = font("DejaVuSerif-Bold", MEMO_BODY_PX + 4)
    f_body = font("DejaVuSerif", MEMO_BODY_PX)
    f_field = font("DejaVuSansMono", MEMO_BODY_PX - 4)
    f_q = font("DejaVuSerif-Bold", MEMO_BODY_PX)
    x0, x1, y = 120, wpx - 120, 150
    for kind, text in blocks:
        if kind == "gap":
            y += 20
        elif kind == "rule":
            y += 12
            d.line([(x0, y), (x1, y)], fill=40, width=3)
            y += 36
        elif kind == "title":
            d.text((x0, y), text, font=f_title, fill=20)
            y += MEMO_LINE_PX + 24
        elif kind == "field":
            d.text((x0, y), text, font=f_field, fill=30)
            y += MEMO_LINE_PX
        else:
            fnt = f_q if kind == "q" else f_body
            for line in wrap(text, fnt, x1 - x0):
                d.text((x0, y), line, font=fnt, fill=25)
                y += MEMO_LINE_PX
            y += 14 if kind == "q" else 26
    if y > hpx - 120:
        raise RuntimeError("memo page overflow")
    rng = np.random.default_rng(seed)
    img = img.rotate(MEMO_SKEW_DEG, resample=Image.BICUBIC, fillcolor=250)  # a crooked scan
    arr = np.asarray(img, dtype=np.float32)
    arr += rng.normal(0.0, MEMO_NOISE, arr.shape)
    # a faint grey shadow along the left edge, as from a scanner lid
    arr[:, :18] -= np.linspace(60, 0, 18, dtype=np.float32)[None, :]
    specks = rng.random(arr.shape) < 0.0004
    arr[specks] = rng.uniform(60, 160, int(specks.sum()))
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "L")
    img = img.filter(ImageFilter.GaussianBlur(MEMO_BLUR))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=55, optimize=True)
    return buf.getvalue()


def make_scanned_memo(path: Path) -> None:
    doc = pymupdf.open()
    for i, blocks in enumerate(MEMO_PAGES):
        page = doc.new_page(width=PAGE_W, height=PAGE_H)
        page.insert_image(page.rect, stream=render_memo_page(blocks, seed=100 + i))
    doc.set_metadata(
        {
            "title": "",
            "author": "",
            "subject": "",
            "keywords": "",
            "creator": "Scanner",
            "producer": "scripts/make_sample_corpus.py",
            "creationDate": FIXED_PDF_DATE,
            "modDate": FIXED_PDF_DATE,
        }
    )
    save_pdf(doc, path)


# --------------------------------------------------------------------------------------------
# 4. Images
# --------------------------------------------------------------------------------------------

MONTHLY_ROBOTS = [2150, 2240, 2390, 2480, 2620, 2710, 2860, 2990, 3180, 3420, 3650, 3910]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def make_chart_png(path: Path) -> None:
    wpx, hpx = 1280, 760
    img = Image.new("RGB", (wpx, hpx), "white")
    d = ImageDraw.Draw(img)
    d.text(
        (wpx // 2, 28),
        "Monthly active robots 2024",
        font=font("DejaVuSans-Bold", 44),
        fill=(20, 40, 80),
        anchor="mt",
    )
    d.text(
        (wpx // 2, 86),
        "Northwind robots that completed at least one task in the month",
        font=font("DejaVuSans", 26),
        fill=(90, 90, 90),
        anchor="mt",
    )
    left, right, top, bottom = 150, wpx - 40, 150, hpx - 110
    vmax = 4000
    f_tick = font("DejaVuSans", 24)
    for v in range(0, vmax + 1, 1000):
        y = bottom - (bottom - top) * v / vmax
        d.line([(left, y), (right, y)], fill=(225, 225, 225), width=2)
        d.text((left - 12, y), f"{v:,}", font=f_tick, fill=(60, 60, 60), anchor="rm")
    d.line([(left, bottom), (right, bottom)], fill="black", width=3)
    d.line([(left, bottom), (left, top)], fill="black", width=3)
    slot = (right - left) / 12
    f_val = font("DejaVuSans-Bold", 24)
    for i, (m, v) in enumerate(zip(MONTHS, MONTHLY_ROBOTS, strict=True)):
        cx = left + slot * (i + 0.5)
        y = bottom - (bottom - top) * v / vmax
        colour = (200, 90, 40) if i == 11 else (40, 90, 160)
        d.rectangle([cx - slot * 0.36, y, cx + slot * 0.36, bottom], fill=colour)
        d.text((cx, y - 6), f"{v:,}", font=f_val, fill=(30, 30, 30), anchor="mb")
        d.text((cx, bottom + 10), m, font=f_tick, fill="black", anchor="mt")
    d.text(
        ((left + right) // 2, hpx - 20), "Month", font=font("DejaVuSans-Bold", 28), fill="black", anchor="mb"
    )
    # rotated y-axis label
    lab_font = font("DejaVuSans-Bold", 28)
    lab = Image.new("RGBA", (int(lab_font.getlength("Active robots")) + 10, 40), (0, 0, 0, 0))
    ImageDraw.Draw(lab).text((5, 2), "Active robots", font=lab_font, fill="black")
    lab = lab.rotate(90, expand=True)
    img.paste(lab, (20, (top + bottom) // 2 - lab.height // 2), lab)
    d.text(
        (left + 30, top + 10),
        "Peak: 3,910 active robots in December",
        font=font("DejaVuSans-Bold", 28),
        fill=(200, 90, 40),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, "PNG", optimize=True)


def make_lighthouse_jpg(path: Path) -> None:
    rng = np.random.default_rng(7)
    wpx, hpx, horizon = 1024, 683, 400
    yy, xx = np.mgrid[0:hpx, 0:wpx].astype(np.float32)
    # sky: blue at the top fading to warm haze at the horizon, plus a soft sun glow
    t = np.clip(yy / horizon, 0, 1)[..., None]
    sky = (1 - t) * np.array([95, 150, 210]) + t * np.array([238, 222, 196])
    glow = np.exp(-(((xx - 230) ** 2 + (yy - 130) ** 2) / (2 * 90.0**2)))[..., None]
    sky = sky + glow * np.array([60, 50, 20])
    # sea: darker towards the viewer
    s = np.clip((yy - horizon) / (hpx - horizon), 0, 1)[..., None]
    sea = (1 - s) * np.array([70, 120, 160]) + s * np.array([20, 55, 90])
    arr = np.where(yy[..., None] < horizon, sky, sea)
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")
    d = ImageDraw.Draw(img, "RGBA")
    for _ in range(260):  # wave highlights
        y = rng.uniform(horizon + 4, hpx)
        x = rng.uniform(0, wpx)
        length = 10 + (y - horizon) * rng.uniform(0.1, 0.35)
        d.line(
            [(x, y), (x + length, y + rng.uniform(-1, 1))],
            fill=(220, 235, 245, 90),
            width=max(1, int((y - horizon) / 90)),
        )
    # headland with grass
    d.polygon(
        [(520, hpx), (560, 420), (640, 385), (760, 372), (900, 380), (1024, 400), (1024, hpx)],
        fill=(92, 84, 74),
    )
    d.polygon(
        [(600, 400), (640, 386), (760, 373), (900, 381), (1024, 401), (1024, 420), (880, 405), (700, 402)],
        fill=(88, 128, 64),
    )
    # lighthouse: tapered tower with red and white bands, gallery, lantern and dome
    cx, y_base, y_top, w_base, w_top = 770, 382, 150, 64, 40
    bands = 6
    for b in range(bands):
        ya = y_base - (y_base - y_top) * b / bands
        yb = y_base - (y_base - y_top) * (b + 1) / bands
        wa = w_base - (w_base - w_top) * b / bands
        wb = w_base - (w_base - w_top) * (b + 1) / bands
        colour = (196, 40, 40) if b % 2 == 0 else (245, 245, 240)
        d.polygon([(cx - wa / 2, ya), (cx + wa / 2, ya), (cx + wb / 2, yb), (cx - wb / 2, yb)], fill=colour)
    d.polygon(
        [(cx, y_base), (cx + w_base / 2, y_base), (cx + w_top / 2, y_top), (cx, y_top)], fill=(0, 0, 0, 40)
    )  # shaded side
    d.rectangle([cx - 30, y_top - 8, cx + 30, y_top], fill=(40, 40, 40))
    d.rectangle([cx - 16, y_top - 40, cx + 16, y_top - 8], fill=(250, 226, 140))
    for gx in (-8, 0, 8):
        d.line([(cx + gx, y_top - 40), (cx + gx, y_top - 8)], fill=(60, 60, 60), width=2)
    d.pieslice([cx - 19, y_top - 60, cx + 19, y_top - 22], 180, 360, fill=(150, 30, 30))
    d.polygon(
        [(cx - 10, y_top - 26), (cx - 330, y_top - 70), (cx - 330, y_top + 10)], fill=(255, 240, 180, 45)
    )  # light beam
    d.rectangle([cx + 30, y_base - 40, cx + 80, y_base], fill=(235, 232, 222))  # keeper's house
    d.polygon([(cx + 26, y_base - 40), (cx + 55, y_base - 62), (cx + 84, y_base - 40)], fill=(120, 50, 40))
    # a few gulls
    for gx, gy in ((380, 140), (420, 170), (470, 120)):
        d.arc([gx - 12, gy - 6, gx, gy + 6], 200, 340, fill=(60, 60, 60), width=2)
        d.arc([gx, gy - 6, gx + 12, gy + 6], 200, 340, fill=(60, 60, 60), width=2)
    # photographic softness and sensor noise, applied before the sign so its text stays crisp
    img = img.filter(ImageFilter.GaussianBlur(0.9))
    arr = np.asarray(img, dtype=np.float32) + rng.normal(0, 4.0, (hpx, wpx, 3))
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")
    d = ImageDraw.Draw(img, "RGBA")
    # wooden information sign on two posts in the foreground
    bx0, by0, bx1, by1 = 40, 455, 660, 615
    for px in (bx0 + 70, bx1 - 70):
        d.rectangle([px - 9, by1 - 10, px + 9, hpx], fill=(70, 48, 30))
    d.rectangle([bx0 + 6, by0 + 6, bx1 + 6, by1 + 6], fill=(0, 0, 0, 70))  # shadow
    d.rectangle([bx0, by0, bx1, by1], fill=(104, 68, 40), outline=(60, 38, 22), width=5)
    for gy in range(by0 + 14, by1 - 6, 11):  # wood grain
        d.line(
            [(bx0 + 8, gy + rng.uniform(-2, 2)), (bx1 - 8, gy + rng.uniform(-2, 2))],
            fill=(90, 58, 34, 120),
            width=2,
        )
    line1 = "Harbor Lighthouse — built 1871"
    f1 = fit_font("DejaVuSans-Bold", line1, bx1 - bx0 - 40, 40, 28)
    d.text(((bx0 + bx1) // 2, by0 + 24), line1, font=f1, fill=(250, 244, 225), anchor="mt")
    f2 = font("DejaVuSans", 26)
    d.text(
        ((bx0 + bx1) // 2, by0 + 84),
        "Tower height 31 m · 142 steps to the lantern",
        font=f2,
        fill=(245, 236, 210),
        anchor="mt",
    )
    d.text(
        ((bx0 + bx1) // 2, by0 + 120),
        "Open to visitors May to October",
        font=f2,
        fill=(245, 236, 210),
        anchor="mt",
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, "JPEG", quality=85, optimize=True)


def make_whiteboard_webp(path: Path) -> None:
    rng = np.random.default_rng(14)
    wpx, hpx = 1100, 720
    yy, xx = np.mgrid[0:hpx, 0:wpx].astype(np.float32)
    shade = 236 + 10 * (xx / wpx) - 8 * (yy / hpx)  # uneven office lighting
    arr = np.stack([shade, shade + 2, shade - 1], axis=-1)
    arr += rng.normal(0, 1.5, arr.shape)
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")
    d = ImageDraw.Draw(img, "RGBA")
    # faint ghosts of erased writing
    for _ in range(12):
        x, y = rng.uniform(60, wpx - 300), rng.uniform(80, hpx - 120)
        d.line(
            [(x, y), (x + rng.uniform(80, 260), y + rng.uniform(-10, 10))],
            fill=(120, 130, 150, 28),
            width=int(rng.integers(6, 14)),
        )
    d.rectangle([0, 0, wpx - 1, hpx - 1], outline=(170, 172, 176), width=22)  # aluminium frame
    d.rectangle([300, hpx - 22, 800, hpx - 8], fill=(150, 152, 156))  # marker tray

    def marker_line(text, x, y, size, colour, angle, bold=False):
        fnt = font("DejaVuSans-Bold" if bold else "DejaVuSans", size)
        layer = Image.new("RGBA", (int(fnt.getlength(text)) + 20, size + 24), (0, 0, 0, 0))
        ImageDraw.Draw(layer).text((10, 6), text, font=fnt, fill=colour)
        layer = layer.rotate(angle, resample=Image.BICUBIC, expand=True)
        img.paste(layer, (int(x), int(y)), layer)

    blue, black, red = (25, 55, 160, 255), (30, 30, 35, 255), (190, 30, 35, 255)
    marker_line("Sprint 14 goals:", 70, 50, 52, blue, 0.8, bold=True)
    d.line([(80, 122), (520, 118)], fill=(25, 55, 160), width=4)
    items = [
        "1. Ship Atlas firmware 3.2 to pilot sites",
        "2. Fix lidar drift bug (NW-4471)",
        "3. Dock pairing in under 10 seconds",
        "4. New battery health page in Compass",
    ]
    for k, item in enumerate(items):
        marker_line(item, 80 + rng.uniform(-6, 6), 150 + k * 82, 38, black, float(rng.uniform(-1.2, 1.2)))
    marker_line("Demo day: Thursday 3 pm, room Tejo", 80, 505, 38, red, 0.5, bold=True)
    # a sticky note
    nx, ny = 850, 36
    d.rectangle([nx + 5, ny + 5, nx + 215, ny + 145], fill=(0, 0, 0, 40))
    d.rectangle([nx, ny, nx + 210, ny + 140], fill=(250, 232, 110))
    marker_line("Owner:", nx + 14, ny + 18, 30, black, 0)
    marker_line("Ana Costa", nx + 14, ny + 66, 32, black, 0, bold=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, "WEBP", quality=82, method=6)


def make_site_map_png(path: Path) -> None:
    wpx, hpx = 1200, 780
    img = Image.new("RGB", (wpx, hpx), (246, 244, 238))
    d = ImageDraw.Draw(img)
    d.text((40, 30), "Osaka plant (Sakai) — site map", font=font("DejaVuSans-Bold", 42), fill=(20, 40, 80))
    # roads
    road = (200, 200, 200)
    d.rectangle([40, 420, wpx - 40, 480], fill=road)
    d.rectangle([560, 110, 620, hpx - 30], fill=road)
    for x in range(60, wpx - 70, 60):
        d.line([(x, 450), (x + 30, 450)], fill="white", width=4)
    f_name = font("DejaVuSans-Bold", 30)
    f_use = font("DejaVuSans", 26)

    def building(box, name, use, colour):
        d.rectangle(box, fill=colour, outline=(60, 60, 60), width=3)
        cx, cy = (box[0] + box[2]) // 2, (box[1] + box[3]) // 2
        d.text((cx, cy - 4), name, font=f_name, fill="black", anchor="mb")
        d.text((cx, cy + 4), use, font=f_use, fill="black", anchor="mt")

    building((40, 110, 540, 400), "Building A", "Final assembly", (190, 210, 235))
    building((640, 110, 1160, 250), "Building B", "Battery pack line", (235, 215, 180))
    building((640, 270, 1160, 400), "Building C", "Paint shop", (225, 190, 200))
    building((640, 500, 1000, 740), "Building D", "Warehouse", (205, 225, 190))
    # loading docks on the east side of building D
    for k in range(4):
        d.rectangle([1000, 520 + k * 52, 1040, 560 + k * 52], fill=(120, 120, 120))
    d.text((1050, 560), "Loading", font=f_use, fill="black")
    d.text((1050, 592), "docks 1-4", font=f_use, fill="black")
    # visitor parking and gate
    d.rectangle([40, 500, 540, 740], outline=(90, 90, 90), width=3)
    for x in range(70, 540, 48):
        d.line([(x, 500), (x, 560)], fill=(90, 90, 90), width=2)
    d.text((290, 650), "Visitor parking", font=f_name, fill="black", anchor="mm")
    d.rectangle([560, hpx - 40, 620, hpx - 25], fill=(200, 60, 50))
    d.text((540, hpx - 32), "Main gate", font=f_use, fill=(160, 40, 30), anchor="rm")
    # north arrow
    d.polygon([(1120, 30), (1100, 80), (1140, 80)], fill="black")
    d.text((1120, 84), "N", font=f_name, fill="black", anchor="mt")
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, "PNG", optimize=True)


# --------------------------------------------------------------------------------------------
# 5. Video: three title-card scenes with simple motion
# --------------------------------------------------------------------------------------------

VIDEO_W, VIDEO_H, VIDEO_FPS, SCENE_SECONDS = 480, 270, 10, 8
SCENES = [
    ("Battery lab", ["Cells cycled at 45 °C", "for 1,200 charge cycles"], (34, 62, 74)),
    ("Lidar calibration room", ["64 reflective targets", "mounted on the walls"], (28, 32, 70)),
    ("Robot test track", ["Atlas drives 500 laps", "every night"], (36, 58, 40)),
]


def scene_card(title: str, lines: list[str], bg) -> np.ndarray:
    """The static part of a scene (background + text) as an RGB array."""
    img = Image.new("RGB", (VIDEO_W, VIDEO_H), bg)
    d = ImageDraw.Draw(img)
    d.text((16, 10), "Northwind lab tour", font=font("DejaVuSans", 24), fill=(200, 205, 210))
    f_title = fit_font("DejaVuSans-Bold", title, VIDEO_W - 32, 40, 28)
    d.text((VIDEO_W // 2, 58), title, font=f_title, fill=(255, 255, 255), anchor="mt")
    f_line = fit_font("DejaVuSans", max(lines, key=len), VIDEO_W - 40, 30, 24)
    for k, line in enumerate(lines):
        d.text((VIDEO_W // 2, 112 + k * 38), line, font=f_line, fill=(250, 230, 150), anchor="mt")
    return np.asarray(img).copy()


def draw_motion(frame: np.ndarray, scene: int, t: float) -> None:
    """Simple moving shapes in the bottom band (y >= 195), drawn in place on a BGR frame."""
    y0 = 200
    if scene == 0:  # battery cells charging one after another
        for k in range(6):
            x = 40 + k * 70
            cv2.rectangle(frame, (x, y0 + 10), (x + 44, y0 + 60), (230, 230, 230), 2)
            cv2.rectangle(frame, (x + 16, y0 + 4), (x + 28, y0 + 10), (230, 230, 230), -1)
            level = min(1.0, max(0.0, t * 1.5 - k * 0.18))
            top = int(y0 + 58 - 46 * level)
            cv2.rectangle(frame, (x + 3, top), (x + 41, y0 + 57), (80, 200, 90), -1)
    elif scene == 1:  # a lidar sweeping over wall targets
        cx, cy = VIDEO_W // 2, y0 + 60
        for k in range(9):
            tx = 40 + k * 50
            cv2.circle(frame, (tx, y0 + 12), 6, (60, 220, 240), -1)
        ang = math.pi * (0.1 + 0.8 * (0.5 + 0.5 * math.sin(t * 2 * math.pi * 1.2)))
        reach = (cy - y0) / max(math.sin(ang), 0.2)  # stay below the text
        ex, ey = int(cx - reach * math.cos(ang)), int(cy - reach * math.sin(ang))
        cv2.line(frame, (cx, cy), (ex, ey), (80, 80, 255), 2)
        cv2.circle(frame, (cx, cy), 12, (220, 220, 220), -1)
    else:  # a robot going round an oval track
        cx, cy, ax, ay = VIDEO_W // 2, y0 + 34, 190, 26
        cv2.ellipse(frame, (cx, cy), (ax, ay), 0, 0, 360, (200, 200, 200), 2)
        a = 2 * math.pi * t * 1.5
        rx, ry = int(cx + ax * math.cos(a)), int(cy + ay * math.sin(a))
        cv2.rectangle(frame, (rx - 14, ry - 9), (rx + 14, ry + 9), (40, 140, 250), -1)


def make_video(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), VIDEO_FPS, (VIDEO_W, VIDEO_H))
    if not writer.isOpened():
        raise RuntimeError("cv2.VideoWriter could not open an mp4v writer")
    n = VIDEO_FPS * SCENE_SECONDS
    try:
        for s, (title, lines, bg) in enumerate(SCENES):
            card = cv2.cvtColor(scene_card(title, lines, bg), cv2.COLOR_RGB2BGR)
            for i in range(n):
                frame = card.copy()
                draw_motion(frame, s, i / n)  # hard cuts between scenes keep the file small
                writer.write(frame)
    finally:
        writer.release()


# --------------------------------------------------------------------------------------------
# 6. Notes
# --------------------------------------------------------------------------------------------

MEETING_NOTE = """\
# Supplier meeting: Kestrel Batteries

- **Date:** 14 January 2025, 10:00-11:30 (video call)
- **Attendees:** Tomás Ferreira (Northwind, procurement), Ines Duarte (Northwind, battery
  engineering), Jakub Nowak and Ewa Zielinska (Kestrel Batteries, sales and quality)

## Summary

Kestrel Batteries, based in Gdansk, wants to become our second cell supplier for the sodium-ion
pilot. They currently make cells for electric forklifts and home storage.

- **Price:** USD 61 per cell for orders up to 20,000 cells a year, dropping to USD 57 per cell
  above 20,000.
- **Lead time:** 9 weeks from order to delivery in Osaka, shipped by sea.
- **Samples:** a first batch of 200 sodium-ion sample cells will arrive in Osaka on 12 May.
- **Warranty:** 8 years or 4,000 full cycles, whichever comes first.
- Kestrel passed their last external quality audit with two minor findings; they will share
  the report under NDA.

## Concerns

Their factory has never shipped to Japan, and they have no local service partner. Ines is worried
about cell-to-cell variation in the last test batch (capacity spread of 3 percent, we need
under 2 percent).

## Action items

1. Tomás: send our thermal test specification to Kestrel by 21 January.
2. Ines: check import duty and shipping rules for sodium-ion cells into Japan.
3. Jakub (Kestrel): confirm whether the 57-dollar price also applies to the sample batch.
4. Next call: 4 February.
"""

RECIPE_NOTE = """\
BUCKWHEAT PANCAKES FOR THE FRIDAY TEAM BREAKFAST
(Denver kitchen, serves 12 hungry engineers)

Ingredients
  300 g buckwheat flour
  200 g plain wheat flour
  2 teaspoons baking soda
  1 pinch of salt
  2 tablespoons brown sugar
  4 eggs
  900 ml buttermilk
  60 g melted butter, plus a little for the pan
  Maple syrup and blueberries to serve

Method
  1. Whisk both flours, the baking soda, salt and sugar in the big steel bowl.
  2. In a jug, beat the eggs into the buttermilk, then stir in the melted butter.
  3. Pour the wet mix into the dry mix and stir only until no dry flour is left.
     Small lumps are fine; over-mixing makes the pancakes tough.
  4. Let the batter rest for 20 minutes while the griddle heats up on medium.
  5. Use a quarter-cup measure per pancake. Flip when bubbles appear on the top and
     the edges look dry, after about 2 minutes, then cook 1 more minute.
  6. Keep finished pancakes warm in the oven at 90 degrees C, covered with a tea towel.

Notes
  - Makes about 36 pancakes. Double the recipe when the Osaka visitors are in town.
  - For a gluten-free batch, replace the wheat flour with more buckwheat flour.
  - Clean the griddle with hot water only, never with soap.
"""


# --------------------------------------------------------------------------------------------
# 7. Questions
# --------------------------------------------------------------------------------------------


def q(question: str, file: str, page: int | None, answer: str) -> dict:
    return {"question": question, "expected": {"file": file, "page": page}, "answer": answer}


QUESTIONS = [
    q(
        "Who signed the letter to shareholders, and who started the company with her?",
        REPORT_PDF,
        1,
        "Maren Alvarez, CEO, who co-founded Northwind with Koji Tanabe in 2011",
    ),
    q(
        "Which region generated the most revenue for Northwind last year?",
        REPORT_PDF,
        2,
        "North America, USD 168.4 million",
    ),
    q(
        "How fast did Asia-Pacific sales grow compared with 2023?",
        REPORT_PDF,
        2,
        "21.1 percent, from USD 77.8 million to USD 94.2 million",
    ),
    q(
        "How heavy a load can the Atlas robot carry, and how long does it run per charge?",
        REPORT_PDF,
        3,
        "450 kg payload and about 14 hours of battery runtime",
    ),
    q(
        "Were there any injuries caused by the robots, and which safety standards are they certified to?",
        REPORT_PDF,
        4,
        "Seven minor incidents, no injuries, zero lost-time injuries; ISO 3691-4, "
        "UL 3100, CE, ISO 45001, ISO 9001",
    ),
    q(
        "What range does Northwind's new solid-state lidar sensor have?",
        REPORT_PDF,
        5,
        "Up to 120 metres (the Lumen-3 sensor)",
    ),
    q(
        "How much of the factory's electricity comes from the rooftop solar panels?",
        REPORT_PDF,
        6,
        "4.8 MW, supplying 62 percent of the Osaka plant's electricity",
    ),
    q("How many people work in the Portuguese office?", REPORT_PDF, 7, "620 employees in Lisbon"),
    q(
        "What sales does management expect next year, and which new products are planned?",
        REPORT_PDF,
        8,
        "Revenue of USD 480-510 million in 2025; launch of Atlas Mini in Q2 and "
        "series production of the Lumen-3 lidar",
    ),
    q(
        "How much is the fine for picking protected flowers in the Valmora park?",
        GUIDE_PDF,
        1,
        "A fine of up to 500 euros",
    ),
    q(
        "Why is edelweiss covered in white woolly hairs?",
        GUIDE_PDF,
        2,
        "The hairs reflect ultraviolet light, reduce water loss and trap warm air",
    ),
    q(
        "Why do gentian flowers shut when a cloud passes over?",
        GUIDE_PDF,
        3,
        "To protect pollen and nectar from rain and cold and keep the flower warm for bumblebees",
    ),
    q(
        "What is the highest altitude at which purple saxifrage has been found flowering?",
        GUIDE_PDF,
        4,
        "4,505 metres, on the Dom in the Swiss Alps",
    ),
    q(
        "How high is the tree line in the Valmora mountains, and where does the zone of lasting snow start?",
        GUIDE_PDF,
        5,
        "The tree line is at about 2,100 m; the nival zone begins at about 3,000 m",
    ),
    q(
        "When does the Denver team start working at the new Larimer Street address?",
        MEMO_PDF,
        1,
        "Monday, March 3 (1200 Larimer Street, floors 6 and 7)",
    ),
    q(
        "Where can I park my car after we move to Larimer Street?",
        MEMO_PDF,
        2,
        "At the Larimer Square garage on 14th Street, with a monthly pass paid by Northwind",
    ),
    q(
        "In which month were the most robots active in 2024?",
        CHART_PNG,
        None,
        "December, with 3,910 active robots",
    ),
    q("What year was the lighthouse at the harbor built?", LIGHTHOUSE_JPG, None, "1871"),
    q(
        "Which bug is the team fixing this sprint, and when is the demo?",
        WHITEBOARD_WEBP,
        None,
        "The lidar drift bug NW-4471; demo on Thursday at 3 pm in room Tejo",
    ),
    q("Which building at the Osaka site houses the paint shop?", SITE_MAP_PNG, None, "Building C"),
    q(
        "How many reflective targets are there in the lidar calibration room?",
        VIDEO_MP4,
        None,
        "64 reflective targets mounted on the walls",
    ),
    q(
        "At what temperature are battery cells cycled in the battery lab?",
        VIDEO_MP4,
        None,
        "45 °C, for 1,200 charge cycles",
    ),
    q(
        "What price per cell did the sodium-ion supplier quote for large orders?",
        MEETING_MD,
        None,
        "USD 57 per cell above 20,000 cells a year (USD 61 below that)",
    ),
    q("How long should the pancake batter rest before cooking?", RECIPE_TXT, None, "20 minutes"),
]


# The training/validation split of the questions above, with SHORT reference answers (1-4 words)
# that an exact-match or ANLS judge on a CPU can score: the long answers above suit a model judge
# only. A two-part question is narrowed to the part its short answer answers. Each item keeps the
# uid of its question in questions.json (q1..q24) so the two splits and the full list line up.
# (index into QUESTIONS, narrowed question or None for the same wording, short answer, split)
SPLIT = [
    (0, "Who signed the letter to shareholders?", "Maren Alvarez", "train"),
    (1, None, "North America", "val"),
    (2, None, "21.1 percent", "train"),
    (3, "How heavy a load can the Atlas robot carry?", "450 kg", "train"),
    (4, "How many minor incidents involving Atlas robots did customers report?", "seven", "train"),
    (5, None, "120 metres", "train"),
    (6, None, "62 percent", "train"),
    (7, None, "620", "val"),
    (8, "Which new robot does Northwind plan to launch next year?", "Atlas Mini", "train"),
    (9, None, "500 euros", "val"),
    (10, "What kind of light do the white woolly hairs of edelweiss reflect?", "ultraviolet light", "train"),
    (11, "Which insects do closed gentian flowers keep warm?", "bumblebees", "train"),
    (12, None, "4,505 metres", "train"),
    (13, "At about what altitude is the tree line in the Valmora mountains?", "2,100 m", "train"),
    (14, None, "Monday, March 3", "val"),
    (15, None, "Larimer Square garage", "train"),
    (16, None, "December", "val"),
    (17, None, "1871", "val"),
    (18, "Which bug is the team fixing this sprint?", "NW-4471", "train"),
    (19, None, "Building C", "val"),
    (20, None, "64", "train"),
    (21, None, "45 °C", "train"),
    (22, None, "USD 57", "train"),
    (23, None, "20 minutes", "val"),
]


def split_questions(part: str) -> list[dict]:
    """The ``train`` or ``val`` questions of :data:`SPLIT`, in the questions.json form plus a uid."""
    out = []
    for i, question, answer, where in SPLIT:
        if where == part:
            base = QUESTIONS[i]
            item = {"uid": f"q{i + 1}", **q(question or base["question"], "", None, answer)}
            item["expected"] = dict(base["expected"])
            out.append(item)
    return out


README_ROWS = [  # file, type, contents: topics only, no facts (see the README text)
    (
        REPORT_PDF,
        "PDF with text layer, 8 pages",
        "A robotics company's annual report, one topic per page: letter to shareholders, revenue by "
        "region (table and bar chart), flagship product, safety, research, sustainability, staff and "
        "offices, outlook",
    ),
    (
        GUIDE_PDF,
        "PDF with text layer, 5 pages (A5)",
        "A pocket guide to mountain flowers: introduction, three plant groups, and a labelled "
        "diagram of vegetation zones",
    ),
    (
        MEMO_PDF,
        "PDF, **image only**, 2 pages",
        "A scanned internal memo and its Q&A page; there is no text layer, so only OCR can read it",
    ),
    (CHART_PNG, "PNG", "A bar chart with title, axis labels and values"),
    (LIGHTHOUSE_JPG, "JPEG", "A photo-like coastal scene with an information sign"),
    (WHITEBOARD_WEBP, "WEBP", "A team whiteboard with a sticky note"),
    (SITE_MAP_PNG, "PNG", "A labelled map of a factory site"),
    (
        VIDEO_MP4,
        f"MP4 (mp4v), {VIDEO_W}x{VIDEO_H}, {VIDEO_FPS} fps, {len(SCENES) * SCENE_SECONDS} s",
        f"A lab tour made of {len(SCENES)} title-card scenes with moving shapes",
    ),
    (MEETING_MD, "Markdown", "Notes from a supplier meeting"),
    (RECIPE_TXT, "Plain text", "A recipe for a team breakfast"),
    (QUESTIONS_JSON, "JSON", f"{len(QUESTIONS)} test questions with the expected file and page"),
    (TRAIN_JSON, "JSON", f"{len(split_questions('train'))} of those questions for training, short answers"),
    (VAL_JSON, "JSON", f"{len(split_questions('val'))} of those questions held out for validation"),
]


def _readme_table() -> str:
    lines = ["| File | Type | Contents |", "|------|------|----------|"]
    lines += [f"| `{f}` | {t} | {c} |" for f, t, c in README_ROWS]
    return "\n".join(lines)


README_TEXT = f"""\
# Sample corpus

A small, **entirely fictional** document collection that ships with VRAG Desktop. It is indexed
on first run and used by the tests and the README demo. Every file here is generated by
[`scripts/make_sample_corpus.py`](../../scripts/make_sample_corpus.py): do not edit the files by
hand; change the script and run it again (it is deterministic and overwrites its outputs):

```bash
.venv/bin/python scripts/make_sample_corpus.py          # regenerate
.venv/bin/python scripts/make_sample_corpus.py --check  # only verify the files
```

The companies, people, places, products and figures are invented; only the plant facts in the
field guide follow common botany. This README deliberately names topics, not facts, so that it
does not compete with the documents when the whole folder is indexed.

{_readme_table()}

## questions.json

A list of objects:

```json
{{"question": "...", "expected": {{"file": "pdf/....pdf", "page": 3}}, "answer": "..."}}
```

`file` is relative to this folder; `page` is the 1-based page number for PDFs and `null` for
images, the video and the notes. Each question is answerable from exactly one page or file and is
worded the way a user would ask, not copied from the source. Text in the images and video frames
is at least 24 px high so that OCR can read it.

## train.json and val.json

The same questions split for training a model (see docs/trainer.md): `train.json` to train on,
`val.json` held out to draw the validation curve. Same form, plus each question's `uid` in
`questions.json`; the answers are short (one to four words) so that an exact-match or ANLS judge
can score them without a judge model. A question with two parts is narrowed to one.
"""


# --------------------------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------------------------

EXPECTED_PAGES = {REPORT_PDF: 8, GUIDE_PDF: 5, MEMO_PDF: 2}
TEXT_LAYER = {REPORT_PDF: True, GUIDE_PDF: True, MEMO_PDF: False}


def verify(out: Path) -> list[str]:
    """Check every generated file; returns a list of problems (empty when all is well)."""
    problems: list[str] = []
    for rel, n_pages in EXPECTED_PAGES.items():
        with pymupdf.open(out / rel) as doc:
            if doc.page_count != n_pages:
                problems.append(f"{rel}: {doc.page_count} pages, expected {n_pages}")
            for page in doc:
                text = page.get_text().strip()
                words = len(text.split())
                if TEXT_LAYER[rel] and words < 150:
                    problems.append(f"{rel} p{page.number + 1}: only {words} words of text")
                if not TEXT_LAYER[rel] and text:
                    problems.append(f"{rel} p{page.number + 1}: unexpected text layer")
    for rel, fmt in (
        (CHART_PNG, "PNG"),
        (LIGHTHOUSE_JPG, "JPEG"),
        (WHITEBOARD_WEBP, "WEBP"),
        (SITE_MAP_PNG, "PNG"),
    ):
        with Image.open(out / rel) as im:
            im.load()
            if im.format != fmt:
                problems.append(f"{rel}: format {im.format}, expected {fmt}")
    cap = cv2.VideoCapture(str(out / VIDEO_MP4))
    try:
        fps = cap.get(cv2.CAP_PROP_FPS)
        frames = 0
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            if frame.shape[:2] != (VIDEO_H, VIDEO_W):
                problems.append(f"{VIDEO_MP4}: frame size {frame.shape[:2]}")
                break
            frames += 1
    finally:
        cap.release()
    want = VIDEO_FPS * SCENE_SECONDS * len(SCENES)
    if frames != want or abs(fps - VIDEO_FPS) > 0.01:
        problems.append(f"{VIDEO_MP4}: {frames} frames at {fps} fps, expected {want} at {VIDEO_FPS}")
    questions = json.loads((out / QUESTIONS_JSON).read_text(encoding="utf-8"))
    for item in questions:
        exp = item["expected"]
        if not (out / exp["file"]).exists():
            problems.append(f"question points at a missing file: {exp['file']}")
        elif exp["file"] in EXPECTED_PAGES and not 1 <= (exp["page"] or 0) <= EXPECTED_PAGES[exp["file"]]:
            problems.append(f"question has a bad page: {item['question']}")
    problems += verify_split(out)
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    if total > 3 * 1024 * 1024:
        problems.append(f"corpus is {total} bytes, over 3 MB")
    return problems


def verify_split(out: Path) -> list[str]:
    """train.json and val.json: as the script writes them, disjoint, every question in one of them,
    every answer short enough for an exact or ANLS judge."""
    problems: list[str] = []
    seen: set[str] = set()
    for rel in (TRAIN_JSON, VAL_JSON):
        want = split_questions(rel.removesuffix(".json"))
        got = json.loads((out / rel).read_text(encoding="utf-8")) if (out / rel).exists() else None
        if got != want:
            problems.append(f"{rel}: not what the script writes (run it again)")
        for item in want:
            if not 1 <= len(item["answer"].split()) <= 4:
                problems.append(f"{rel}: answer not short: {item['answer']!r}")
            if item["uid"] in seen:
                problems.append(f"{rel}: {item['uid']} is in both splits")
            seen.add(item["uid"])
    if len(seen) != len(QUESTIONS):
        problems.append(f"the split covers {len(seen)} of {len(QUESTIONS)} questions")
    return problems


def write_split(out: Path) -> None:
    """train.json and val.json (also run alone: they need none of the rendered files)."""
    for rel in (TRAIN_JSON, VAL_JSON):
        items = split_questions(rel.removesuffix(".json"))
        (out / rel).write_text(json.dumps(items, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def generate(out: Path) -> None:
    make_annual_report(out / REPORT_PDF)
    make_field_guide(out / GUIDE_PDF)
    make_scanned_memo(out / MEMO_PDF)
    make_chart_png(out / CHART_PNG)
    make_lighthouse_jpg(out / LIGHTHOUSE_JPG)
    make_whiteboard_webp(out / WHITEBOARD_WEBP)
    make_site_map_png(out / SITE_MAP_PNG)
    make_video(out / VIDEO_MP4)
    for rel, text in ((MEETING_MD, MEETING_NOTE), (RECIPE_TXT, RECIPE_NOTE), (README_MD, README_TEXT)):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text, encoding="utf-8")
    (out / QUESTIONS_JSON).write_text(
        json.dumps(QUESTIONS, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    write_split(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    ap.add_argument("--check", action="store_true", help="only verify an existing corpus")
    args = ap.parse_args(argv)
    out: Path = args.out
    if not args.check:
        generate(out)
    problems = verify(out)
    for p in problems:
        print("PROBLEM:", p, file=sys.stderr)
    files = sorted(p for p in out.rglob("*") if p.is_file())
    for p in files:
        print(f"{p.stat().st_size:>9,}  {p.relative_to(out)}")
    print(f"{sum(p.stat().st_size for p in files):>9,}  total ({len(files)} files)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
