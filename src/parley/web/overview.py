"""The dashboard's overview (issue #42, item 5): the last 7 days of the organization's
conversations as charts, how they ended and each stage's p50 and p95 per day
(services/overview.py has the rules; web/charts.py draws them)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from parley.services import overview
from parley.web import charts
from parley.web.render import PageRoute, page
from parley.web.session import Visitor, context_of, visitor

router = APIRouter(prefix="/dashboard", route_class=PageRoute, include_in_schema=False)
SignedIn = Annotated[Visitor, Depends(visitor)]


@router.get("/overview")
async def overview_page(request: Request, signed_in: SignedIn) -> Response:
    week = await overview.week_overview(context_of(request), org_id=signed_in.org_id)
    return await page(
        request,
        signed_in,
        "overview.html",
        week=week,
        endings_chart=charts.endings_chart(week),
        stage_charts={stage: charts.stage_chart(week, stage) for stage in week.stages_seen},
        stages=overview.STAGES,
        colours=charts.COLOURS,
        percentile_colours=charts.PERCENTILE_COLOURS,
        margins=(charts.LEFT, charts.RIGHT, charts.BOTTOM),
    )
