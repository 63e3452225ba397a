"""The dashboard overview's figures (services/overview.py, issue #42 item 5), one test per
rule, on SQLite and PostgreSQL: the week of 7 UTC days with its empty days, the day a
conversation belongs to, every `ended_by` counted, nearest-rank p50 and p95 per day, and
the week read through the index rather than the organization's whole history."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Select, insert, text
from sqlalchemy.ext.asyncio import AsyncConnection

from parley.db.repos import overview as overview_repo
from parley.db.tables import ConversationRow
from parley.records import EndedBy, TurnTiming
from parley.services import Context, overview
from tests.factories import FixedClock, make_agent, make_conversation_at, make_org

pytestmark = pytest.mark.anyio

NOW = datetime(2031, 3, 12, 15, 30, tzinfo=UTC)
TODAY = NOW.date()
MIDNIGHT = datetime(2031, 3, 12, tzinfo=UTC)


def at_today(ctx: Context) -> Context:
    return dataclasses.replace(ctx, clock=FixedClock(NOW))


async def org_with_agent(ctx: Context) -> tuple[str, str]:
    org = await make_org(ctx)
    agent = await make_agent(ctx, org.org.id)
    return org.org.id, agent.name


async def test_overview_week_is_seven_utc_days_ending_today_empty_days_zero(ctx: Context) -> None:
    org_id, _ = await org_with_agent(ctx)

    week = await overview.week_overview(at_today(ctx), org_id=org_id)

    assert [day.day for day in week.days] == [TODAY - timedelta(days=n) for n in range(6, -1, -1)]
    for day in week.days:
        assert set(day.endings) == set(overview.ENDINGS)
        assert day.conversations == 0
        assert set(day.stages) == set(overview.STAGES)
        assert all(f == overview.StageFigures(0, None, None) for f in day.stages.values())
    assert week.endings_seen == ()
    assert week.stages_seen == ()


async def test_overview_conversation_belongs_to_its_utc_creation_day(ctx: Context) -> None:
    org_id, agent = await org_with_agent(ctx)
    first_midnight = MIDNIGHT - timedelta(days=6)
    moments = {
        "before the week": first_midnight - timedelta(microseconds=1),
        "first day, at midnight": first_midnight,
        "yesterday, last moment": MIDNIGHT - timedelta(microseconds=1),
        "today, at midnight": MIDNIGHT,
        "today, now": NOW,
        "tomorrow": MIDNIGHT + timedelta(days=1),
    }
    for moment in moments.values():
        await make_conversation_at(ctx, org_id, agent, moment, ended_by=EndedBy.USER)

    week = await overview.week_overview(at_today(ctx), org_id=org_id)

    counted = {day.day: day.endings["user"] for day in week.days}
    assert counted == {
        first_midnight.date(): 1,
        TODAY - timedelta(days=5): 0,
        TODAY - timedelta(days=4): 0,
        TODAY - timedelta(days=3): 0,
        TODAY - timedelta(days=2): 0,
        TODAY - timedelta(days=1): 1,
        TODAY: 2,
    }


async def test_overview_counts_each_ended_by_and_the_not_ended(ctx: Context) -> None:
    org_id, agent = await org_with_agent(ctx)
    yesterday = NOW - timedelta(days=1)
    for ended_by in EndedBy:
        await make_conversation_at(ctx, org_id, agent, yesterday, ended_by=ended_by)
    await make_conversation_at(ctx, org_id, agent, yesterday)  # pending: not ended
    await make_conversation_at(ctx, org_id, agent, NOW, ended_by=EndedBy.API)
    await make_conversation_at(ctx, org_id, agent, NOW, ended_by=EndedBy.API)
    other_id, other_agent = await org_with_agent(ctx)  # another organization's: not counted
    await make_conversation_at(ctx, other_id, other_agent, NOW, ended_by=EndedBy.API)

    week = await overview.week_overview(at_today(ctx), org_id=org_id)

    by_day = {day.day: day for day in week.days}
    assert by_day[yesterday.date()].endings == dict.fromkeys(overview.ENDINGS, 1)
    assert by_day[TODAY].endings == {**dict.fromkeys(overview.ENDINGS, 0), "api": 2}
    assert by_day[TODAY].conversations == 2
    assert week.endings_seen == overview.ENDINGS
    assert overview.ENDINGS[-1] == overview.NOT_ENDED


@pytest.mark.parametrize(
    ("samples", "p50", "p95"),
    [
        ([], None, None),
        ([420], 420, 420),
        ([300, 100], 100, 300),
        ([500, 100, 400, 200, 300], 300, 500),
        (list(range(1, 21)), 10, 19),
        (list(range(1, 101)), 50, 95),
        ([7, 7, 7, 900], 7, 900),
        ([100] * 19 + [5000], 100, 100),
    ],
    ids=["none", "one", "two", "five", "twenty", "hundred", "ties", "one-slow-in-twenty"],
)
def test_percentile_is_nearest_rank_smallest_sample_covering_p_percent(
    samples: list[int], p50: int | None, p95: int | None
) -> None:
    counts = Counter(samples)
    assert overview.nearest_rank(counts, 50) == p50
    assert overview.nearest_rank(counts, 95) == p95


async def test_overview_total_stage_p50_p95_per_day_from_latencies(ctx: Context) -> None:
    org_id, agent = await org_with_agent(ctx)
    two_days_ago = NOW - timedelta(days=2)
    await make_conversation_at(
        ctx, org_id, agent, two_days_ago, ended_by=EndedBy.USER, latencies_ms=(300, 100)
    )
    await make_conversation_at(
        ctx, org_id, agent, two_days_ago, ended_by=EndedBy.ASSISTANT, latencies_ms=(200, 400, 500)
    )
    await make_conversation_at(ctx, org_id, agent, NOW, ended_by=EndedBy.USER, latencies_ms=(640,))
    await make_conversation_at(ctx, org_id, agent, NOW, ended_by=EndedBy.ERROR)  # no replies

    week = await overview.week_overview(at_today(ctx), org_id=org_id)

    totals = {day.day: day.stages["total"] for day in week.days}
    assert totals[two_days_ago.date()] == overview.StageFigures(samples=5, p50=300, p95=500)
    assert totals[TODAY] == overview.StageFigures(samples=1, p50=640, p95=640)
    quiet = [d for d in totals if d not in (two_days_ago.date(), TODAY)]
    assert all(totals[d] == overview.StageFigures(0, None, None) for d in quiet)
    assert week.stages_seen == ("total",)  # no conversation stored its stages
    for day in week.days:
        for stage in set(overview.STAGES) - {"total"}:
            assert day.stages[stage].samples == 0


def turn(endpointing: int, total: int, played: int | None = None) -> TurnTiming:
    return TurnTiming(
        endpointing_ms=endpointing,
        transcription_ms=10,
        model_first_token_ms=20,
        speech_first_audio_ms=30,
        total_ms=total,
        played_ms=played,
    )


async def test_overview_each_stage_p50_p95_per_day_from_the_stored_turns(ctx: Context) -> None:
    org_id, agent = await org_with_agent(ctx)
    turns = (turn(100, 300), turn(300, 500, played=600), turn(200, 400))
    await make_conversation_at(
        ctx, org_id, agent, NOW, ended_by=EndedBy.USER, latencies_ms=(300, 500, 400), turns=turns
    )

    week = await overview.week_overview(at_today(ctx), org_id=org_id)

    [today] = [day for day in week.days if day.day == TODAY]
    assert today.stages["endpointing"] == overview.StageFigures(samples=3, p50=200, p95=300)
    assert today.stages["transcription"] == overview.StageFigures(samples=3, p50=10, p95=10)
    assert today.stages["total"] == overview.StageFigures(samples=3, p50=400, p95=500)
    # `played_ms` is None but on calls: only the one turn that has it is a sample.
    assert today.stages["played"] == overview.StageFigures(samples=1, p50=600, p95=600)
    assert set(week.stages_seen) == set(overview.STAGES)


async def test_overview_reads_only_the_week_through_the_creation_index(ctx: Context) -> None:
    """Both queries are range reads of `ix_conversations_org_id_created_at` for the week,
    on an organization with a year of history (statistics gathered): never a scan of its
    (or everyone's) history."""
    org_id, _ = await org_with_agent(ctx)
    year = [
        {"org_id": org_id, "id": f"conv-history-{n}", "status": "ended",
         "created_at": NOW - timedelta(hours=3 * n)}
        for n in range(3000)
    ]  # fmt: skip
    async with ctx.db.transaction() as session:
        await session.execute(insert(ConversationRow), year)
    async with ctx.db.transaction() as session:
        await session.execute(text("ANALYZE"))
    bounds = overview.week_bounds(TODAY)
    async with ctx.db.read() as session:
        connection = await session.connection()
        for query in (
            overview_repo.endings_query(org_id, bounds),
            overview_repo.timings_query(org_id, bounds),
        ):
            plan = await explained(connection, query)
            assert "ix_conversations_org_id_created_at" in plan, plan
            if connection.dialect.name == "sqlite":
                assert "created_at>? AND created_at<?" in plan, plan
                assert "SCAN conversations" not in plan, plan
            else:
                assert "Index Cond: (((org_id)::text = " in plan, plan
                assert "AND (created_at >= " in plan, plan
                assert "Seq Scan" not in plan, plan


async def explained(connection: AsyncConnection, query: Select[*tuple[Any, ...]]) -> str:
    """The database's plan of `query`, as one line."""
    compiled = query.compile(dialect=connection.dialect)
    values = compiled.construct_params()
    sqlite = connection.dialect.name == "sqlite"
    positional = tuple(
        str(value.astimezone(UTC).replace(tzinfo=None)) if sqlite and isinstance(value, datetime)
        else value
        for value in (values[name] for name in compiled.positiontup or ())
    )  # fmt: skip
    prefix = "EXPLAIN QUERY PLAN" if sqlite else "EXPLAIN"
    found = await connection.exec_driver_sql(f"{prefix} {compiled}", positional)
    return " ".join(str(row[-1]) for row in found)
