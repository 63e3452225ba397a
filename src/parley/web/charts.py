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

LEFT, RIGHT, TOP, BOTTOM = 48, 12, 12, 30
"""The plot's margins inside the view box: the axis labels' room."""
WIDE = (640, 220)
"""The endings chart's view box, drawn the width of the page."""
NARROW = (420, 200)
"""A stage's chart, drawn half the width of the page: its text stays as large."""
TICKS = 4
PALETTE = (
    "#2856c7", "#e69f00", "#009e73", "#cc79a7", "#b42318", "#56b4e9", "#8c6d31",
    "#d4c21a", "#7f3c8d", "#17becf", "#4d4d4d", "#bcbd22", "#1b3a6b", "#e73f74",
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
    width: int
    height: int
    ticks: tuple[Tick, ...]
    days: tuple[DayLabel, ...]
    bars: tuple[Bar, ...] = ()
    lines: tuple[Line, ...] = ()


def nice_step(maximum: float) -> int:
    """The smallest step of 1, 2 or 5 times a power of ten (at least 1) with which `TICKS`
    steps reach `maximum`: the axis's gridlines fall on round figures."""
    wanted = max(maximum / TICKS, 1)
    power = 10 ** math.floor(math.log10(wanted))
    return next(int(step * power) for step in (1, 2, 5, 10) if step * power >= wanted)


@dataclass(frozen=True, slots=True)
class _Frame:
    """A chart's view box and its vertical scale, 0 to `top`."""

    width: int
    height: int
    top: int

    @classmethod
    def of(cls, size: tuple[int, int], maximum: float) -> _Frame:
        step = nice_step(maximum)
        return cls(*size, top=step * max(1, math.ceil(maximum / step)))

    @property
    def slot(self) -> float:
        return (self.width - LEFT - RIGHT) / 7

    def y(self, value: float) -> float:
        return round(TOP + (self.height - TOP - BOTTOM) * (1 - value / self.top), 1)

    def ticks(self) -> tuple[Tick, ...]:
        step = nice_step(self.top)
        return tuple(Tick(y=self.y(v), value=v) for v in range(0, self.top + 1, step))

    def days(self, overview: Overview) -> tuple[DayLabel, ...]:
        return tuple(
            DayLabel(
                x=round(LEFT + self.slot * (i + 0.5), 1),
                day=d.day.isoformat(),
                text=f"{d.day:%a %d}",
            )
            for i, d in enumerate(overview.days)
        )


def endings_chart(overview: Overview) -> Chart:
    """A bar per day, stacked by way of ending (the week's ways, in `ENDINGS`' order)."""
    frame = _Frame.of(WIDE, max(day.conversations for day in overview.days))
    width = round(frame.slot * 0.6, 1)
    bars: list[Bar] = []
    for index, day in enumerate(overview.days):
        below = 0
        x = round(LEFT + frame.slot * index + (frame.slot - width) / 2, 1)
        for ending in overview.endings_seen:
            value = day.endings[ending]
            if value:
                y = frame.y(below + value)
                height = round(frame.y(below) - y, 1)
                bars.append(
                    Bar(x, y, width, height, day.day.isoformat(), ending, value, COLOURS[ending])
                )
                below += value
    return Chart(*WIDE, ticks=frame.ticks(), days=frame.days(overview), bars=tuple(bars))


def stage_chart(overview: Overview, stage: str) -> Chart:
    """A stage's p50 and p95 per day, in milliseconds, as two lines."""
    figures = [day.stages[stage] for day in overview.days]
    frame = _Frame.of(NARROW, max((f.p95 or 0 for f in figures), default=0))
    labels = frame.days(overview)
    lines: list[Line] = []
    for name, colour in PERCENTILE_COLOURS.items():
        points: list[Point | None] = []
        for label, figure in zip(labels, figures, strict=True):
            value = figure.p50 if name == "p50" else figure.p95
            if value is None:
                points.append(None)
            else:
                points.append(Point(label.x, frame.y(value), label.day, name, value))
        lines.append(Line(name, colour, tuple(p for p in points if p), _runs(points)))
    return Chart(*NARROW, ticks=frame.ticks(), days=labels, lines=tuple(lines))


def _runs(points: list[Point | None]) -> tuple[str, ...]:
    runs: list[list[Point]] = [[]]
    for point in points:
        if point is None:
            runs.append([])
        else:
            runs[-1].append(point)
    return tuple(" ".join(f"{p.x},{p.y}" for p in run) for run in runs if len(run) > 1)
