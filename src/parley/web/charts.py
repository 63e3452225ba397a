"""The overview's charts as geometry for `templates/_charts.html` to draw as inline SVG.

Server-rendered, so the page loads nothing and runs no script (the dashboard's policy,
web/security.py). Colours are SVG presentation attributes, which the policy allows (it
refuses inline `style`). Each mark carries its figure (`data-value`) and a `<title>`, and
each chart a data table beside it: what a screen reader reads, and what the tests compare.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from parley.services.overview import ENDINGS, Overview

WIDTH = 640
HEIGHT = 220
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 12, 30
"""The plot's margins inside the view box: the axis labels' room."""
SLOT = (WIDTH - LEFT - RIGHT) / 7
PALETTE = (
    "#2856c7", "#e69f00", "#009e73", "#cc79a7", "#b42318", "#56b4e9", "#8c6d31",
    "#0072b2", "#d55e00", "#7f3c8d", "#11a579", "#3969ac", "#f2b701", "#e73f74",
    "#80ba5a",
)  # fmt: skip
"""Okabe-Ito's colour-blind-safe colours first, for the common endings; then distinct ones."""
NOT_ENDED_COLOUR = "#98a2b3"
COLOURS = dict(zip(ENDINGS, (*PALETTE, NOT_ENDED_COLOUR), strict=True))
"""One colour per way of ending, the same every week."""
PERCENTILE_COLOURS = {"p50": "#2856c7", "p95": "#d55e00"}


@dataclass(frozen=True, slots=True)
class Tick:
    y: float
    value: int


@dataclass(frozen=True, slots=True)
class DayLabel:
    x: float
    day: str
    text: str


@dataclass(frozen=True, slots=True)
class Bar:
    """One segment of a day's stacked bar."""

    x: float
    y: float
    width: float
    height: float
    day: str
    ending: str
    value: int
    colour: str


@dataclass(frozen=True, slots=True)
class Point:
    x: float
    y: float
    day: str
    percentile: str
    value: int


@dataclass(frozen=True, slots=True)
class Line:
    """One percentile's points, and the runs of consecutive days joined by a line (a day
    without data breaks it)."""

    percentile: str
    colour: str
    points: tuple[Point, ...]
    runs: tuple[str, ...]
    """SVG `points` attributes, one polyline each."""


@dataclass(frozen=True, slots=True)
class Chart:
    ticks: tuple[Tick, ...]
    days: tuple[DayLabel, ...]
    bars: tuple[Bar, ...] = ()
    lines: tuple[Line, ...] = ()


def nice_top(maximum: float) -> int:
    """The smallest 1, 2 or 5 times 10^k (at least 1) not under `maximum`: the axis's top."""
    if maximum <= 1:
        return 1
    power = 10 ** math.floor(math.log10(maximum))
    return next(int(step * power) for step in (1, 2, 5, 10) if step * power >= maximum)


def _scale(top: int) -> tuple[Tick, ...]:
    return tuple(Tick(y=_y(top * i / 4, top), value=round(top * i / 4)) for i in range(5))


def _y(value: float, top: int) -> float:
    return round(TOP + (HEIGHT - TOP - BOTTOM) * (1 - value / top), 1)


def _days(overview: Overview) -> tuple[DayLabel, ...]:
    return tuple(
        DayLabel(x=round(LEFT + SLOT * (i + 0.5), 1), day=d.day.isoformat(), text=f"{d.day:%a %d}")
        for i, d in enumerate(overview.days)
    )


def endings_chart(overview: Overview) -> Chart:
    """A bar per day, stacked by way of ending (the week's ways, in `ENDINGS`' order)."""
    top = nice_top(max(day.conversations for day in overview.days))
    width = round(SLOT * 0.6, 1)
    bars: list[Bar] = []
    for index, day in enumerate(overview.days):
        below = 0
        x = round(LEFT + SLOT * index + (SLOT - width) / 2, 1)
        for ending in overview.endings_seen:
            value = day.endings[ending]
            if value:
                y = _y(below + value, top)
                height = round(_y(below, top) - y, 1)
                bars.append(
                    Bar(x, y, width, height, day.day.isoformat(), ending, value, COLOURS[ending])
                )
                below += value
    return Chart(ticks=_scale(top), days=_days(overview), bars=tuple(bars))


def stage_chart(overview: Overview, stage: str) -> Chart:
    """A stage's p50 and p95 per day, in milliseconds, as two lines."""
    figures = [day.stages[stage] for day in overview.days]
    top = nice_top(max((f.p95 or 0 for f in figures), default=0))
    labels = _days(overview)
    lines: list[Line] = []
    for name, colour in PERCENTILE_COLOURS.items():
        points: list[Point | None] = []
        for label, figure in zip(labels, figures, strict=True):
            value = figure.p50 if name == "p50" else figure.p95
            if value is None:
                points.append(None)
            else:
                points.append(Point(label.x, _y(value, top), label.day, name, value))
        lines.append(Line(name, colour, tuple(p for p in points if p), _runs(points)))
    return Chart(ticks=_scale(top), days=labels, lines=tuple(lines))


def _runs(points: list[Point | None]) -> tuple[str, ...]:
    runs: list[list[Point]] = [[]]
    for point in points:
        if point is None:
            runs.append([])
        else:
            runs[-1].append(point)
    return tuple(" ".join(f"{p.x},{p.y}" for p in run) for run in runs if len(run) > 1)
