"""The dashboard's overview charts in headless Chromium against a real uvicorn server (issue
#42, item 5): conversations made over the last week with known endings and latencies, the
overview opened, every bar's and every point's value read from the SVG (its `data-value`)
and compared with what the API lists (`GET /v1/conversations`), counted and ranked by the
test itself. The page loads nothing from elsewhere and breaks no rule of its policy, and
its charts are images named by their titles, for a screen reader."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from playwright.async_api import Browser, ConsoleMessage, Request

from parley.records import EndedBy
from tests.e2e.conftest import Server
from tests.e2e.test_dashboard_browser import app, chromium, database_url, shot, sign_in
from tests.factories import make_conversation_at, make_org

__all__ = ["app", "chromium", "database_url"]  # the fixtures of the dashboard's story

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

PLAN: list[tuple[int, EndedBy | None, tuple[int, ...]]] = [
    # (days ago, ended_by or None for not ended, latencies_ms)
    (0, EndedBy.USER, (310, 420, 505)),
    (0, EndedBy.USER, (290,)),
    (0, EndedBy.ASSISTANT, (350, 1210)),
    (0, None, ()),
    (1, EndedBy.API, (600, 380)),
    (1, EndedBy.TIMEOUT, ()),
    (3, EndedBy.ERROR, (2400,)),
    (3, EndedBy.USER, (450, 470, 480, 490, 900)),
    (6, EndedBy.TRANSFERRED, (330,)),
    (7, EndedBy.USER, (999,)),  # a day before the week: not shown
]


def nearest_rank(samples: list[int], percent: int) -> int:
    """The smallest sample that at least `percent` % of them do not exceed."""
    return sorted(samples)[math.ceil(percent * len(samples) / 100) - 1]


async def listed(api: httpx.AsyncClient) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, str | int] = {"limit": 100, **({"cursor": cursor} if cursor else {})}
        page = (await api.get("/v1/conversations", params=params)).json()
        found += page["conversations"]
        cursor = page["next_cursor"]
        if cursor is None:
            return found


def expected_from(conversations: list[dict[str, Any]], week: list[str]) -> tuple[Any, Any]:
    """What the charts must show, from the API's conversations: counts per (day, ending),
    and the total stage's (day, percentile) -> ms."""
    counts: Counter[tuple[str, str]] = Counter()
    samples: defaultdict[str, list[int]] = defaultdict(list)
    for conversation in conversations:
        day = conversation["created_at"][:10]  # ISO 8601 UTC with Z: its UTC day
        if day in week:
            counts[(day, conversation["ended_by"] or "not_ended")] += 1
            samples[day] += conversation["analysis"]["latencies_ms"]
    points = {
        (day, f"p{percent}"): nearest_rank(values, percent)
        for day, values in samples.items()
        if values
        for percent in (50, 95)
    }
    return dict(counts), points


@pytest.mark.timeout(120)
async def test_overview_charts_show_the_api_conversations_of_the_week(
    app: FastAPI, server: Server, chromium: Browser
) -> None:
    ctx = app.state.context
    created = await make_org(ctx, "acme")
    now = datetime.fromtimestamp(ctx.clock.time(), tz=UTC)
    headers = {"Authorization": f"Bearer {created.api_key.secret}"}
    async with httpx.AsyncClient(base_url=server.http, headers=headers) as api:
        assert (await api.post("/v1/agents", json={"name": "support"})).status_code == 201
        for days_ago, ended_by, latencies in PLAN:
            await make_conversation_at(
                ctx, created.org.id, "support", now - timedelta(days=days_ago),
                ended_by=ended_by, latencies_ms=latencies,
            )  # fmt: skip
        conversations = await listed(api)
    assert len(conversations) == len(PLAN)
    today = now.date()
    week = [(today - timedelta(days=n)).isoformat() for n in range(6, -1, -1)]
    counts, points = expected_from(conversations, week)
    assert sum(counts.values()) == len(PLAN) - 1  # the one before the week is left out

    context = await chromium.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    refused: list[str] = []
    page.on("console", lambda m: _note_refusal(m, refused))
    requests: list[str] = []
    page.on("request", lambda r: _note_request(r, requests))
    await sign_in(page, server, created.api_key.secret)
    await page.click("a.brand")  # the brand leads to the overview, from every page
    await page.wait_for_url("**/dashboard/overview")
    await shot(page, "overview")

    bars = await page.eval_on_selector_all(
        "#endings-chart rect.bar",
        "rs => rs.map(r => ({day: r.dataset.day, ending: r.dataset.ending,"
        " value: +r.dataset.value, y: +r.getAttribute('y'), height: +r.getAttribute('height'),"
        " fill: r.getAttribute('fill')}))",
    )
    assert {(b["day"], b["ending"]): b["value"] for b in bars} == counts
    assert len(bars) == len(counts)
    per_unit = {round(b["height"] / b["value"], 3) for b in bars}  # one scale for every bar
    assert max(per_unit) - min(per_unit) < 0.1, per_unit
    colours = defaultdict(set)
    for bar in bars:
        colours[bar["ending"]].add(bar["fill"])
    assert all(len(c) == 1 for c in colours.values()), colours  # one colour per ending
    assert len({next(iter(c)) for c in colours.values()}) == len(colours)

    drawn = await page.eval_on_selector_all(
        "circle.point[data-stage=total]",
        "cs => cs.map(c => ({day: c.dataset.day, p: c.dataset.percentile,"
        " value: +c.dataset.value, y: +c.getAttribute('cy')}))",
    )
    assert {(p["day"], p["p"]): p["value"] for p in drawn} == points
    y = {(p["day"], p["p"]): p["y"] for p in drawn}
    for day in {d for d, _ in points}:  # the slower figure is drawn higher
        assert y[(day, "p95")] <= y[(day, "p50")]

    table = await page.eval_on_selector_all(
        "#endings tbody td[data-ending]",
        "ts => ts.map(t => [t.closest('tr').dataset.day, t.dataset.ending, +t.dataset.value])",
    )
    shown = {(day, ending): value for day, ending, value in table if ending != "total"}
    assert {key: value for key, value in shown.items() if value} == counts
    assert [row[0] for row in table if row[1] == "total"] == week  # every day, empty ones too
    for day, ending, value in table:
        if ending == "total":
            assert value == sum(n for (d, _), n in counts.items() if d == day)

    chart = page.get_by_role("img", name="Conversations per day, by how they ended")
    assert await chart.count() == 1
    for stage in ("endpointing", "transcription", "model_first_token", "played"):
        assert await page.inner_text(f"#stage-{stage} .no-data") == "No data in the last 7 days."
    assert refused == []
    assert all(url.startswith(server.http) for url in requests), requests
    await context.close()


def _note_refusal(message: ConsoleMessage, refused: list[str]) -> None:
    if message.type in ("error", "warning"):
        refused.append(message.text)


def _note_request(request: Request, requests: list[str]) -> None:
    requests.append(request.url)


def test_expected_from_counts_the_week_and_ranks_each_day() -> None:
    """The test's own arithmetic, checked on figures worked out by hand."""
    day = date(2031, 3, 12).isoformat()
    conversations: list[dict[str, Any]] = [
        {"created_at": f"{day}T10:00:00.000Z", "ended_by": "user",
         "analysis": {"latencies_ms": [500, 100, 300]}},
        {"created_at": f"{day}T23:59:59.999Z", "ended_by": None,
         "analysis": {"latencies_ms": [200, 400]}},
        {"created_at": "2031-03-05T12:00:00.000Z", "ended_by": "user",
         "analysis": {"latencies_ms": [9]}},
    ]  # fmt: skip
    counts, points = expected_from(conversations, [day])
    assert counts == {(day, "user"): 1, (day, "not_ended"): 1}
    assert points == {(day, "p50"): 300, (day, "p95"): 500}
