"""The overview's chart geometry (web/charts.py): round gridlines that cover the largest
figure, bars stacked without gap or overlap, lines broken by a day without data."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from parley.services.overview import ENDINGS, STAGES, DayFigures, Overview, StageFigures
from parley.web import charts


def week(endings: list[dict[str, int]], total: list[StageFigures]) -> Overview:
    empty = StageFigures(0, None, None)
    return Overview(
        days=tuple(
            DayFigures(
                day=date(2031, 3, 6) + timedelta(days=i),
                endings={**dict.fromkeys(ENDINGS, 0), **endings[i]},
                stages={**dict.fromkeys(STAGES, empty), "total": total[i]},
            )
            for i in range(7)
        )
    )


@pytest.mark.parametrize(
    ("maximum", "step"),
    [(0, 1), (1, 1), (4, 1), (5, 2), (7, 2), (40, 10), (2400, 1000), (1210, 500)],
)
def test_nice_step_is_one_two_or_five_times_a_power_of_ten(maximum: int, step: int) -> None:
    assert charts.nice_step(maximum) == step


def test_bars_stack_on_one_scale_under_round_gridlines() -> None:
    none = StageFigures(0, None, None)
    overview = week([{"user": 3, "api": 2}, {}, {}, {}, {}, {}, {"error": 1}], [none] * 7)

    chart = charts.endings_chart(overview)

    assert [t.value for t in chart.ticks] == [0, 2, 4, 6]  # 5 conversations: the top is 6
    first = [b for b in chart.bars if b.day == "2031-03-06"]
    assert [(b.ending, b.value) for b in first] == [("user", 3), ("api", 2)]
    assert first[0].y == pytest.approx(first[1].y + first[1].height)  # api sits on user
    per_unit = [b.height / b.value for b in chart.bars]  # one scale (coordinates to 0.1)
    assert max(per_unit) - min(per_unit) < 0.1, per_unit
    bottom = chart.ticks[0].y
    assert first[0].y + first[0].height == pytest.approx(bottom)


def test_stage_line_broken_by_a_day_without_data() -> None:
    figures = (
        [StageFigures(2, 300, 900), StageFigures(1, 350, 350)]
        + [StageFigures(0, None, None)]
        + [StageFigures(1, 400, 400)] * 4
    )
    overview = week([{}] * 7, figures)

    chart = charts.stage_chart(overview, "total")

    p50 = next(line for line in chart.lines if line.percentile == "p50")
    assert [p.value for p in p50.points] == [300, 350, 400, 400, 400, 400]
    assert len(p50.runs) == 2  # days 1-2, then days 4-7
    assert [t.value for t in chart.ticks] == [0, 500, 1000]
