"""Dashboard pages of agent test runs (API.md section 19): a page per project listing its
test scenarios and latest runs, with a button that queues a run (of every scenario, or of
those ticked), and a run's page: each scenario's result, each failure as the runner wrote
it, and a link to the conversation the scenario's caller held (its recording and
transcript are on that page).

Scenarios are made and changed through the API (`parley test run` and CI read them from
there); the dashboard shows them and runs them. A run is queued exactly as `POST
/v1/projects/{nameOrId}/test_runs` queues one (services/scenario_runs.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from parley.error_status import status_for
from parley.errors import ValidationFailed
from parley.records import RunStatus, ScenarioResult, ScenarioRun
from parley.services import projects, scenario_runs, scenarios
from parley.web.form_state import FORM_ERRORS, FailedForm
from parley.web.render import PageRoute, done, notice, page
from parley.web.session import Visitor, checked_form, context_of, visitor
from parley.web.tools import every

router = APIRouter(prefix="/dashboard", route_class=PageRoute, include_in_schema=False)
SignedIn = Annotated[Visitor, Depends(visitor)]
RUNS_SHOWN: Final = 50
"""The latest runs a project's page lists."""
REFRESH_SECONDS: Final = 2
"""A run's page reloads itself this often while the run is queued or running."""
UNFINISHED: Final = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})


async def _form(request: Request, signed_in: SignedIn) -> FormData:
    return await checked_form(request, signed_in)


CheckedForm = Annotated[FormData, Depends(_form)]


def caller_summary(caller: Mapping[str, Any]) -> str:
    """A scenario's caller in a few words: its lines counted, or its goal's turns."""
    if "lines" in caller:
        count = len(caller["lines"])
        return f"scripted, {count} line{'s' if count != 1 else ''}"
    return f"goal, at most {caller.get('max_turns', scenarios.DEFAULT_MAX_TURNS)} turns"


def rows_of(run: ScenarioRun) -> list[tuple[str, ScenarioResult | None]]:
    """Each scenario of the run in the order it was made with, and its result (None while
    it has none yet)."""
    results = {result.scenario: result for result in run.results}
    return [(str(spec["name"]), results.get(str(spec["name"]))) for spec in run.scenarios]


def tally(run: ScenarioRun) -> str:
    """A run's results counted for its list: "2 passed, 1 failed of 4"."""
    passed = sum(result.passed for result in run.results)
    failed = len(run.results) - passed
    return f"{passed} passed, {failed} failed of {len(run.scenarios)}"


# --- the projects -----------------------------------------------------------------------


@router.get("/tests")
async def tests_page(request: Request, signed_in: SignedIn) -> Response:
    """The organization's projects, each with a link to its tests."""
    ctx = context_of(request)
    listed = await every(
        lambda cursor: projects.list_projects(
            ctx, org_id=signed_in.org_id, cursor=cursor, limit=100
        )
    )
    return await page(request, signed_in, "tests.html", projects=listed)


# --- a project's scenarios and runs ----------------------------------------------------


async def _project_page(
    request: Request, signed_in: Visitor, ref: str, *, status: int = 200, **extra: Any
) -> Response:
    ctx = context_of(request)
    project, runs = await scenario_runs.latest_runs(
        ctx, org_id=signed_in.org_id, project=ref, limit=RUNS_SHOWN
    )
    listed = await every(
        lambda cursor: scenarios.list_scenarios(
            ctx, org_id=signed_in.org_id, project=project.id, cursor=cursor, limit=100
        )
    )
    return await page(
        request,
        signed_in,
        "project_tests.html",
        status=status,
        project=project,
        scenarios=listed,
        runs=runs,
        caller_summary=caller_summary,
        tally=tally,
        notice=notice(request),
        **extra,
    )


@router.get("/projects/{project}/tests")
async def project_tests_page(request: Request, signed_in: SignedIn, project: str) -> Response:
    return await _project_page(request, signed_in, project)


@router.post("/projects/{project}/tests/runs")
async def start_run(
    request: Request, signed_in: SignedIn, form: CheckedForm, project: str
) -> Response:
    """Queue a run of the scenarios ticked (none ticked: every scenario of the project)."""
    ctx = context_of(request)
    try:
        chosen = _names(form.getlist("scenarios"))
        run = await scenario_runs.create_run(
            ctx,
            org_id=signed_in.org_id,
            project=project,
            names=chosen or None,
            server_url=scenario_runs.socket_url(
                request.scope.get("server"), public_url=ctx.public_url
            ),
        )
    except FORM_ERRORS as error:  # no scenario to run, or one deleted meanwhile
        failed = FailedForm.of("start-run", form, error)
        return await _project_page(
            request, signed_in, project, status=status_for(error), failed=failed
        )
    return done(f"/dashboard/test-runs/{run.id}", "test_run_queued")


def _names(values: Sequence[object]) -> list[str]:
    names = [value for value in values if isinstance(value, str) and value]
    if len(names) != len(values):
        raise ValidationFailed(param_errors={"scenarios": "must be names of scenarios"})
    return names


# --- a run ------------------------------------------------------------------------------


@router.get("/test-runs/{run_id}")
async def run_page(request: Request, signed_in: SignedIn, run_id: str) -> Response:
    """A run's results; the page reloads itself while the run is not finished."""
    ctx = context_of(request)
    run = await scenario_runs.get_run(ctx, org_id=signed_in.org_id, run_id=run_id)
    project = await projects.get_project(ctx, org_id=signed_in.org_id, ref=run.project_id)
    unfinished = run.status in UNFINISHED
    return await page(
        request,
        signed_in,
        "test_run.html",
        run=run,
        project=project,
        rows=rows_of(run),
        tally=tally(run),
        refresh=REFRESH_SECONDS if unfinished else None,
        notice=notice(request) if unfinished else None,  # "queued" is true until it ends
    )
