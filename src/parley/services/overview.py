"""The dashboard's overview (issue #42, item 5): the last 7 days of an organization's
conversations, how they ended and how long each stage of a reply took.

Rules:
1. The week is the 7 UTC days that end today (the clock's day), each whole; a day without
   conversations is shown, with zeros.
2. A conversation belongs to the UTC day it was created on, and is counted by its
   `ended_by`, or as `not_ended` while it has not ended.
3. Per stage and day, p50 and p95 are nearest-rank percentiles of that day's samples: the
   smallest sample that at least p % of them do not exceed (always a measured figure, never
   interpolated). A stage without a sample that day has neither ("no data").
4. The stages are API.md section 18's: `total` is each reply's `latencies_ms` entry; the
   others come from `analysis.turns` (`stage_samples`).
5. Bounded work: only the week's conversations are read (an index range); the counts are
   made by the database, and the percentiles from one counter of millisecond values per day
   and stage (its size is the number of distinct values, not the number of samples).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Final

from parley.clock import utcnow
from parley.db.repos import overview as overview_repo
from parley.records import ConversationTimings, EndedBy
from parley.services.context import Context

__all__ = [
    "DAYS",
    "ENDINGS",
    "NOT_ENDED",
    "STAGES",
    "DayFigures",
    "Overview",
    "StageFigures",
    "nearest_rank",
    "stage_samples",
    "week_bounds",
    "week_overview",
]

DAYS: Final = 7
NOT_ENDED: Final = "not_ended"
ENDINGS: Final = (*(ended_by.value for ended_by in EndedBy), NOT_ENDED)
"""Every way to be counted (rule 2), in the order the overview lists them."""
STAGES: Final = (
    "endpointing",
    "transcription",
    "model_first_token",
    "speech_first_audio",
    "total",
    "played",
)
"""API.md section 18's stages of a reply, each `<stage>_ms` in `analysis.turns`."""
PERCENTILES: Final = (50, 95)


@dataclass(frozen=True, slots=True)
class StageFigures:
    """One stage on one day (rule 3): None without samples."""

    samples: int
    p50: int | None
    p95: int | None


@dataclass(frozen=True, slots=True)
class DayFigures:
    """One UTC day of the week."""

    day: date
    endings: Mapping[str, int]
    """Conversations per way of ending (every one of `ENDINGS`, zeros included)."""
    stages: Mapping[str, StageFigures]
    """Every one of `STAGES`."""

    @property
    def conversations(self) -> int:
        return sum(self.endings.values())


@dataclass(frozen=True, slots=True)
class Overview:
    """The week, oldest day first."""

    days: tuple[DayFigures, ...]

    @property
    def endings_seen(self) -> tuple[str, ...]:
        """The ways of ending that occurred this week, in `ENDINGS`' order."""
        return tuple(e for e in ENDINGS if any(day.endings[e] for day in self.days))

    @property
    def stages_seen(self) -> tuple[str, ...]:
        """The stages with at least one sample this week, in `STAGES`' order."""
        return tuple(s for s in STAGES if any(day.stages[s].samples for day in self.days))


def stage_samples(timings: ConversationTimings) -> Mapping[str, Sequence[int]]:
    """One conversation's samples per stage (rule 4): `total` from `latencies_ms` (which
    conversations stored before `analysis.turns` have too), every other stage from
    `analysis.turns`, each turn's `<stage>_ms` that is not None a sample of `<stage>`."""
    samples: dict[str, Sequence[int]] = {"total": timings.latencies_ms}
    for stage in STAGES:
        if stage != "total":
            values = (turn.get(f"{stage}_ms") for turn in timings.turns)
            samples[stage] = [int(value) for value in values if value is not None]
    return samples


def nearest_rank(counts: Counter[int], percent: int) -> int | None:
    """The nearest-rank percentile (rule 3) of the samples counted in `counts`; None for
    none. The rank is ceil(percent * n / 100), in integers."""
    total = counts.total()
    if total == 0:
        return None
    rank = -(-percent * total // 100)
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return value
    raise AssertionError("unreachable: the counts add up to their total")


def week_bounds(today: date) -> list[datetime]:
    """The midnights (UTC) that bound the week's days: 8 instants for 7 days."""
    first = today - timedelta(days=DAYS - 1)
    return [datetime.combine(first + timedelta(days=i), time(), UTC) for i in range(DAYS + 1)]


async def week_overview(ctx: Context, *, org_id: str) -> Overview:
    """The organization's last 7 days (rules 1-5), oldest first."""
    bounds = week_bounds(utcnow(ctx.clock).date())
    endings = [dict.fromkeys(ENDINGS, 0) for _ in range(DAYS)]
    values: list[dict[str, Counter[int]]] = [{s: Counter() for s in STAGES} for _ in range(DAYS)]
    async with ctx.db.read() as session:
        for counted in await overview_repo.endings(session, org_id, bounds):
            endings[counted.day][counted.ended_by or NOT_ENDED] += counted.count
        async for timings in overview_repo.timings(session, org_id, bounds):
            day = (timings.created_at.date() - bounds[0].date()).days
            for stage, samples in stage_samples(timings).items():
                values[day][stage].update(samples)
    return Overview(
        days=tuple(
            DayFigures(
                day=(bounds[0] + timedelta(days=index)).date(),
                endings=endings[index],
                stages={stage: _figures(counts) for stage, counts in values[index].items()},
            )
            for index in range(DAYS)
        )
    )


def _figures(counts: Counter[int]) -> StageFigures:
    p50, p95 = (nearest_rank(counts, percent) for percent in PERCENTILES)
    return StageFigures(samples=counts.total(), p50=p50, p95=p95)
